"""Builds the share consumer's background resources and its event handlers (Java's
``RequestManagers`` and the share cases of ``ApplicationEventProcessor``).

Owns the wiring, done once on the background thread: the network client and its
delegate, the request managers in the order the loop polls them (coordinator, share
heartbeat, share consume), and the handler of each share application event. A
completable event's future is completed here (or failed with what stopped it); the
reaper fails it at its deadline otherwise.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

from kproto.consumer.background.application_event_processor import ApplicationEventProcessor
from kproto.consumer.background.consumer_network_thread import Resources
from kproto.consumer.background.coordinator_request_manager import CoordinatorRequestManager
from kproto.consumer.background.events import BackgroundEventHandler
from kproto.consumer.background.local_assignment import chain
from kproto.consumer.background.network_client_delegate import NetworkClientDelegate
from kproto.consumer.engine_config import EngineConfig
from kproto.consumer.subscription_state import SubscriptionState
from kproto.consumer.share import events as ev
from kproto.consumer.share.share_consume_request_manager import ShareConsumeRequestManager
from kproto.consumer.share.share_consumer_config import ShareConsumerConfig
from kproto.consumer.share.share_fetch_buffer import ShareFetchBuffer
from kproto.consumer.share.share_heartbeat_request_manager import ShareHeartbeatRequestManager
from kproto.consumer.share.share_membership_manager import ShareMembershipManager
from kproto.consumer.share.share_session_handler import ShareFetchParams
from kproto.metrics.consumer_metrics import CoordinatorMetrics
from kproto.metrics.selector_metrics import selector_metrics
from kproto.net.client import NetworkClient

if TYPE_CHECKING:
    from kproto.net.metadata import ClusterMetadata


class ShareApplicationEventProcessor(ApplicationEventProcessor):
    def __init__(self, metadata: ClusterMetadata, coordinator: CoordinatorRequestManager,
                 membership: ShareMembershipManager, consume: ShareConsumeRequestManager,
                 heartbeat: ShareHeartbeatRequestManager,
                 time_ms: Callable[[], int]) -> None:
        self.metadata = metadata
        self.heartbeat = heartbeat
        self._time_ms = time_ms
        self.coordinator = coordinator
        self.membership = membership
        self.consume = consume
        super().__init__({
            ev.ShareSubscriptionChangeEvent: self._subscription_change,
            ev.ShareFetchEvent: self._fetch,
            ev.ShareAcknowledgeSyncEvent: self._acknowledge_sync,
            ev.ShareAcknowledgeAsyncEvent: self._acknowledge_async,
            ev.ShareAcknowledgeOnCloseEvent: self._acknowledge_on_close,
            ev.ShareLeaveGroupEvent: self._leave_group,
            ev.StopFindCoordinatorOnCloseEvent: lambda event: self.coordinator.signal_close(),
        })

    def _subscription_change(self, event: ev.ShareSubscriptionChangeEvent) -> None:
        membership = self.membership
        membership.subscriptions.subscribe(event.topics)
        self.metadata.set_topics(event.topics)
        self.consume.reopen()
        membership.on_subscription_updated()
        # A share consumer joins at subscribe (the consumer engine waits for a poll): nothing
        # is fetched before a poll anyway, and members can join before any of them reads.
        membership.on_consumer_poll()
        self.heartbeat.reset_poll_timer(self._time_ms())
        event.future.set_result(None)

    def _fetch(self, event: ev.ShareFetchEvent) -> None:
        self.consume.add_acknowledgements(event.entries)
        if event.settles is not None:  # the first event of an application poll(): it settled every record held
            self.heartbeat.reset_poll_timer(self._time_ms())
            self.membership.on_consumer_poll()
            self.consume.fetch_buffer.clear_outstanding(event.settles)
            # Revocations reconcile only here: the application holds no records any more.
            self.membership.maybe_reconcile(can_commit=True)
        self.consume.request_fetch()

    def _acknowledge_sync(self, event: ev.ShareAcknowledgeSyncEvent) -> None:
        chain(self.consume.add_acknowledgements(event.entries, commit=True), event.future)

    def _acknowledge_async(self, event: ev.ShareAcknowledgeAsyncEvent) -> None:
        self.consume.add_acknowledgements(event.entries, commit=True)

    def _acknowledge_on_close(self, event: ev.ShareAcknowledgeOnCloseEvent) -> None:
        chain(self.consume.acknowledge_on_close(event.entries), event.future)

    def _leave_group(self, event: ev.ShareLeaveGroupEvent) -> None:
        chain(self.membership.leave_group(), event.future)


def build_share_resources(settings: EngineConfig, share_config: ShareConsumerConfig, fetch_buffer: ShareFetchBuffer,
                          background_event_handler: BackgroundEventHandler, time_ms: Callable[[], int],
                          metrics: Any = None, member_id: Any = None, fetch_metrics: Any = None) -> Resources:
    """The background resources; ``metrics`` is the registry and ``fetch_metrics`` the
    ShareFetchMetricsManager (both None when metrics are off)."""
    client = NetworkClient(network_listener=selector_metrics(metrics, settings.metric_group_prefix),
                           config=settings.network)
    metadata = client.cluster
    group = settings.group
    retry_backoff_ms = group.retry_backoff_ms
    retry_backoff_max_ms = group.retry_backoff_max_ms
    delegate = NetworkClientDelegate(client, group.request_timeout_ms, time_ms)
    group_id = group.group_id
    assert group_id, "share_consumer_config requires a group_id"
    coordinator = CoordinatorRequestManager(group_id, retry_backoff_ms, retry_backoff_max_ms,
                                            add_coordinator=metadata.add_coordinator)

    def request_metadata_update() -> None:
        client.request_metadata_update(reset_equivalent=False)

    membership = ShareMembershipManager(group_id, SubscriptionState(), topic_name_for_id=metadata.topic_name,
                                        request_metadata_update=request_metadata_update,
                                        rack_id=group.rack_id, member_id=member_id, time_ms=time_ms)
    heartbeat = ShareHeartbeatRequestManager(time_ms(), coordinator, membership, background_event_handler,
                                             max_poll_interval_ms=group.rebalance_timeout_ms,
                                             retry_backoff_ms=retry_backoff_ms, retry_backoff_max_ms=retry_backoff_max_ms)
    fetch = settings.fetch
    params = ShareFetchParams(fetch.max_wait_ms, fetch.min_bytes, fetch.max_bytes, fetch.max_poll_records,
                              share_acquire_mode=share_config.share_acquire_mode)
    consume = ShareConsumeRequestManager(
        group_id, membership, metadata, fetch_buffer, background_event_handler, params,
        check_crcs=fetch.check_crcs, key_deserializer=fetch.key_deserializer,
        value_deserializer=fetch.value_deserializer, retry_backoff_ms=retry_backoff_ms,
        retry_backoff_max_ms=retry_backoff_max_ms, request_metadata_update=request_metadata_update,
        metrics_manager=fetch_metrics)
    if metrics is not None:
        # Java's share heartbeat metrics: consumer-share-coordinator-metrics.
        heartbeat.sensors = CoordinatorMetrics(metrics, membership.subscriptions.num_assigned_partitions,
                                               settings.metric_group_prefix + "-share", classic=False)
    processor = ShareApplicationEventProcessor(metadata, coordinator, membership, consume, heartbeat, time_ms)

    return Resources(delegate, [coordinator, heartbeat, membership, consume], processor, client=client,
                     membership_manager=membership,
                     surface_errors=functools.partial(delegate.surface_metadata_error, background_event_handler))
