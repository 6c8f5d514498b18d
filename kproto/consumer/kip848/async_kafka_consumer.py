"""The KIP-848 engine's application side (Java's ``AsyncKafkaConsumer``).

Owns everything the application thread does for ``group_protocol="consumer"``: it never
touches the network. Calls become application events (blocking ones wait on the event's
future until their timeout); ``poll()`` follows the AsyncPollEvent rules of Java's
``AsyncKafkaConsumer.poll``:

- one AsyncPollEvent in flight; on the first pass of a poll a completed one is cleared
  (its error raised), except that one whose buffered records are still being returned is
  kept, so ``poll(0)`` returns buffered data without spinning;
- the fetch buffer is read only after the in-flight event validated positions;
- background events are processed here: errors are raised, rebalance-listener callbacks
  run and their completion goes back as an event;
- after a non-empty return, a prefetch event asks for the next fetches;
- the wait for data is bounded by the background thread's ``maximum_time_to_wait`` (at
  most half the remaining poll timer) so the poll timer never expires while blocked.

The background thread, its managers and the network client are built in
``_initialize_resources``, which runs on that thread.
"""

from __future__ import annotations

import functools
import logging
import queue
import re
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError  # not the builtin before 3.11
from typing import Any, Callable, Iterable, Mapping, Optional

from kproto import structs
from kproto.clock import monotonic_ms
from kproto.consumer.background.background_engine import BackgroundEngine
from kproto.consumer.background.consumer_network_thread import Resources
from kproto.consumer.background.events import BackgroundEventHandler, CompletableApplicationEvent, ErrorEvent, drain
from kproto.consumer.background.member_state import MemberState
from kproto.consumer.engine_config import EngineConfig
from kproto.consumer.engine_setup import build_engine_setup
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_collector import Fetch, FetchCollector
from kproto.consumer.kip848 import events as ev
from kproto.consumer.kip848.request_managers import build_resources
from kproto.consumer.offsets import offset_fetcher_utils as offset_utils
from kproto.consumer.rebalance_listener_invoker import ConsumerRebalanceListenerInvoker, maybe_wrap_as_kafka_error
from kproto.errors import (IllegalArgumentError, IllegalStateError, KafkaError, KafkaTimeoutError,
                           MetadataTimeoutError, WakeupException)
from kproto.metrics.consumer_metrics import metrics_view, timed_poll
from kproto.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition, check_partition

log = logging.getLogger("kproto.kip848")
# Member states kafka-python's ConsumerGroupMetadata.state calls unjoined (not in the group).
_NOT_IN_GROUP = frozenset({MemberState.UNSUBSCRIBED, MemberState.FATAL, MemberState.STALE})


def invoke_rebalance_callbacks(invoker: ConsumerRebalanceListenerInvoker,
                               event: ev.ConsumerRebalanceListenerCallbackNeededEvent
                               ) -> ev.ConsumerRebalanceListenerCallbackCompletedEvent:
    """Run the callback ``event`` asks for; the completion carries its error (Java's
    ``invokeRebalanceCallbacks``). A wakeup raised by the listener is that error too: it
    fails the reconciliation waiting on the callback and is raised from ``poll()``."""
    try:
        error: Optional[BaseException] = invoker.invoke(event.method_name.value, event.partitions)
    except WakeupException as wakeup:
        error = wakeup
    if error is not None:
        error = maybe_wrap_as_kafka_error(error)
    return ev.ConsumerRebalanceListenerCallbackCompletedEvent(event.method_name, event.future, error)


class AsyncKafkaConsumer(BackgroundEngine[FetchBuffer]):
    """The ``ConsumerDelegate`` of the KIP-848 engine; see the module docstring."""

    _log = log

    def __init__(self, config: Mapping[str, Any], time_ms: Callable[[], int] = monotonic_ms, *,
                 settings: Optional[EngineConfig] = None) -> None:
        """``settings``: the EngineConfig of ``config``, if the caller built it."""
        setup = build_engine_setup(settings or EngineConfig.from_config(config))
        self._setup = setup
        self.settings = settings = setup.settings
        self._time_ms = time_ms
        self.group_id: Optional[str] = settings.group_id
        self.default_api_timeout_ms: int = settings.default_api_timeout_ms
        self.retry_backoff_ms: int = settings.retry_backoff_ms
        self.subscriptions = setup.subscriptions
        self._listener_invoker = ConsumerRebalanceListenerInvoker(self.subscriptions, time_ms, self._record_listener)
        self.fetch_buffer = FetchBuffer()
        self.fetch_config = settings.fetch
        self._metrics = setup.metrics
        self.fetch_metrics = setup.fetch_metrics
        self.consumer_metrics = setup.consumer_metrics
        self.coordinator_metrics = setup.coordinator_metrics
        self._commit_callbacks: "queue.Queue[Any]" = queue.Queue()
        # The handler comes with the network thread, just below.
        self._inflight = ev.InflightPoll(lambda event: self.application_event_handler.add(event),
                                         self.fetch_buffer.is_empty)
        self.membership = self._start_network_thread(self._initialize_resources).membership_manager
        self.fetch_collector = FetchCollector(
            self.subscriptions, self.fetch_config,
            functools.partial(self.client.request_metadata_update, reset_equivalent=False), time_ms, self.fetch_metrics)

    def _initialize_resources(self) -> Resources:
        background_handler = BackgroundEventHandler(self.background_event_queue, self.fetch_buffer.wakeup)
        return build_resources(self._setup, self.fetch_buffer, background_handler, self._time_ms)

    # --- plumbing ---------------------------------------------------------------------------

    def _add_and_get(self, event: CompletableApplicationEvent) -> Any:
        """Wait for ``event``; a ``wakeup()`` from another thread fails the wait (Java's
        WakeupTrigger: the future is completed with WakeupException)."""
        with self._wakeup_trigger.blocking_on(event.future):
            return self.application_event_handler.add_and_get(event)

    def _require_group(self) -> None:
        if not self.group_id:
            raise KafkaError("this operation needs a group_id (committed offsets live in a group)")

    def _process_background_events(self) -> None:
        """Raise surfaced errors; run rebalance callbacks here, on the application thread."""
        first_error: Optional[BaseException] = None
        for event in drain(self.background_event_queue):
            if isinstance(event, ErrorEvent):
                first_error = first_error or event.error
            elif isinstance(event, ev.ConsumerRebalanceListenerCallbackNeededEvent):
                completed = invoke_rebalance_callbacks(self._listener_invoker, event)
                self.application_event_handler.add(completed)
                first_error = first_error or completed.error
        if first_error is not None:
            raise first_error

    def _record_listener(self, method: str, latency_ms: float) -> None:
        if self.coordinator_metrics is not None:
            self.coordinator_metrics.record_listener(method, latency_ms)

    def _execute_commit_callbacks(self) -> None:
        for callback, offsets, error in drain(self._commit_callbacks):
            callback(offsets, error if error is not None else offsets)

    # --- subscription and assignment -----------------------------------------------------

    def subscribe(self, topics: Iterable[str] = (), pattern: Optional[str] = None, listener: Any = None) -> None:
        self._require_group()
        topics = [topics] if isinstance(topics, str) else list(topics)
        if pattern is not None and topics:
            raise IllegalStateError("You must choose only one way to configure your consumer: "
                                    "topics or pattern")
        deadline = self._deadline(None)
        if isinstance(pattern, re.Pattern):
            # A compiled pattern is matched by the client (Java's subscribe(Pattern)).
            self._add_and_get(ev.TopicPatternSubscriptionChangeEvent(pattern, listener, deadline))
        elif pattern is not None:
            # A regex string is evaluated by the broker (ConsumerGroupHeartbeat v1,
            # Java's subscribe(SubscriptionPattern)).
            self._add_and_get(ev.TopicRe2jPatternSubscriptionChangeEvent(pattern, listener, deadline))
        elif not topics:
            self.unsubscribe()
        else:
            self._add_and_get(ev.TopicSubscriptionChangeEvent(topics, listener, deadline))

    def unsubscribe(self) -> None:
        self.fetch_buffer.retain_all(set())
        if self.subscriptions.has_no_subscription_or_user_assignment():
            return
        event = ev.UnsubscribeEvent(self._deadline(None))
        self.application_event_handler.add(event)
        # Run the revocation callbacks the leave needs while waiting for it.
        while not event.future.done():
            self._process_background_events()
            try:
                event.future.result(timeout=self.retry_backoff_ms / 1000.0)
            except FutureTimeoutError:
                continue
        event.future.result()

    def subscription(self) -> Optional[set[str]]:
        topics = self.subscriptions.subscription()
        return set(topics) if topics else None

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        if not partitions:
            self.unsubscribe()
            return
        self.fetch_buffer.retain_all(set(partitions))
        self._add_and_get(ev.AssignmentChangeEvent(self._time_ms(), self._deadline(None), partitions))

    def assignment(self) -> frozenset[TopicPartition]:
        return self.subscriptions.assigned_partitions()

    # --- poll -----------------------------------------------------------------------------

    def poll(self, timeout_ms: int, max_records: Optional[int] = None,
             update_offsets: bool = True) -> dict[TopicPartition, list[Any]]:
        return timed_poll(self.consumer_metrics, self._poll, timeout_ms, max_records, update_offsets)

    def _poll(self, timeout_ms: int, max_records: Optional[int], update_offsets: bool) -> dict[TopicPartition, list[Any]]:
        if self.subscriptions.has_no_subscription_or_user_assignment():
            raise IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
        deadline = self._deadline(timeout_ms)
        first_pass = True
        while True:
            self._wakeup_trigger.maybe_trigger_wakeup()
            inflight = self._inflight.check(deadline, self._time_ms(), first_pass)
            first_pass = False
            self._execute_commit_callbacks()
            self._process_background_events()
            if not inflight.is_validate_positions_complete():
                # Reading the buffer now could race the background thread on positions.
                remaining = deadline - self._time_ms()
                if remaining <= 0:
                    return {}
                if not inflight.await_validate_positions(min(remaining, self.retry_backoff_ms) / 1000.0):
                    continue  # still validating: a new pass, but no new event (it is in flight)
            fetch = self._collect_fetch(max_records, update_offsets)
            if not fetch.is_empty():
                # Ask for the next batch while the application processes this one.
                self.application_event_handler.add(ev.CreateFetchRequestsEvent(self._deadline(None)))
                return fetch.records
            if self._inflight.kept:
                continue  # the buffered data held no records: a new round fetches
            remaining = deadline - self._time_ms()
            if remaining <= 0:
                return {}
            wait = min(remaining, self.network_thread.cached_maximum_time_to_wait_ms)
            if self._inflight.round_missed_positions():
                # The offset manager wakes this wait when a lookup answer moves positions
                # on (on_positions_progress): the next pass starts the round that goes on.
                wait = min(wait, self.retry_backoff_ms)
            self.fetch_buffer.await_not_empty(max(wait, min(remaining, 10)) / 1000.0)

    def _collect_fetch(self, max_records: Optional[int], update_offsets: bool = True) -> Fetch:
        """``update_offsets=False`` (kafka-python) returns records without moving positions."""
        inflight = self._inflight.event
        if inflight is not None and not inflight.is_validate_positions_complete():
            return Fetch()  # the background thread may still be writing positions
        return self.fetch_collector.collect_fetch(self.fetch_buffer, max_records, update_offsets)

    # --- positions -------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise KafkaError("seek offset must be a non-negative integer, got {!r}".format(offset))
        self.fetch_buffer.retain_all(self.subscriptions.assigned_partitions() - {partition})
        self._add_and_get(ev.SeekUnvalidatedEvent(partition, offset, None, self._deadline(None)))

    def seek_to_beginning(self, partitions: tuple[TopicPartition, ...]) -> None:
        self._reset(partitions, "earliest")

    def seek_to_end(self, partitions: tuple[TopicPartition, ...]) -> None:
        self._reset(partitions, "latest")

    def _reset(self, partitions: tuple[TopicPartition, ...], strategy: str) -> None:
        to_reset = set(partitions) or self.subscriptions.assigned_partitions()
        self.fetch_buffer.retain_all(self.subscriptions.assigned_partitions() - to_reset)
        self._add_and_get(ev.ResetOffsetEvent(to_reset, strategy, self._deadline(None)))

    def position(self, partition: TopicPartition, timeout_ms: Optional[int] = None) -> Optional[int]:
        # The common case first, with one lock: a valid position needs no deadline.
        position = self.subscriptions.valid_position_or_none(partition)
        if position is not None and timeout_ms is None:
            return position.offset
        if not self.subscriptions.is_assigned(partition):
            raise IllegalStateError("You can only check the position for partitions assigned to this consumer.")
        deadline = self._deadline(timeout_ms)
        while True:
            position = self.subscriptions.valid_position(partition)
            if position is not None:
                return position.offset
            self._add_and_get(ev.CheckAndUpdatePositionsEvent(deadline))
            self._process_background_events()
            if self._time_ms() >= deadline:
                return None
            self.fetch_buffer.await_not_empty(min(self.retry_backoff_ms, max(0, deadline - self._time_ms())) / 1000.0)

    def highwater(self, partition: TopicPartition) -> Optional[int]:
        return self.subscriptions.high_watermark(partition)

    def current_lag(self, partition: TopicPartition) -> Optional[int]:
        check_partition(partition)
        return self.subscriptions.partition_lag(partition, self.fetch_config.isolation_level)

    def pause(self, partitions: tuple[TopicPartition, ...]) -> None:
        self._add_and_get(ev.PausePartitionsEvent(partitions, self._deadline(None)))

    def resume(self, partitions: tuple[TopicPartition, ...]) -> None:
        self._add_and_get(ev.ResumePartitionsEvent(partitions, self._deadline(None)))

    def paused(self) -> frozenset[TopicPartition]:
        return self.subscriptions.paused_partitions()

    # --- commits ----------------------------------------------------------------------------

    def committed(self, partition: TopicPartition, metadata: bool = False, timeout_ms: Optional[int] = None) -> Any:
        self._require_group()
        started = time.monotonic_ns()
        try:
            offsets = self._add_and_get(ev.FetchCommittedOffsetsEvent([partition], self._deadline(timeout_ms)))
        finally:
            if self.consumer_metrics is not None:
                self.consumer_metrics.record_committed(time.monotonic_ns() - started)
        committed = offsets.get(partition)
        if committed is None:
            return None
        return committed if metadata else committed.offset

    def commit(self, offsets: Optional[Mapping[TopicPartition, OffsetAndMetadata]] = None,
               timeout_ms: Optional[int] = None) -> None:
        self._require_group()
        started = time.monotonic_ns()
        try:
            self._add_and_get(ev.SyncCommitEvent(self._deadline(timeout_ms), offsets))
        finally:
            if self.consumer_metrics is not None:
                self.consumer_metrics.record_commit_sync(time.monotonic_ns() - started)
            self._execute_commit_callbacks()

    def commit_async(self, offsets: Optional[Mapping[TopicPartition, OffsetAndMetadata]] = None,
                     callback: Optional[Callable[..., Any]] = None) -> Future[Any]:
        self._require_group()
        event = ev.AsyncCommitEvent(self._deadline(None), offsets)
        if callback is not None:
            def _queue_callback(future: Future[Any]) -> None:
                error = future.exception()
                done = None if error is not None else future.result()
                self._commit_callbacks.put((callback, done if done is not None else offsets, error))
            event.future.add_done_callback(_queue_callback)
        self.application_event_handler.add(event)
        return event.future

    # --- lookups ----------------------------------------------------------------------------

    def _list_offsets(self, timestamps: Mapping[TopicPartition, int], require_timestamps: bool,
                      timeout_ms: Optional[int]) -> dict[Any, Any]:
        return self._add_and_get(ev.ListOffsetsEvent(timestamps, self._deadline(timeout_ms), require_timestamps))

    def _offsets_at(self, partitions: Iterable[TopicPartition], timestamp: int, timeout_ms: Optional[int]) -> dict[Any, Any]:
        wanted = list(partitions)
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise IllegalArgumentError("expected TopicPartition, got {!r}".format(tp))
        fetched = self._list_offsets({tp: timestamp for tp in wanted}, False, timeout_ms)
        return offset_utils.to_offsets(wanted, fetched)

    def beginning_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: Optional[int]) -> dict[Any, Any]:
        return self._offsets_at(partitions, offset_utils.EARLIEST_TIMESTAMP, timeout_ms)

    def end_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: Optional[int]) -> dict[Any, Any]:
        return self._offsets_at(partitions, offset_utils.LATEST_TIMESTAMP, timeout_ms)

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int], timeout_ms: Optional[int]) -> dict[Any, Any]:
        offset_utils.validate_timestamps(timestamps)
        fetched = self._list_offsets(timestamps, True, timeout_ms)
        return offset_utils.to_offsets_for_times(timestamps, fetched)

    def partitions_for_topic(self, topic: str) -> Optional[set[int]]:
        known = self.client.cluster.partitions_for_topic(topic)
        if known is not None:
            return known
        return self._add_and_get(ev.TopicMetadataEvent(topic, self._deadline(None)))

    def topics(self) -> set[str]:
        return self._add_and_get(ev.ListTopicsEvent(self.settings.exclude_internal_topics,
                                                    self._deadline(None)))

    def bootstrap(self, timeout_ms: Optional[int] = None, refresh: bool = False) -> None:
        deadline = self._deadline(timeout_ms)
        while True:
            try:
                self._add_and_get(ev.MetadataUpdateEvent(refresh, deadline))
                return
            except KafkaError as exc:
                # No broker answered yet (all backing off): ask again until the deadline, as
                # the classic engine's metadata wait does.
                left = deadline - self._time_ms()
                if not exc.retriable or left <= 0:
                    if exc.retriable or isinstance(exc, KafkaTimeoutError):
                        raise MetadataTimeoutError("no cluster metadata within {} ms".format(
                            self.default_api_timeout_ms if timeout_ms is None else timeout_ms),
                            self.client.connection_failures()) from exc
                    raise
                time.sleep(min(left, self.retry_backoff_ms) / 1000.0)

    def bootstrap_connected(self) -> bool:
        return self.client.bootstrap_connected()

    def group_metadata(self) -> ConsumerGroupMetadata:
        if self.membership is None:
            return ConsumerGroupMetadata(self.group_id)
        state = self.membership.state
        epoch = self.membership.member_epoch
        # Java's groupMetadata() holds the epoch and member id the broker last gave; before
        # the first (epoch 0) and after leaving (negative) Java's and kafka-python's "none".
        return ConsumerGroupMetadata(
            self.group_id, epoch if epoch > 0 else -1, self.membership.member_id if epoch > 0 else "",
            self.membership.group_instance_id,
            structs.STABLE if state is MemberState.STABLE
            else structs.UNJOINED if state in _NOT_IN_GROUP else structs.REBALANCING)

    def metrics(self, raw: bool = False) -> Optional[dict[Any, Any]]:
        if self.fetch_metrics is not None:
            self.fetch_metrics.maybe_update_assignment()  # unassigned partitions' metrics go first
        return metrics_view(self._metrics, raw)

    def wakeup(self) -> None:
        """From any thread: the blocked (or next) blocking call raises WakeupException."""
        self._wakeup_trigger.wakeup()
        self.fetch_buffer.wakeup()

    # --- close ------------------------------------------------------------------------------

    def close(self, autocommit: bool = True, timeout_ms: Optional[int] = None) -> None:
        if self._closed:
            return
        self._closed = True
        # Closing has its own timeout: a wakeup (pending or to come) must not cut the final
        # commit or the leave short (Java's disableWakeups).
        self._wakeup_trigger.disable_wakeups()
        deadline = self._close_deadline(timeout_ms)
        try:
            if self.group_id and autocommit and self.settings.enable_auto_commit \
                    and self.subscriptions.assigned_partitions():
                try:
                    self._add_and_get(ev.SyncCommitEvent(deadline, None))
                except KafkaError as exc:
                    log.warning("Final auto-commit on close failed: %s", exc)
            self.application_event_handler.add(ev.CommitOnCloseEvent())
            if self.membership is not None:
                leave = ev.LeaveGroupOnCloseEvent(deadline)
                self.application_event_handler.add(leave)
                while not leave.future.done() and self._time_ms() < deadline:
                    self._run_callbacks_quietly()
                    try:
                        leave.future.result(timeout=self.retry_backoff_ms / 1000.0)
                    except (FutureTimeoutError, KafkaError):
                        pass
            self.application_event_handler.add(ev.StopFindCoordinatorOnCloseEvent())
            self._execute_commit_callbacks()
        finally:
            self._listener_invoker.close()
            self._release(deadline)
