"""The events that cross between the application thread and the background thread.

Owns the two event hierarchies of the seed chapter and their plumbing:

- ``ApplicationEvent`` (application thread -> background thread), with
  ``CompletableApplicationEvent`` for blocking API calls: it carries a future the caller
  waits on and a deadline after which the ``CompletableEventReaper`` fails it;
- ``BackgroundEvent`` (background thread -> application thread): errors to raise from the
  next API call and rebalance-listener callbacks to run on the application thread;
- ``ApplicationEventHandler`` (``add`` enqueues and wakes the network thread, ``add_and_get``
  also waits on the event's future) and ``BackgroundEventHandler``, both over
  ``queue.Queue``.

Events are plain data; what they do is decided by the processor on the receiving thread.
"""

from __future__ import annotations

import concurrent.futures
import enum
import itertools
import logging
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Mapping, Optional

from kproto.consumer.kip848.local_assignment import completed_future
from kproto.consumer.kip848.timer import monotonic_ms
from kproto.errors import KafkaError, KafkaTimeoutError

log = logging.getLogger("kproto.kip848")

_ids = itertools.count(1)


# --- application events (application thread -> background thread) ----------------------


class ApplicationEvent:
    """Something the application thread asks the background thread to do."""

    def __init__(self) -> None:
        self.id = next(_ids)

    def _fields(self) -> str:
        return ", ".join("{}={!r}".format(k, v) for k, v in vars(self).items()
                         if k not in ("id", "future") and not k.startswith("_"))

    def __repr__(self) -> str:
        return "{}(id={}, {})".format(type(self).__name__, self.id, self._fields())


class CompletableApplicationEvent(ApplicationEvent):
    """An event a blocking call waits on: ``future`` completes by ``deadline_ms`` or is reaped."""

    def __init__(self, deadline_ms: int) -> None:
        super().__init__()
        self.deadline_ms = deadline_ms
        self.future: Future = Future()


class AsyncPollEvent(ApplicationEvent):
    """One ``poll()`` round on the background thread: reconcile, validate positions, fetch.

    The stages run in order on the background thread; the application thread only reads
    the flags: it must not collect buffered records until ``is_validate_positions_complete``
    (so both threads never write a partition's position at once), and it knows revocation
    is handled when ``is_reconciliation_check_complete``.
    """

    def __init__(self, deadline_ms: int, poll_time_ms: int) -> None:
        super().__init__()
        self.deadline_ms = deadline_ms
        self.poll_time_ms = poll_time_ms
        self._reconciliation_check: Future = Future()
        self._validate_positions_complete = threading.Event()
        self._result: Future = Future()

    def mark_reconciliation_check_complete(self) -> None:
        if not self._reconciliation_check.done():
            self._reconciliation_check.set_result(None)

    def is_reconciliation_check_complete(self) -> bool:
        return self._reconciliation_check.done()

    def mark_validate_positions_complete(self) -> None:
        self._validate_positions_complete.set()

    def is_validate_positions_complete(self) -> bool:
        return self._validate_positions_complete.is_set()

    def await_validate_positions(self, timeout_s: float) -> bool:
        """Block the application thread until positions are validated (or the timeout)."""
        return self._validate_positions_complete.wait(timeout_s)

    def complete_successfully(self) -> None:
        # Completing the event implies its earlier stages are done too.
        self.mark_reconciliation_check_complete()
        self.mark_validate_positions_complete()
        if not self._result.done():
            self._result.set_result(None)

    def complete_exceptionally(self, error: BaseException) -> None:
        self.mark_reconciliation_check_complete()
        self.mark_validate_positions_complete()
        if not self._result.done():
            self._result.set_exception(error)

    def is_complete(self) -> bool:
        return self._result.done()

    def error(self) -> Optional[BaseException]:
        return self._result.exception() if self._result.done() else None


class CreateFetchRequestsEvent(CompletableApplicationEvent):
    """Prefetch: ask for the next fetches while the application processes records."""


class CommitEvent(CompletableApplicationEvent):
    """Commit ``offsets`` (None: everything consumed, resolved on the background thread)."""

    def __init__(self, deadline_ms: int, offsets: Optional[Mapping[Any, Any]] = None) -> None:
        super().__init__(deadline_ms)
        self.offsets = None if offsets is None else dict(offsets)
        # Completed with the offsets actually being committed, before the request is sent,
        # so a commit_sync() without offsets is not perturbed by fetches that begin later.
        self.offsets_ready: Future = Future()


class AsyncCommitEvent(CommitEvent):
    """``commit_async``: the callback runs later on the application thread."""


class SyncCommitEvent(CommitEvent):
    """``commit_sync``: retried until success, a fatal error or the deadline."""


class CommitOnCloseEvent(ApplicationEvent):
    """``close()``: stop auto-committing; the final commit is a SyncCommitEvent."""


class FetchCommittedOffsetsEvent(CompletableApplicationEvent):
    """``committed(partitions)``: an OffsetFetch to the coordinator."""

    def __init__(self, partitions: Iterable[Any], deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.partitions = frozenset(partitions)


class ListOffsetsEvent(CompletableApplicationEvent):
    """``offsets_for_times`` / ``beginning_offsets`` / ``end_offsets``: ListOffsets."""

    def __init__(self, timestamps_to_search: Mapping[Any, int], deadline_ms: int,
                 require_timestamps: bool) -> None:
        super().__init__(deadline_ms)
        self.timestamps_to_search = dict(timestamps_to_search)
        self.require_timestamps = require_timestamps


class CheckAndUpdatePositionsEvent(CompletableApplicationEvent):
    """``position()`` and friends: validate positions, then committed offsets, then resets."""


class ResetOffsetEvent(CompletableApplicationEvent):
    """``seek_to_beginning`` / ``seek_to_end``: mark partitions AWAIT_RESET with a strategy."""

    def __init__(self, partitions: Iterable[Any], offset_reset_strategy: str, deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.partitions = frozenset(partitions)
        self.offset_reset_strategy = offset_reset_strategy


class SeekUnvalidatedEvent(CompletableApplicationEvent):
    """``seek(partition, offset)``: set a position that will be validated before fetching."""

    def __init__(self, partition: Any, offset: int, offset_epoch: Optional[int], deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.partition = partition
        self.offset = offset
        self.offset_epoch = offset_epoch


class AssignmentChangeEvent(CompletableApplicationEvent):
    """``assign(partitions)``: auto-commit the old assignment, then take the new one."""

    def __init__(self, current_time_ms: int, deadline_ms: int, partitions: Iterable[Any]) -> None:
        super().__init__(deadline_ms)
        self.current_time_ms = current_time_ms
        self.partitions = frozenset(partitions)


class SubscriptionChangeEvent(CompletableApplicationEvent):
    """Base of the ``subscribe`` events; ``listener`` is the ConsumerRebalanceListener."""

    def __init__(self, deadline_ms: int, listener: Any = None) -> None:
        super().__init__(deadline_ms)
        self.listener = listener


class TopicSubscriptionChangeEvent(SubscriptionChangeEvent):
    """``subscribe(topics)``."""

    def __init__(self, topics: Iterable[str], listener: Any, deadline_ms: int) -> None:
        super().__init__(deadline_ms, listener)
        self.topics = frozenset(topics)


class TopicPatternSubscriptionChangeEvent(SubscriptionChangeEvent):
    """``subscribe(pattern=re.compile(...))``: matched by the client against all topics."""

    def __init__(self, pattern: Any, listener: Any, deadline_ms: int) -> None:
        super().__init__(deadline_ms, listener)
        self.pattern = pattern


class TopicRe2jPatternSubscriptionChangeEvent(SubscriptionChangeEvent):
    """A regex evaluated by the broker (ConsumerGroupHeartbeat v1 ``SubscribedTopicRegex``)."""

    def __init__(self, pattern: str, listener: Any, deadline_ms: int) -> None:
        super().__init__(deadline_ms, listener)
        self.pattern = pattern


class UnsubscribeEvent(CompletableApplicationEvent):
    """``unsubscribe()``: revoke via the listener, send the leave heartbeat, clear state."""


class LeaveGroupOnCloseEvent(CompletableApplicationEvent):
    """``close()``: leave the group (``membership_operation`` "leave" or "remain" in group)."""

    def __init__(self, deadline_ms: int, membership_operation: str = "leave") -> None:
        super().__init__(deadline_ms)
        self.membership_operation = membership_operation


class StopFindCoordinatorOnCloseEvent(ApplicationEvent):
    """``close()``: no more FindCoordinator requests once the group work is done."""


class PausePartitionsEvent(CompletableApplicationEvent):
    def __init__(self, partitions: Iterable[Any], deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.partitions = frozenset(partitions)


class ResumePartitionsEvent(PausePartitionsEvent):
    pass


class TopicMetadataEvent(CompletableApplicationEvent):
    """``partitions_for_topic(topic)`` for a topic not in the metadata yet."""

    def __init__(self, topic: Optional[str], deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.topic = topic


class ListTopicsEvent(CompletableApplicationEvent):
    """``topics()``: every topic of the cluster, from one all-topics Metadata request."""

    def __init__(self, exclude_internal_topics: bool, deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.exclude_internal_topics = exclude_internal_topics


class MetadataUpdateEvent(CompletableApplicationEvent):
    """``bootstrap()`` (kafka-python's): cluster metadata once; with ``refresh``, a new one."""

    def __init__(self, refresh: bool, deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.refresh = refresh


class ConsumerRebalanceListenerMethodName(enum.Enum):
    """Which ConsumerRebalanceListener method a callback event runs."""

    ON_PARTITIONS_REVOKED = "on_partitions_revoked"
    ON_PARTITIONS_ASSIGNED = "on_partitions_assigned"
    ON_PARTITIONS_LOST = "on_partitions_lost"


class ConsumerRebalanceListenerCallbackCompletedEvent(ApplicationEvent):
    """The application thread ran a listener method; ``future`` is the needed-event's future.

    The background thread completes ``future`` (with ``error`` if the callback raised),
    which resumes the reconciliation that was waiting for it.
    """

    def __init__(self, method_name: ConsumerRebalanceListenerMethodName, future: Future,
                 error: Optional[BaseException] = None) -> None:
        super().__init__()
        self.method_name = method_name
        self.future = future
        self.error = error

    def resume_waiter(self) -> None:
        """On the background thread: complete ``future`` (once) with the callback's outcome."""
        if self.future.done():
            return
        if self.error is not None:
            self.future.set_exception(self.error)
        else:
            self.future.set_result(None)


# --- background events (background thread -> application thread) -----------------------


class BackgroundEvent:
    """Something the background thread hands to the application thread."""

    def __init__(self) -> None:
        self.id = next(_ids)

    def __repr__(self) -> str:
        fields = ", ".join("{}={!r}".format(k, v) for k, v in vars(self).items()
                           if k not in ("id", "future"))
        return "{}(id={}, {})".format(type(self).__name__, self.id, fields)


class CompletableBackgroundEvent(BackgroundEvent):
    def __init__(self, deadline_ms: Optional[int] = None) -> None:
        super().__init__()
        self.deadline_ms = deadline_ms
        self.future: Future = Future()


class ErrorEvent(BackgroundEvent):
    """An error to raise from the application's next consumer call."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error


class ConsumerRebalanceListenerCallbackNeededEvent(CompletableBackgroundEvent):
    """Run ``method_name(partitions)`` of the rebalance listener on the application thread."""

    def __init__(self, method_name: ConsumerRebalanceListenerMethodName, partitions: Iterable[Any]) -> None:
        super().__init__()
        self.method_name = method_name
        self.partitions = tuple(sorted(partitions))


def request_listener_callback(handler: "BackgroundEventHandler", has_listener: bool,
                              method: ConsumerRebalanceListenerMethodName, partitions: Iterable[Any],
                              always: bool = False) -> Future:
    """Enqueue a listener callback for the application thread; its future completes on return.

    Revoked and lost run only for a non-empty set; assigned always runs (as the classic
    consumer does), when a listener is set. Without one the future is already complete.
    """
    partitions = set(partitions)
    if not has_listener or (not partitions and not always):
        return completed_future()
    event = ConsumerRebalanceListenerCallbackNeededEvent(method, partitions)
    handler.add(event)
    log.debug("Enqueued %s(%s) for the application thread", method.value, sorted(partitions))
    return event.future


# --- handlers and the reaper -------------------------------------------------------------


def drain(q: "queue.Queue[Any]") -> list:
    """Everything currently in ``q``, without blocking (Java's ``drainTo``)."""
    items = []
    while True:
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            return items


class CompletableEventReaper:
    """Fails completable events whose deadline passed (Java's ``CompletableEventReaper``).

    The background thread ``add``s every completable event it processes and calls
    ``reap(now_ms)`` once per loop; ``reap_incomplete`` on close fails everything left,
    including events still sitting in the application queue.
    """

    def __init__(self) -> None:
        self._tracked: list = []

    def add(self, event: Any) -> None:
        self._tracked.append(event)

    def reap(self, now_ms: int) -> int:
        """Fail expired, incomplete events with KafkaTimeoutError; forget completed ones."""
        expired = 0
        remaining = []
        for event in self._tracked:
            if event.future.done():
                continue
            if now_ms >= event.deadline_ms:
                _fail(event.future, KafkaTimeoutError(
                    "{} could not be completed before its deadline".format(type(event).__name__)))
                expired += 1
            else:
                remaining.append(event)
        self._tracked = remaining
        return expired

    def reap_incomplete(self, pending: Iterable[Any] = ()) -> int:
        """Fail every tracked event and every completable one in ``pending`` (on close)."""
        failed = 0
        for event in itertools.chain(self._tracked, pending):
            future = getattr(event, "future", None)
            if isinstance(future, Future) and not future.done():
                _fail(future, KafkaError("The consumer is closed"))
                failed += 1
        self._tracked = []
        return failed

    def size(self) -> int:
        return len(self._tracked)

    def contains(self, event: Any) -> bool:
        return any(e is event for e in self._tracked)


def _fail(future: Future, error: BaseException) -> None:
    try:
        future.set_exception(error)
    except concurrent.futures.InvalidStateError:
        pass  # completed concurrently by the other thread: its outcome stands


class ApplicationEventHandler:
    """The application thread's end of the application-event queue.

    ``wakeup`` is called after every ``add`` so a network thread blocked in its network
    step picks the event up at once.
    """

    def __init__(self, application_event_queue: "queue.Queue[ApplicationEvent]",
                 wakeup: Callable[[], None] = lambda: None,
                 time_ms: Callable[[], int] = monotonic_ms) -> None:
        self.queue = application_event_queue
        self._wakeup = wakeup
        self._time_ms = time_ms

    def add(self, event: ApplicationEvent) -> None:
        self.queue.put(event)
        self._wakeup()

    def add_and_get(self, event: CompletableApplicationEvent) -> Any:
        """Enqueue ``event`` and wait for its result until its deadline.

        Raises the exception the background thread failed it with, or KafkaTimeoutError.
        """
        self.add(event)
        return wait_for(event.future, event.deadline_ms, self._time_ms)

    def wakeup_network_thread(self) -> None:
        self._wakeup()


def wait_for(future: Future, deadline_ms: int, time_ms: Callable[[], int] = monotonic_ms) -> Any:
    """``future.result()`` bounded by ``deadline_ms``; a timeout is KafkaTimeoutError.

    The reaper normally fails the future at its deadline; the bound here keeps the caller
    from hanging if the background thread cannot run it.
    """
    # Clamped: a "forever" deadline must not overflow the lock's timeout.
    remaining_s = min(max(0, deadline_ms - time_ms()) / 1000.0, threading.TIMEOUT_MAX)
    try:
        return future.result(timeout=remaining_s)
    except concurrent.futures.TimeoutError:
        raise KafkaTimeoutError("Timed out waiting for the background thread") from None


class BackgroundEventHandler:
    """The background thread's end of the background-event queue."""

    def __init__(self, background_event_queue: "queue.Queue[BackgroundEvent]",
                 wake_application: Callable[[], None] = lambda: None) -> None:
        self.queue = background_event_queue
        # The application thread may be blocked waiting for fetched data: a callback to
        # run or an error to raise must not wait for that wait to time out.
        self._wake_application = wake_application

    def add(self, event: BackgroundEvent) -> None:
        self.queue.put(event)
        self._wake_application()
