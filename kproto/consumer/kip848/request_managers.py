"""Builds the KIP-848 engine's background resources (Java's ``RequestManagers``).

Owns the wiring, done once on the background thread: the network client and its
delegate, the request managers in the order the loop polls them (coordinator, commit,
heartbeat, membership, offsets, fetch; the group ones only with a ``group_id``), the
listeners between them (the commit manager follows the member epoch; the membership
manager commits through it before revoking), and the application event processor.
Topic metadata is refreshed by the network client's own metadata loop, so there is no
separate topic-metadata manager.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from kproto.consumer.background.consumer_network_thread import Resources
from kproto.consumer.background.coordinator_request_manager import CoordinatorRequestManager
from kproto.consumer.background.events import BackgroundEventHandler
from kproto.consumer.background.member_state import MemberState
from kproto.consumer.background.network_client_delegate import NetworkClientDelegate
from kproto.consumer.engine_setup import EngineSetup
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.kip848.application_event_processor import ConsumerApplicationEventProcessor
from kproto.consumer.kip848.commit_request_manager import CommitRequestManager
from kproto.consumer.kip848.consumer_heartbeat_request_manager import ConsumerHeartbeatRequestManager
from kproto.consumer.kip848.consumer_membership_manager import ConsumerMembershipManager
from kproto.consumer.kip848.fetch_request_manager import FetchRequestManager
from kproto.consumer.kip848.offsets_request_manager import OffsetsRequestManager
from kproto.metrics.selector_metrics import selector_metrics
from kproto.net.client import NetworkClient


def rebalance_metrics_listener(sensors: Any) -> Callable[[MemberState, MemberState], None]:
    """Member state transitions as rebalance metrics (Java's ConsumerRebalanceMetricsManager):
    a rebalance starts when reconciling begins and ends when the reconciled assignment is
    acknowledged (or found stable); being fenced or failing fatally counts as failed."""

    def on_transition(previous: MemberState, new: MemberState) -> None:
        if new is MemberState.RECONCILING:
            sensors.rebalance_started()
        elif previous is MemberState.RECONCILING and new in (MemberState.ACKNOWLEDGING, MemberState.STABLE):
            sensors.rebalance_ended()
        elif new in (MemberState.FENCED, MemberState.FATAL):
            sensors.rebalance_failed()

    return on_transition


def build_resources(setup: EngineSetup, fetch_buffer: FetchBuffer, background_event_handler: BackgroundEventHandler,
                    time_ms: Callable[[], int]) -> Resources:
    """The background resources of the engine ``setup`` describes (its settings, the
    subscriptions, and the metrics, None when they are off)."""
    settings = setup.settings
    fetch_config = settings.fetch
    subscriptions = setup.subscriptions
    fetch_metrics = setup.fetch_metrics
    coordinator_metrics = setup.coordinator_metrics
    # The network metrics share the fetch metrics' registry (both None when metrics are off).
    client = NetworkClient(network_listener=selector_metrics(
        setup.metrics, settings.metric_group_prefix,
        getattr(fetch_metrics, "throttle_time", None)), config=settings.network)
    metadata = client.cluster
    now = time_ms()
    group = settings.group
    retry_backoff_ms = group.retry_backoff_ms
    retry_backoff_max_ms = group.retry_backoff_max_ms
    delegate = NetworkClientDelegate(client, group.request_timeout_ms, time_ms)

    coordinator = commit = heartbeat = membership = None
    group_id = group.group_id
    if group_id:
        coordinator = CoordinatorRequestManager(group_id, retry_backoff_ms, retry_backoff_max_ms,
                                                add_coordinator=metadata.add_coordinator)
        auto_commit = group.enable_auto_commit
        commit = CommitRequestManager(
            group_id, subscriptions, coordinator, auto_commit_enabled=auto_commit,
            auto_commit_interval_ms=group.auto_commit_interval_ms,
            group_instance_id=group.group_instance_id, retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms, require_stable=group.require_stable, now_ms=now,
            time_ms=time_ms, topic_ids=metadata.topic_ids, request_metadata_update=client.request_metadata_update)
        membership = ConsumerMembershipManager(
            group_id, subscriptions, background_event_handler,
            topic_name_for_id=metadata.topic_name, request_metadata_update=client.request_metadata_update,
            group_instance_id=group.group_instance_id, rack_id=group.rack_id,
            server_assignor=group.group_remote_assignor,
            rebalance_timeout_ms=group.rebalance_timeout_ms,
            auto_commit_before_rebalance=commit.maybe_auto_commit_sync_before_rebalance if auto_commit else None,
            time_ms=time_ms)
        membership.register_state_listener(commit)
        if coordinator_metrics is not None:
            commit.sensors = coordinator_metrics
            membership.register_transition_listener(rebalance_metrics_listener(coordinator_metrics))
        heartbeat = ConsumerHeartbeatRequestManager(
            now, coordinator, membership, subscriptions, background_event_handler,
            max_poll_interval_ms=group.rebalance_timeout_ms, retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms)
        heartbeat.sensors = coordinator_metrics

    offsets = OffsetsRequestManager(subscriptions, metadata, commit,
                                    default_api_timeout_ms=settings.default_api_timeout_ms,
                                    isolation_level=fetch_config.isolation_level,
                                    request_timeout_ms=group.request_timeout_ms,
                                    retry_backoff_ms=retry_backoff_ms, time_ms=time_ms,
                                    on_positions_progress=fetch_buffer.wakeup)

    def node_unavailable(node_id: int) -> bool:
        # A node that failed and is backing off; a node still connecting is "available":
        # the delegate holds its request until the connection is ready.
        return client.connection_failed(node_id) is not None and client.connection_delay(node_id) > 0

    fetch = FetchRequestManager(fetch_config, subscriptions, metadata, fetch_buffer, node_unavailable, time_ms,
                                metrics_manager=fetch_metrics)
    processor = ConsumerApplicationEventProcessor(
        subscriptions, metadata, fetch_request_manager=fetch, offsets_request_manager=offsets,
        coordinator_request_manager=coordinator, commit_request_manager=commit,
        heartbeat_request_manager=heartbeat, membership_manager=membership)
    managers = [m for m in (coordinator, commit, heartbeat, membership, offsets, fetch) if m is not None]

    return Resources(delegate, managers, processor, close_requests=fetch.close_fetch_sessions,
                     client=client, membership_manager=membership,
                     surface_errors=functools.partial(delegate.surface_metadata_error, background_event_handler))
