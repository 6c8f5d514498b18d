"""``AIOKafkaConsumer``: aiokafka's consumer API on the event-loop shell.

Owns the application side of the asyncio consumer: the calls of aiokafka's API turned
into the KIP-848 engine's application events, records collected from the shared fetch
buffer, rebalance callbacks run as coroutines, and start/stop. The network side is the
KIP-848 engine's request managers and ``NetworkClient`` (``request_managers.build_resources``,
the same objects the background thread runs; for a classic group
:class:`~kproto.aio.classic_group.ClassicGroupManager` replaces the KIP-848 member),
iterated on the loop by :class:`~kproto.aio.loop_driver.LoopDriver`; no thread or executor
is started.

Since the engine's loop and the application share one thread, events that need no
network (assign, subscribe, seek, pause, resume) are processed at once, so those calls
are synchronous as in aiokafka; the others are submitted and awaited. Positions move only
in ``getmany()``'s collection step, which has no ``await`` between taking records from
the buffer and returning them: cancelling a task inside ``getmany()`` or ``commit()``
loses and duplicates nothing (a cancelled commit still completes in the background).
A ``getmany()`` with records buffered does not suspend; so that an application looping over
it does not hold the loop until the buffer is empty, ``getmany()`` gives the loop a turn
(before taking anything) once ``max_poll_records`` records were handed out without one: each
loop step is then at most one collection (or one network step: reading the sockets and
parsing the responses, records left as bytes).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from kproto.aio.classic_group import install_classic_group
from kproto.aio.config import aio_consumer_config
from kproto.aio.futures import await_event
from kproto.aio.loop_driver import LoopDriver, LoopEventQueue
from kproto.aio.rebalance import run_listener_callback
from kproto.clock import monotonic_ms
from kproto.consumer.background.consumer_network_thread import ConsumerNetworkThread
from kproto.consumer.background.events import (ApplicationEvent, ApplicationEventHandler, BackgroundEventHandler,
                                               CompletableApplicationEvent, ErrorEvent, drain)
from kproto.consumer.engine_config import EngineConfig
from kproto.consumer.engine_setup import build_engine_setup
from kproto.consumer.fetch.completed_fetch import CrcPrecheck
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_collector import Fetch, FetchCollector
from kproto.consumer.kip848 import events as ev
from kproto.consumer.kip848.fetch_request_manager import FetchRequestManager
from kproto.consumer.kip848.request_managers import build_resources
from kproto.consumer.offsets import offset_fetcher_utils as offset_utils
from kproto.errors import (ConsumerStoppedError, IllegalArgumentError, IllegalOperation, IllegalStateError,
                           KafkaError, KafkaTimeoutError)
from kproto.metrics.consumer_metrics import metrics_view
from kproto.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

log = logging.getLogger("kproto.aio")

OffsetSpec = Union[int, OffsetAndMetadata, tuple[Any, ...]]


class AIOKafkaConsumer:
    """aiokafka's ``AIOKafkaConsumer``; see the module docstring and README's differences."""

    def __init__(self, *topics: str, **configs: Any) -> None:
        self.config = aio_consumer_config(configs)
        # What subscribe()/assign()/unsubscribe() asked for before start() (aiokafka takes
        # them then): the engine is built by start(), which applies the last of them.
        self._before_start: Optional[Callable[[], None]] = (
            functools.partial(self.subscribe, list(topics)) if topics else None)
        self.settings = EngineConfig.from_config(self.config)
        self._group_id: Optional[str] = self.settings.group_id
        self._classic_group = bool(self._group_id) and self.settings.group_protocol == "classic"
        self._closed = False
        self._started = False
        self._driver: Optional[LoopDriver] = None
        self._last_poll: dict[TopicPartition, int] = {}
        self._callback_tail: Optional["asyncio.Task[Any]"] = None
        self._callback_tasks: set["asyncio.Task[Any]"] = set()
        # Records handed out since getmany() last gave the loop a turn (see _getmany).
        self._handed_since_yield = 0

    # --- start and stop -------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the cluster (metadata from a bootstrap server) and, with topics given
        to the constructor, subscribe to them."""
        if self._started:
            return
        if self._closed:
            raise ConsumerStoppedError("the consumer was stopped")
        loop = asyncio.get_running_loop()
        self._time_ms = monotonic_ms
        setup = build_engine_setup(self.settings)
        settings = setup.settings
        self.subscriptions = setup.subscriptions
        self.fetch_buffer = FetchBuffer()
        self._inflight = ev.InflightPoll(self._submit, self.fetch_buffer.is_empty)
        self.fetch_config = settings.fetch
        self._metrics = setup.metrics
        self.fetch_metrics = setup.fetch_metrics
        self.consumer_metrics = setup.consumer_metrics
        self.coordinator_metrics = setup.coordinator_metrics
        # Both ends of both queues run on the loop's thread.
        self.background_event_queue = LoopEventQueue()
        application_event_queue = LoopEventQueue()
        resources = build_resources(setup, self.fetch_buffer, BackgroundEventHandler(self.background_event_queue),
                                    self._time_ms)
        if self._classic_group:
            install_classic_group(resources, settings, self.subscriptions,
                                  BackgroundEventHandler(self.background_event_queue), self._time_ms)
        # The engine's loop object, never started as a thread: the driver runs its iterations.
        network_thread = ConsumerNetworkThread(application_event_queue, lambda: resources, self._time_ms)
        self._network_thread = network_thread
        self._resources = resources
        self.client = resources.client
        self._membership = resources.membership_manager
        self._fetch_manager = next(m for m in resources.request_managers if isinstance(m, FetchRequestManager))
        # CRCs are checked a slice per turn of the loop before a collection (see _getmany).
        self._crc_precheck = CrcPrecheck()
        self._fetch_manager.crc_precheck = self._crc_precheck
        self._driver = LoopDriver(loop, network_thread, resources)
        self._handler = ApplicationEventHandler(application_event_queue, self._driver.schedule, self._time_ms)
        self._collector = FetchCollector(
            self.subscriptions, self.fetch_config,
            functools.partial(self.client.request_metadata_update, reset_equivalent=False),
            self._time_ms, self.fetch_metrics)
        self._started = True
        self._driver.schedule()
        try:
            await self._bootstrap()
            if self._before_start is not None:
                self._before_start()
                self._before_start = None
        except BaseException:
            await self.stop()
            raise

    async def _bootstrap(self) -> None:
        deadline = self._deadline(self.settings.request_timeout_ms)
        while True:
            try:
                await self._add_and_get(ev.MetadataUpdateEvent(False, deadline))
                return
            except KafkaError as exc:
                if not exc.retriable or self._time_ms() >= deadline:
                    raise KafkaError("Unable to bootstrap from {}".format(
                        self.settings.bootstrap_servers)) if exc.retriable else exc
                await asyncio.sleep(self.settings.retry_backoff_ms / 1000.0)

    async def stop(self, timeout_ms: Optional[int] = None) -> None:
        """Commit (auto-commit), leave the group, close fetch sessions and connections;
        returns within ``timeout_ms`` (default 30 s) plus a moment."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        driver = self._driver
        assert driver is not None
        deadline = self._deadline(30000 if timeout_ms is None else timeout_ms)
        try:
            if self._group_id and self.settings.enable_auto_commit and self.subscriptions.assigned_partitions():
                try:
                    await self._add_and_get(ev.SyncCommitEvent(deadline, None))
                except (KafkaError, asyncio.TimeoutError) as exc:
                    log.warning("Final auto-commit on stop failed: %s", exc)
            self._handler.add(ev.CommitOnCloseEvent())
            if self._membership is not None:
                leave = ev.LeaveGroupOnCloseEvent(deadline)
                self._handler.add(leave)
                while not leave.future.done() and self._time_ms() < deadline:
                    try:
                        await self._process_background_events(deadline)
                    except Exception as exc:
                        log.warning("Error while stopping: %s", exc)
                    await driver.wait_for_step(min(0.1, max(0, deadline - self._time_ms()) / 1000.0))
            self._handler.add(ev.StopFindCoordinatorOnCloseEvent())
        finally:
            await self._cancel_callbacks()
            await driver.close(max(0, deadline - self._time_ms()))
            self.fetch_buffer.close()
            self.client.close()
            if self._metrics is not None:
                self._metrics.close()

    async def _cancel_callbacks(self) -> None:
        tasks = [t for t in self._callback_tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            # A callback that ignores its cancellation is left behind after a moment: stop()
            # must not hang on application code.
            await asyncio.wait(tasks, timeout=0.5)
        for task in self._callback_tasks:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: reported through getmany() or moot on stop
        self._callback_tasks.clear()

    async def __aenter__(self) -> "AIOKafkaConsumer":
        await self.start()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.stop()

    # --- plumbing ---------------------------------------------------------------------------

    def _defer(self, call: Optional[Callable[[], None]]) -> bool:
        """Before ``start()``, keep ``call`` (the latest subscription change wins, ``None``
        clears it) for ``start()`` to apply, and say so; after ``stop()``, refuse."""
        if self._started or self._closed:
            self._check_running()
            return False
        self._before_start = call
        return True

    def _check_running(self) -> None:
        if self._closed or not self._started:
            raise ConsumerStoppedError("the consumer is stopped" if self._closed else "call start() first")

    def _deadline(self, timeout_ms: Optional[int]) -> int:
        timeout = self.settings.default_api_timeout_ms if timeout_ms is None else timeout_ms
        return int(self._time_ms() + timeout)

    def _process_now(self, event: CompletableApplicationEvent) -> Any:
        """Process an event that needs no network on the spot (the engine's loop runs on
        this thread and is not running now) and let the managers react at once."""
        self._check_running()
        self._resources.application_event_processor.process(event)
        assert self._driver is not None
        self._driver.schedule()
        return event.future.result(timeout=0)

    async def _add_and_get(self, event: CompletableApplicationEvent) -> Any:
        """Submit ``event`` and await its outcome until its deadline."""
        self._handler.add(event)
        return await await_event(event.future, event.deadline_ms, type(event).__name__)

    def _submit(self, event: ApplicationEvent) -> None:
        self._handler.add(event)

    async def _process_background_events(self, deadline_ms: Optional[float] = None) -> None:
        """Raise surfaced errors; run rebalance callbacks (in order, each in its own task),
        waiting for them until ``deadline_ms`` if given (stop()), else as long as they run."""
        first_error: Optional[BaseException] = None
        for event in drain(self.background_event_queue):
            if isinstance(event, ErrorEvent):
                first_error = first_error or event.error
            elif isinstance(event, ev.ConsumerRebalanceListenerCallbackNeededEvent):
                task = asyncio.get_running_loop().create_task(run_listener_callback(
                    self.subscriptions.rebalance_listener, event, self._callback_tail, self._handler.add))
                self._callback_tail = task
                self._callback_tasks.add(task)
                task.add_done_callback(self._callback_tasks.discard)
        tail = self._callback_tail
        if tail is not None and not tail.done():
            if deadline_ms is None:
                await asyncio.shield(tail)
            else:
                await asyncio.wait([tail], timeout=max(0, deadline_ms - self._time_ms()) / 1000.0)
        if tail is not None and tail.done():
            self._callback_tail = None
            error = None if tail.cancelled() else tail.result()
            first_error = first_error or error
        if first_error is not None:
            raise first_error

    def _require_group(self) -> None:
        if not self._group_id:
            raise IllegalOperation("Requires group_id")

    # --- subscription and assignment -----------------------------------------------------

    def subscribe(self, topics: Iterable[str] = (), pattern: Optional[str] = None, listener: Any = None) -> None:
        """Subscribe to ``topics`` or to every topic matching the regex ``pattern``
        (matched by the client, as aiokafka); ``listener``'s methods may be coroutines.
        Before ``start()`` it is checked now and applied by ``start()``, as in aiokafka."""
        self._require_group()
        topics = [topics] if isinstance(topics, str) else list(topics)
        if (pattern is None) == (not topics):
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        if self._defer(functools.partial(self.subscribe, topics, pattern, listener)):
            return
        self.fetch_buffer.retain_all(set())
        deadline = self._deadline(None)
        if pattern is not None:
            compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
            self._process_now(ev.TopicPatternSubscriptionChangeEvent(compiled, listener, deadline))
        else:
            self._process_now(ev.TopicSubscriptionChangeEvent(topics, listener, deadline))

    def unsubscribe(self) -> None:
        """Leave the group (revocation callbacks run in the next ``getmany()``) or drop the
        manual assignment."""
        if self._defer(None):
            return
        self.fetch_buffer.retain_all(set())
        if self.subscriptions.has_no_subscription_or_user_assignment():
            return
        self._submit(ev.UnsubscribeEvent(self._deadline(None)))

    def subscription(self) -> set[str]:
        if not self._started:
            # aiokafka answers with the topics subscribe() was given, started or not.
            call = self._before_start
            if isinstance(call, functools.partial) and call.func == self.subscribe:
                return set(call.args[0])
            return set()
        return set(self.subscriptions.subscription() or ())

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Assign ``partitions`` (before ``start()``: applied by ``start()``, as in aiokafka)."""
        partitions = list(partitions)
        for tp in partitions:
            if not isinstance(tp, TopicPartition):
                raise IllegalArgumentError("expected TopicPartition, got {!r}".format(tp))
        if self._defer(functools.partial(self.assign, partitions) if partitions else None):
            return
        if not partitions:
            self.unsubscribe()
            return
        self.fetch_buffer.retain_all(set(partitions))
        self._process_now(ev.AssignmentChangeEvent(self._time_ms(), self._deadline(None), partitions))

    def assignment(self) -> frozenset[TopicPartition]:
        return self.subscriptions.assigned_partitions() if self._started else frozenset()

    # --- records ----------------------------------------------------------------------------

    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: Optional[int] = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records by partition (only of ``partitions`` if given), waiting up to
        ``timeout_ms`` for some."""
        self._check_running()
        if self.subscriptions.has_no_subscription_or_user_assignment():
            raise IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
        if partitions:
            assigned = self.subscriptions.assigned_partitions()
            for tp in partitions:
                if tp not in assigned:
                    raise IllegalStateError("No current assignment for partition {}".format(tp))
        if self.consumer_metrics is not None:
            self.consumer_metrics.record_poll_start()
        try:
            return await self._getmany(set(partitions), timeout_ms, max_records)
        finally:
            if self.consumer_metrics is not None:
                self.consumer_metrics.record_poll_end()

    async def _getmany(self, partitions: set[TopicPartition], timeout_ms: int,
                       max_records: Optional[int]) -> dict[TopicPartition, list[ConsumerRecord]]:
        driver = self._driver
        assert driver is not None
        deadline = self._deadline(timeout_ms)
        if self._handed_since_yield >= self.fetch_config.max_poll_records:
            # A getmany() that has records buffered returns without suspending: an
            # application looping over it would hold the loop until the buffer is empty
            # (a fetch response: up to fetch_max_bytes of records). A turn of the loop per
            # max_poll_records handed out bounds each step by one collection (and what the
            # application does with it), and lets the driver send the next fetches now.
            # Nothing is taken yet: a cancellation here loses nothing.
            self._handed_since_yield = 0
            await asyncio.sleep(0)
        first_pass = True
        while True:
            self._check_running()
            inflight = self._inflight.check(deadline, self._time_ms(), first_pass)
            first_pass = False
            if self.background_event_queue or self._callback_tail is not None:
                await self._process_background_events()
            if not inflight.is_validate_positions_complete():
                # Reading the buffer now could race the managers on positions.
                remaining = deadline - self._time_ms()
                if remaining <= 0:
                    return {}
                await driver.wait_for_step(min(remaining, self.settings.retry_backoff_ms) / 1000.0)
                if not inflight.is_validate_positions_complete():
                    continue  # still validating: a new pass, no new event (it is in flight)
            while self._crc_precheck.step():
                # CRCs of buffered data left to check: a slice per turn of the loop, so
                # that no callback holds it for a whole batch (nothing is taken yet; data
                # of partitions revoked meanwhile is not collected, as after any step).
                await asyncio.sleep(0)
                self._check_running()
            # No await from here to the return: the records taken are the records returned.
            fetch = self._collect(partitions, max_records)
            if not fetch.is_empty():
                self._handed_since_yield += fetch.num_records
                self._send_prefetches()
                now = int(time.time() * 1000)
                for tp in fetch.records:
                    self._last_poll[tp] = now
                return fetch.records
            if self._inflight.kept:
                continue  # the buffered data held no records: a new round fetches
            remaining = deadline - self._time_ms()
            if remaining <= 0:
                return {}
            wait = min(remaining, self._network_thread.cached_maximum_time_to_wait_ms)
            if self._inflight.round_missed_positions():
                if inflight.is_complete() and self.fetch_buffer.await_not_empty(0):
                    # A lookup answer moved positions on (the offsets manager wakes the
                    # fetch buffer; a wait of 0 only takes that flag), maybe in the step the
                    # last wait returned after: start the next round now, not after a step
                    # that may be retry_backoff_ms away.
                    continue
                wait = min(wait, self.settings.retry_backoff_ms)
            await driver.wait_for_step(wait / 1000.0)
            self._handed_since_yield = 0

    def _send_prefetches(self) -> None:
        """Java's ``sendPrefetches``: ask for the next fetches while the application handles
        these records. A ``CreateFetchRequestsEvent``'s whole processing is the fetch
        manager's ``create_fetch_requests()`` (its next poll builds the fetches); on the
        loop's thread that is done at once, without the event, whose thread-safe future
        (completed through a chained callback) nobody awaits: per ``getmany()`` it cost
        about as many Python calls as the loop iteration that polls the fetch manager."""
        self._fetch_manager.create_fetch_requests()
        assert self._driver is not None
        self._driver.schedule()

    def _collect(self, partitions: set[TopicPartition], max_records: Optional[int]) -> Fetch:
        if not partitions:
            return self._collector.collect_fetch(self.fetch_buffer, max_records)
        # Other partitions' data stays buffered, as paused partitions' data does.
        others = [tp for tp in self.subscriptions.assigned_partitions()
                  if tp not in partitions and not self.subscriptions.is_paused(tp)]
        for tp in others:
            self.subscriptions.pause(tp)
        try:
            return self._collector.collect_fetch(self.fetch_buffer, max_records)
        finally:
            for tp in others:
                self.subscriptions.resume(tp)

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord:
        """The next record (of ``partitions`` if given), waiting as long as it takes."""
        while True:
            records = await self.getmany(*partitions, timeout_ms=self.settings.default_api_timeout_ms,
                                         max_records=1)
            for batch in records.values():
                if batch:
                    return batch[0]

    def __aiter__(self) -> "AIOKafkaConsumer":
        return self

    async def __anext__(self) -> ConsumerRecord:
        try:
            return await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None

    # --- positions -------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._check_running()
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise IllegalArgumentError("seek offset must be a non-negative integer, got {!r}".format(offset))
        if not self.subscriptions.is_assigned(partition):
            raise IllegalStateError("No current assignment for partition {}".format(partition))
        self.fetch_buffer.retain_all(self.subscriptions.assigned_partitions() - {partition})
        self._process_now(ev.SeekUnvalidatedEvent(partition, offset, None, self._deadline(None)))

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._reset(partitions, "earliest")

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._reset(partitions, "latest")

    def _reset(self, partitions: tuple[TopicPartition, ...], strategy: str) -> None:
        self._check_running()
        assigned = self.subscriptions.assigned_partitions()
        for tp in partitions:
            if tp not in assigned:
                raise IllegalStateError("No current assignment for partition {}".format(tp))
        to_reset = set(partitions) or assigned
        self.fetch_buffer.retain_all(assigned - to_reset)
        self._process_now(ev.ResetOffsetEvent(to_reset, strategy, self._deadline(None)))

    async def seek_to_committed(self, *partitions: TopicPartition) -> dict[TopicPartition, Optional[int]]:
        """Seek to the committed offsets; returns them (None: nothing committed)."""
        self._check_running()
        self._require_group()
        wanted = list(partitions) or sorted(self.subscriptions.assigned_partitions())
        offsets = await self._add_and_get(ev.FetchCommittedOffsetsEvent(wanted, self._deadline(None)))
        result: dict[TopicPartition, Optional[int]] = {}
        for tp in wanted:
            committed = offsets.get(tp)
            result[tp] = None if committed is None else committed.offset
            if committed is not None and self.subscriptions.is_assigned(tp):
                self.seek(tp, committed.offset)
        return result

    async def position(self, partition: TopicPartition) -> int:
        self._check_running()
        if not self.subscriptions.is_assigned(partition):
            raise IllegalStateError("Partition {} is not assigned".format(partition))
        assert self._driver is not None
        deadline = self._deadline(None)
        while True:
            position = self.subscriptions.valid_position(partition)
            if position is not None:
                return position.offset
            await self._add_and_get(ev.CheckAndUpdatePositionsEvent(deadline))
            await self._process_background_events()
            if self._time_ms() >= deadline:
                raise KafkaTimeoutError("no position for {} in time".format(partition))
            if self.subscriptions.valid_position(partition) is None:
                await self._driver.wait_for_step(self.settings.retry_backoff_ms / 1000.0)

    def highwater(self, partition: TopicPartition) -> Optional[int]:
        return self.subscriptions.high_watermark(partition)

    def last_stable_offset(self, partition: TopicPartition) -> Optional[int]:
        return self.subscriptions.last_stable_offset(partition)

    def last_poll_timestamp(self, partition: TopicPartition) -> Optional[int]:
        """Wall-clock ms when ``getmany()`` last returned records of the partition."""
        return self._last_poll.get(partition)

    def pause(self, *partitions: TopicPartition) -> None:
        self._process_now(ev.PausePartitionsEvent(partitions, self._deadline(None)))

    def resume(self, *partitions: TopicPartition) -> None:
        self._process_now(ev.ResumePartitionsEvent(partitions, self._deadline(None)))

    def paused(self) -> frozenset[TopicPartition]:
        return self.subscriptions.paused_partitions()

    # --- commits ----------------------------------------------------------------------------

    async def commit(self, offsets: Optional[Mapping[TopicPartition, OffsetSpec]] = None) -> None:
        """Commit ``offsets`` (int, ``(offset, metadata)`` or ``OffsetAndMetadata`` per
        partition), or the positions of every assigned partition."""
        self._check_running()
        self._require_group()
        converted = None if offsets is None else {tp: _offset_and_metadata(tp, o) for tp, o in offsets.items()}
        started = time.monotonic_ns()
        try:
            await self._add_and_get(ev.SyncCommitEvent(self._deadline(None), converted))
        finally:
            if self.consumer_metrics is not None:
                self.consumer_metrics.record_commit_sync(time.monotonic_ns() - started)

    async def committed(self, partition: TopicPartition) -> Optional[int]:
        self._check_running()
        self._require_group()
        offsets = await self._add_and_get(ev.FetchCommittedOffsetsEvent([partition], self._deadline(None)))
        committed = offsets.get(partition)
        return None if committed is None else committed.offset

    # --- lookups ----------------------------------------------------------------------------

    async def _offsets_at(self, partitions: Iterable[TopicPartition], timestamp: int) -> dict[TopicPartition, Any]:
        self._check_running()
        wanted = list(partitions)
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise IllegalArgumentError("expected TopicPartition, got {!r}".format(tp))
        fetched = await self._add_and_get(ev.ListOffsetsEvent({tp: timestamp for tp in wanted},
                                                              self._deadline(None), False))
        return offset_utils.to_offsets(wanted, fetched)

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
        return await self._offsets_at(partitions, offset_utils.EARLIEST_TIMESTAMP)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
        return await self._offsets_at(partitions, offset_utils.LATEST_TIMESTAMP)

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, Any]:
        self._check_running()
        offset_utils.validate_timestamps(timestamps)
        fetched = await self._add_and_get(ev.ListOffsetsEvent(timestamps, self._deadline(None), True))
        return offset_utils.to_offsets_for_times(timestamps, fetched)

    async def topics(self) -> set[str]:
        self._check_running()
        return await self._add_and_get(ev.ListTopicsEvent(self.settings.exclude_internal_topics,
                                                          self._deadline(None)))

    def partitions_for_topic(self, topic: str) -> Optional[set[int]]:
        """The topic's partition ids from the cached metadata (None if unknown)."""
        return self.client.cluster.partitions_for_topic(topic)

    def metrics(self, raw: bool = False) -> Optional[dict[Any, Any]]:
        if self.fetch_metrics is not None:
            self.fetch_metrics.maybe_update_assignment()
        return metrics_view(self._metrics, raw)


def _offset_and_metadata(tp: TopicPartition, spec: OffsetSpec) -> OffsetAndMetadata:
    if not isinstance(tp, TopicPartition):
        raise IllegalArgumentError("commit offsets must be keyed by TopicPartition, got {!r}".format(tp))
    if isinstance(spec, OffsetAndMetadata):
        return spec
    if isinstance(spec, tuple):
        offset, metadata = spec
        return OffsetAndMetadata(int(offset), metadata or "")
    if isinstance(spec, bool) or not isinstance(spec, int) or spec < 0:
        raise IllegalArgumentError("commit offset for {} must be a non-negative int, got {!r}".format(tp, spec))
    return OffsetAndMetadata(spec, "")
