"""The classic engine's consumer (Java's ``ClassicKafkaConsumer``): one thread does everything.

Owns the ``NetworkClient``, the ``SubscriptionState``, the ``Fetcher``, the
``OffsetFetcher`` and, when ``group_id`` is set, the group's ``ConsumerCoordinator``
(``self.coordinator``; None without a group). Every call runs on the caller's thread;
only the coordinator's heartbeat thread (its business) runs elsewhere.

``poll()`` is the loop of Java's ``ClassicKafkaConsumer.poll``:

1. ``maybe_trigger_wakeup`` - a ``wakeup()`` from another thread raises ``WakeupException``;
   ``maybe_throw_metadata_error`` - unauthorized/invalid topics named by the latest
   Metadata response are raised, once per update (as the KIP-848 engine does);
2. ``update_assignment_metadata_if_needed`` - ``coordinator.poll`` when grouped (join,
   sync, rebalance callbacks, auto-commit), then ``update_fetch_positions`` (validate
   positions after leader changes, committed offsets when grouped, ListOffsets resets);
3. ``poll_for_fetches`` - buffered records first; otherwise ``send_fetches`` and one
   ``client.poll`` at a time until records arrive or the timer expires;
4. pipelining - before records are returned the next fetches are sent and written to
   the sockets, so the broker works while the application processes this batch.

The coordinator is plugged in through ``ClassicCoordinator`` below (the surface this
module calls); without the module ``kproto.consumer.classic.consumer_coordinator`` a
grouped consumer raises a clear error where group management is needed.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol

from kproto import errors
from kproto.consumer.classic.fetcher import Fetcher
from kproto.consumer.classic.metadata_wait import await_metadata_update
from kproto.consumer.classic.offset_fetcher import OffsetFetcher
from kproto.consumer.engine_config import EngineConfig
from kproto.consumer.engine_setup import build_engine_setup
from kproto.consumer.fetch.fetch_collector import Fetch
from kproto.consumer.metadata_errors import MetadataErrorTracker
from kproto.consumer.subscription_state import AutoOffsetResetStrategy, SubscriptionState
from kproto.metrics.consumer_metrics import CoordinatorMetrics, metrics_view, timed_poll
from kproto.metrics.selector_metrics import selector_metrics
from kproto.clock import monotonic_ms
from kproto.net.client import NetworkClient
from kproto.net.future import Future
from kproto.net.metadata import ClusterMetadata
from kproto.structs import (ConsumerGroupMetadata, IsolationLevel, OffsetAndMetadata, OffsetAndTimestamp,
                            TopicPartition, check_partition)

log = logging.getLogger("kproto.consumer.classic")


class ClassicCoordinator(Protocol):
    """What ``ClassicKafkaConsumer`` calls on the group coordinator (Java's ConsumerCoordinator).

    Built as ``ConsumerCoordinator(client, subscriptions, settings)``; every method runs on
    the application thread. Timeouts are milliseconds; None results mean "not finished
    before the timeout".
    """

    #: Called during blocking waits; raises WakeupException after ``wakeup()``.
    check_wakeup: Optional[Callable[[], None]]

    def poll(self, timeout_ms: float, wait_for_join_group: bool = True) -> bool:
        """Find the coordinator, (re)join and sync if needed, run rebalance callbacks and
        auto-commit; True when the group state allows fetching (always, under assign())."""

    def time_to_next_poll(self, now_ms: float) -> float:
        """Ms until ``poll`` has work (heartbeat, auto-commit); bounds the fetch wait."""

    def fetch_committed_offsets(self, partitions: set[TopicPartition], timeout_ms: float
                                ) -> Optional[Mapping[TopicPartition, Optional[OffsetAndMetadata]]]:
        """OffsetFetch for the group; None when it did not finish in time."""

    def commit_offsets_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                            timeout_ms: float) -> None:
        """Commit and wait (retrying retriable errors); raises on failure or timeout."""

    def commit_offsets_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                             callback: Optional[Callable[[Any, Any], Any]]) -> Any:
        """Send a commit; ``callback(offsets, offsets_or_exception)`` runs from a later poll."""

    def maybe_leave_group(self, reason: str) -> None:
        """LeaveGroup (unsubscribe); a no-op outside group management or for static members."""

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Group id, generation, member id, instance id and state snapshot."""

    def close(self, timeout_ms: float, autocommit: bool) -> None:
        """Final auto-commit (if ``autocommit`` and enabled), leave the group, stop heartbeats."""


def _create_coordinator(client: NetworkClient, subscriptions: SubscriptionState,
                        settings: EngineConfig) -> Optional[ClassicCoordinator]:
    """The group coordinator when ``group_id`` is set and the module exists, else None."""
    if not settings.group_id:
        return None
    try:
        from kproto.consumer.classic.consumer_coordinator import ConsumerCoordinator
    except ImportError:
        log.warning("kproto.consumer.classic.consumer_coordinator is not available: group %r works "
                    "without committed offsets or group management", settings.group_id)
        return None
    return ConsumerCoordinator(client, subscriptions, settings)


class _WakeupAwareClient:
    """The NetworkClient as the OffsetFetcher sees it: its blocking waits (offset lookups)
    raise ``WakeupException`` after a ``wakeup()``, as every blocking call of Java's does."""

    __slots__ = ("_consumer", "_client")

    def __init__(self, consumer: "ClassicKafkaConsumer") -> None:
        self._consumer = consumer
        self._client = consumer.client

    @property
    def cluster(self) -> ClusterMetadata:
        return self._client.cluster

    def ready(self, node_id: int) -> bool:
        return self._client.ready(node_id)

    def send(self, node_id: int, request: Any, *, version: Optional[int] = None) -> Future:
        return self._client.send(node_id, request, version=version)

    def poll(self, timeout_ms: Optional[float] = None, future: Optional[Future] = None) -> None:
        self._consumer._client_poll(self._client.config.request_timeout_ms if timeout_ms is None else timeout_ms,
                                    future)

    def connection_delay(self, node_id: int) -> float:
        return self._client.connection_delay(node_id)

    def broker_api_versions(self, node_id: int) -> dict[int, tuple[int, int]]:
        return self._client.broker_api_versions(node_id)

    def request_metadata_update(self, reset_equivalent: bool = True) -> Future:
        return self._client.request_metadata_update(reset_equivalent)


class ClassicKafkaConsumer:
    """The ``ConsumerDelegate`` of ``group_protocol="classic"``; see the module docstring."""

    def __init__(self, config: Mapping[str, Any], time_ms: Callable[[], float] = monotonic_ms, *,
                 settings: Optional[EngineConfig] = None) -> None:
        """``settings``: the EngineConfig of ``config``, if the caller built it."""
        # The coordinator metrics are built once the coordinator exists (classic=True).
        setup = build_engine_setup(settings or EngineConfig.from_config(config), kip848_coordinator_metrics=False)
        self.settings = settings = setup.settings
        self._time_ms = time_ms
        self.group_id: Optional[str] = settings.group_id
        self.default_api_timeout_ms: int = settings.default_api_timeout_ms
        self.retry_backoff_ms: int = settings.retry_backoff_ms
        self.isolation_level: IsolationLevel = settings.isolation_level
        self.subscriptions = setup.subscriptions
        self.fetch_config = settings.fetch
        # Metrics (None when metrics_enabled is off): see DESIGN.md "Metrics".
        self._metrics = setup.metrics
        prefix = settings.metric_group_prefix
        self.fetch_metrics = setup.fetch_metrics
        self.consumer_metrics = setup.consumer_metrics
        self.client = NetworkClient(network_listener=selector_metrics(
            self._metrics, prefix, getattr(self.fetch_metrics, "throttle_time", None)), config=settings.network)
        self.metadata = self.client.cluster
        self.fetcher = Fetcher(self.client, self.subscriptions, self.fetch_config, time_ms=time_ms,
                               metrics_manager=self.fetch_metrics)
        self.offset_fetcher = OffsetFetcher(_WakeupAwareClient(self), self.subscriptions, self.metadata,
                                            isolation_level=self.isolation_level,
                                            request_timeout_ms=settings.request_timeout_ms,
                                            retry_backoff_ms=self.retry_backoff_ms, clock=time_ms)
        self._wakeup_requested = False
        self._closed = False
        self._metadata_errors = MetadataErrorTracker(self.metadata)
        try:
            self.coordinator: Optional[ClassicCoordinator] = _create_coordinator(
                self.client, self.subscriptions, settings)
            if self.coordinator is not None:
                # wakeup() must also end a blocking coordinator lookup or join.
                self.coordinator.check_wakeup = self.maybe_trigger_wakeup
                if self._metrics is not None:
                    self.coordinator.sensors = CoordinatorMetrics(  # type: ignore[attr-defined]
                        self._metrics, self.subscriptions.num_assigned_partitions, prefix, classic=True)
        except BaseException:
            self.client.close()
            raise
        # Topics looked up by partitions_for_topic/offset lookups stay in the metadata.
        self._lookup_topics: set[str] = set()

    # --- plumbing ---------------------------------------------------------------------

    def _deadline(self, timeout_ms: Optional[float]) -> float:
        timeout = self.default_api_timeout_ms if timeout_ms is None else timeout_ms
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise errors.IllegalArgumentError("timeout_ms must be a number >= 0, not {!r}".format(timeout_ms))
        return self._time_ms() + timeout

    def _remaining(self, deadline: float) -> float:
        return max(0.0, deadline - self._time_ms())

    def maybe_trigger_wakeup(self) -> None:
        """Raise ``WakeupException`` once for each ``wakeup()`` (Java's ConsumerNetworkClient)."""
        if self._wakeup_requested:
            self._wakeup_requested = False
            raise errors.WakeupException()

    def maybe_throw_metadata_error(self) -> None:
        """Unauthorized or invalid topics in the latest Metadata response, raised once per update."""
        error = self._metadata_errors.get_and_clear()
        if error is not None:
            raise error

    def _client_poll(self, timeout_ms: float, future: Any = None) -> None:
        """Network I/O that honours wakeup(): checked before blocking and after every step.

        With a future, wait for it step by step: ``NetworkClient.poll(timeout, future)``
        keeps selecting until the future is done, so a wakeup would only end one select.
        """
        self.maybe_trigger_wakeup()
        if future is None:
            self.client.poll(timeout_ms=timeout_ms)
        else:
            deadline = self._time_ms() + timeout_ms
            while not future.is_done:
                self.client.poll(timeout_ms=self._remaining(deadline))  # one select step
                self.maybe_trigger_wakeup()
                if self._time_ms() >= deadline:
                    break
        self.maybe_trigger_wakeup()

    def _require_group(self) -> ClassicCoordinator:
        if not self.group_id:
            # kafka-python raises IllegalStateError('Requires group_id') here.
            raise errors.IllegalStateError("Requires group_id: committed offsets live in a consumer group; "
                                           "construct the consumer with group_id=... to commit or read them")
        if self.coordinator is None:
            raise errors.IllegalStateError(
                "group {!r}: the classic group coordinator is not available in this build".format(self.group_id))
        return self.coordinator

    def _update_metadata_topics(self) -> None:
        self.metadata.set_topics(self.subscriptions.metadata_topics() | self._lookup_topics)

    def _await_metadata(self, deadline: float) -> bool:
        """A metadata refresh, asked again after retry_backoff_ms while no broker answers;
        False if none arrived by the deadline."""
        return await_metadata_update(self.client, deadline, self._time_ms, self.retry_backoff_ms, self._client_poll)

    # --- subscription and assignment ------------------------------------------------------

    def subscribe(self, topics: Iterable[str] = (), pattern: Optional[str] = None, listener: Any = None) -> None:
        coordinator = self._require_group()
        topics = [topics] if isinstance(topics, str) else list(topics)
        if pattern is not None and topics:
            raise errors.IllegalStateError("You must choose only one way to configure your consumer: "
                                           "topics or pattern")
        if pattern is None and not topics:
            self.unsubscribe()
            return
        for topic in topics:
            if not isinstance(topic, str) or not topic.strip():
                raise errors.IllegalArgumentError("Topic collection to subscribe to cannot contain null or "
                                                  "empty topic")
        if pattern is not None:
            self.subscriptions.subscribe_pattern(pattern, listener)
            self.metadata.need_all_topic_metadata(True)
            self.metadata.request_update()
        else:
            self.fetcher.clear_buffered_data_for_unassigned_partitions()
            if self.subscriptions.subscribe(topics, listener):
                self._update_metadata_topics()
        on_subscribe = getattr(coordinator, "on_subscribe", None)
        if on_subscribe is not None:
            on_subscribe()

    def unsubscribe(self) -> None:
        self.fetcher.fetch_buffer.retain_all(set())
        if self.coordinator is not None:
            self.coordinator.maybe_leave_group("the consumer unsubscribed")
        self.subscriptions.unsubscribe()
        self.metadata.need_all_topic_metadata(False)
        self._update_metadata_topics()

    def subscription(self) -> Optional[set[str]]:
        topics = self.subscriptions.subscription()
        return set(topics) if topics else None

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        if not partitions:
            self.unsubscribe()
            return
        for tp in partitions:
            check_partition(tp)
        self.fetcher.fetch_buffer.retain_all(set(partitions))
        # Java commits the positions of the partitions being dropped before a manual
        # reassignment when auto-commit is on.
        on_assign = getattr(self.coordinator, "maybe_auto_commit_offsets_async", None)
        if on_assign is not None:
            on_assign(self._time_ms())
        if self.subscriptions.assign_from_user(partitions):
            self._update_metadata_topics()

    def assignment(self) -> frozenset[TopicPartition]:
        return self.subscriptions.assigned_partitions()

    # --- poll -------------------------------------------------------------------------------

    def poll(self, timeout_ms: int, max_records: Optional[int] = None,
             update_offsets: bool = True) -> dict[TopicPartition, list[Any]]:
        return timed_poll(self.consumer_metrics, self._poll, timeout_ms, max_records, update_offsets)

    def _poll(self, timeout_ms: int, max_records: Optional[int], update_offsets: bool) -> dict[TopicPartition, list[Any]]:
        if self.subscriptions.has_no_subscription_or_user_assignment():
            raise errors.IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
        deadline = self._deadline(timeout_ms)
        while True:
            self.maybe_trigger_wakeup()
            self.maybe_throw_metadata_error()
            self.update_assignment_metadata_if_needed(deadline, wait_for_join_group=False)
            fetch = self.poll_for_fetches(deadline, max_records, update_offsets)
            if not fetch.is_empty():
                # Pipelining: the next fetches travel while the caller handles these.
                if self.fetcher.send_fetches() > 0 or self.client.pending_request_count():
                    self.client.poll(timeout_ms=0)
                return fetch.records
            if self._time_ms() >= deadline:
                return {}

    def update_assignment_metadata_if_needed(self, deadline: float, wait_for_join_group: bool = True) -> bool:
        """Java's updateAssignmentMetadataIfNeeded: group work, then positions."""
        if self.coordinator is not None and not self.coordinator.poll(self._remaining(deadline),
                                                                      wait_for_join_group):
            return False
        return self.update_fetch_positions(deadline)

    def update_fetch_positions(self, deadline: float) -> bool:
        """Validate, seed from committed offsets (grouped) and reset positions; True if all known."""
        fetch_committed = self.coordinator.fetch_committed_offsets if self.coordinator is not None else None
        return self.offset_fetcher.update_fetch_positions(self._remaining(deadline), fetch_committed)

    def poll_for_fetches(self, deadline: float, max_records: Optional[int], update_offsets: bool = True) -> Fetch:
        """Buffered records, else send fetches and wait for one network event at most.

        ``update_offsets=False`` (kafka-python) returns records without moving positions."""
        fetch = self.fetcher.collect_fetch(max_records, update_offsets)
        if not fetch.is_empty():
            return fetch
        self.fetcher.send_fetches()
        timeout = self._remaining(deadline)
        if self.coordinator is not None:
            timeout = min(timeout, self.coordinator.time_to_next_poll(self._time_ms()))
        if not self.subscriptions.has_all_fetch_positions():
            # Positions come from resets answered in callbacks: look again soon.
            timeout = min(timeout, self.retry_backoff_ms)
        self._client_poll(timeout)
        return self.fetcher.collect_fetch(max_records, update_offsets)

    # --- positions ---------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        check_partition(partition)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise errors.IllegalArgumentError("seek offset must be a non-negative integer, not {!r}".format(offset))
        if not self.subscriptions.is_assigned(partition):
            raise errors.IllegalStateError("No current assignment for partition {}".format(partition))
        log.debug("Seeking to offset %d for partition %s", offset, partition)
        self.subscriptions.seek(partition, offset)

    def seek_to_beginning(self, partitions: tuple[TopicPartition, ...]) -> None:
        self._request_reset(partitions, AutoOffsetResetStrategy.of("earliest"))

    def seek_to_end(self, partitions: tuple[TopicPartition, ...]) -> None:
        self._request_reset(partitions, AutoOffsetResetStrategy.of("latest"))

    def _request_reset(self, partitions: tuple[TopicPartition, ...], strategy: AutoOffsetResetStrategy) -> None:
        for tp in partitions:
            check_partition(tp)
            if not self.subscriptions.is_assigned(tp):
                raise errors.IllegalStateError("No current assignment for partition {}".format(tp))
        for tp in partitions or self.subscriptions.assigned_partitions():
            self.subscriptions.request_offset_reset(tp, strategy)

    def position(self, partition: TopicPartition, timeout_ms: Optional[int] = None) -> Optional[int]:
        """The next offset to fetch; blocks until it is known, None after ``timeout_ms``."""
        check_partition(partition)
        # The common case first, with one lock: a valid position needs no deadline.
        position = self.subscriptions.valid_position_or_none(partition)
        if position is not None and timeout_ms is None:
            return position.offset
        if not self.subscriptions.is_assigned(partition):
            raise errors.IllegalStateError("You can only check the position for partitions assigned to this "
                                           "consumer.")
        deadline = self._deadline(timeout_ms)
        while True:
            position = self.subscriptions.valid_position(partition)
            if position is not None:
                return position.offset
            self.update_fetch_positions(deadline)
            position = self.subscriptions.valid_position(partition)
            if position is not None:
                return position.offset
            remaining = self._remaining(deadline)
            if remaining <= 0:
                return None
            self._client_poll(min(remaining, self.retry_backoff_ms))

    def highwater(self, partition: TopicPartition) -> Optional[int]:
        check_partition(partition)
        if not self.subscriptions.is_assigned(partition):
            raise errors.IllegalStateError("Partition is not assigned")
        return self.subscriptions.high_watermark(partition)

    def current_lag(self, partition: TopicPartition) -> Optional[int]:
        check_partition(partition)
        return self.subscriptions.partition_lag(partition, self.isolation_level)

    def pause(self, partitions: tuple[TopicPartition, ...]) -> None:
        for tp in partitions:
            check_partition(tp)
            self.subscriptions.pause(tp)

    def resume(self, partitions: tuple[TopicPartition, ...]) -> None:
        for tp in partitions:
            check_partition(tp)
            self.subscriptions.resume(tp)

    def paused(self) -> frozenset[TopicPartition]:
        return self.subscriptions.paused_partitions()

    # --- commits -------------------------------------------------------------------------------

    def committed(self, partition: TopicPartition, metadata: bool = False, timeout_ms: Optional[int] = None) -> Any:
        check_partition(partition)
        coordinator = self._require_group()
        deadline = self._deadline(timeout_ms)
        started = time.monotonic_ns()
        try:
            offsets = coordinator.fetch_committed_offsets({partition}, self._remaining(deadline))
        finally:
            if self.consumer_metrics is not None:
                self.consumer_metrics.record_committed(time.monotonic_ns() - started)
        if offsets is None:
            raise errors.KafkaTimeoutError("Timeout fetching committed offsets of {}".format(partition))
        committed = offsets.get(partition)
        if committed is None:
            return None
        return committed if metadata else committed.offset

    def commit(self, offsets: Optional[Mapping[TopicPartition, OffsetAndMetadata]] = None,
               timeout_ms: Optional[int] = None) -> None:
        coordinator = self._require_group()
        deadline = self._deadline(timeout_ms)
        offsets = self.subscriptions.all_consumed() if offsets is None else self._check_offsets(offsets)
        started = time.monotonic_ns()
        try:
            coordinator.commit_offsets_sync(offsets, self._remaining(deadline))
        finally:
            if self.consumer_metrics is not None:
                self.consumer_metrics.record_commit_sync(time.monotonic_ns() - started)

    def commit_async(self, offsets: Optional[Mapping[TopicPartition, OffsetAndMetadata]] = None,
                     callback: Optional[Callable[..., Any]] = None) -> Any:
        coordinator = self._require_group()
        offsets = self.subscriptions.all_consumed() if offsets is None else self._check_offsets(offsets)
        return coordinator.commit_offsets_async(offsets, callback)

    @staticmethod
    def _check_offsets(offsets: Mapping[TopicPartition, Any]) -> dict[TopicPartition, OffsetAndMetadata]:
        checked = {}
        for tp, meta in dict(offsets).items():
            check_partition(tp)
            if isinstance(meta, int) and not isinstance(meta, bool):
                meta = OffsetAndMetadata(meta, "", -1)
            if not isinstance(meta, OffsetAndMetadata) or meta.offset < 0:
                raise errors.IllegalArgumentError("offset to commit for {} must be an OffsetAndMetadata with a "
                                                  "non-negative offset, not {!r}".format(tp, meta))
            checked[tp] = meta
        return checked

    # --- lookups --------------------------------------------------------------------------------

    def _lookup_timeout(self, timeout_ms: Optional[int]) -> float:
        return self._remaining(self._deadline(timeout_ms))

    def beginning_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: Optional[int]) -> dict[Any, Any]:
        return self.offset_fetcher.beginning_offsets(partitions, self._lookup_timeout(timeout_ms))

    def end_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: Optional[int]) -> dict[Any, Any]:
        return self.offset_fetcher.end_offsets(partitions, self._lookup_timeout(timeout_ms))

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                          timeout_ms: Optional[int]) -> dict[TopicPartition, Optional[OffsetAndTimestamp]]:
        return self.offset_fetcher.offsets_for_times(timestamps, self._lookup_timeout(timeout_ms))

    def partitions_for_topic(self, topic: str) -> Optional[set[int]]:
        """The topic's partition ids; fetches its metadata (up to default_api_timeout_ms) if unknown."""
        if not isinstance(topic, str) or not topic:
            raise errors.IllegalArgumentError("topic must be a non-empty string, not {!r}".format(topic))
        partitions = self.metadata.partitions_for_topic(topic)
        if partitions is not None:
            return set(partitions)
        self._lookup_topics.add(topic)
        deadline = self._deadline(None)
        self._update_metadata_topics()
        self._await_metadata(deadline)
        partitions = self.metadata.partitions_for_topic(topic)
        return set(partitions) if partitions is not None else None

    def topics(self) -> set[str]:
        """Every topic of the cluster (one all-topics Metadata request)."""
        deadline = self._deadline(None)
        pattern = self.subscriptions.has_pattern_subscription()
        self.metadata.need_all_topic_metadata(True)
        try:
            self._await_metadata(deadline)
        finally:
            if not pattern:
                self.metadata.need_all_topic_metadata(False)
        return set(self.metadata.topics(self.settings.exclude_internal_topics))

    def bootstrap(self, timeout_ms: Optional[int] = None, refresh: bool = False) -> None:
        if refresh or self.metadata.update_count == 0:
            if not self._await_metadata(self._deadline(timeout_ms)):
                raise errors.MetadataTimeoutError("no cluster metadata within {} ms".format(
                    self.default_api_timeout_ms if timeout_ms is None else timeout_ms),
                    self.client.connection_failures())

    def bootstrap_connected(self) -> bool:
        return self.client.bootstrap_connected()

    def group_metadata(self) -> ConsumerGroupMetadata:
        if self.coordinator is None:
            return ConsumerGroupMetadata(self.group_id)
        return self.coordinator.group_metadata()

    def metrics(self, raw: bool = False) -> Optional[dict[Any, Any]]:
        if self.fetch_metrics is not None:
            self.fetch_metrics.maybe_update_assignment()  # unassigned partitions' metrics go first
        return metrics_view(self._metrics, raw)

    # --- lifecycle ------------------------------------------------------------------------------

    def wakeup(self) -> None:
        """From any thread: the blocked (or next) call that polls raises ``WakeupException``."""
        self._wakeup_requested = True
        self.client.wakeup()

    def close(self, autocommit: bool = True, timeout_ms: Optional[int] = None) -> None:
        if self._closed:
            return
        self._closed = True
        self._wakeup_requested = False
        deadline = self._time_ms() + (30000 if timeout_ms is None else max(0, timeout_ms))
        try:
            if self.coordinator is not None:
                try:
                    self.coordinator.close(self._remaining(deadline), autocommit)
                except errors.KafkaError as exc:
                    log.warning("Closing the group coordinator failed: %s", exc)
            try:
                self.fetcher.close(min(self._remaining(deadline), self.settings.request_timeout_ms))
            except errors.KafkaError as exc:
                log.warning("Closing fetch sessions failed: %s", exc)
        finally:
            self.client.close()
            if self._metrics is not None:
                self._metrics.close()
