"""The KIP-848 consumer's events (Java's ``internals.events`` of the ``AsyncKafkaConsumer``).

Owns the consumer's application events (poll, commits, committed offsets, positions,
subscriptions, metadata look-ups, close steps), the rebalance-listener callback events in
both directions, and ``request_listener_callback``. Their roots, queues and reaper are the
shell's (``kproto.consumer.background.events``).
"""

from __future__ import annotations

import enum
import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Mapping, Optional

from kproto.consumer.background.events import (ApplicationEvent, BackgroundEventHandler, CompletableApplicationEvent,
                                               CompletableBackgroundEvent)
from kproto.consumer.background.local_assignment import completed_future

log = logging.getLogger("kproto.kip848")


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
        # Plain flags, written by one thread and read by the other (a write of an attribute
        # is atomic; the error is set before the completion flag that publishes it): one
        # of these per application poll, where futures cost a condition and its lock each.
        # The Event stays: the background-thread shell blocks on it.
        self._reconciliation_check_complete = False
        self._validate_positions_complete = threading.Event()
        self._complete = False
        self._error: Optional[BaseException] = None
        # Whether every assigned partition had a position when this round created its
        # fetches (Java's cachedSubscriptionHasAllFetchPositions): when not, the round
        # fetched nothing for the others, and a poll loop must start a new round once
        # their positions arrive instead of waiting out its timeout for records.
        self.had_all_fetch_positions = False

    def mark_reconciliation_check_complete(self) -> None:
        self._reconciliation_check_complete = True

    def is_reconciliation_check_complete(self) -> bool:
        return self._reconciliation_check_complete

    def mark_validate_positions_complete(self) -> None:
        self._validate_positions_complete.set()

    def is_validate_positions_complete(self) -> bool:
        return self._validate_positions_complete.is_set()

    def await_validate_positions(self, timeout_s: float) -> bool:
        """Block the application thread until positions are validated (or the timeout)."""
        return self._validate_positions_complete.wait(timeout_s)

    def complete_successfully(self) -> None:
        # Completing the event implies its earlier stages are done too.
        self._reconciliation_check_complete = True
        self._validate_positions_complete.set()
        self._complete = True

    def complete_exceptionally(self, error: BaseException) -> None:
        self._reconciliation_check_complete = True
        self._validate_positions_complete.set()
        if not self._complete:  # the first outcome stands
            self._error = error
            self._complete = True

    def is_complete(self) -> bool:
        return self._complete

    def error(self) -> Optional[BaseException]:
        return self._error if self._complete else None


class InflightPoll:
    """The ``AsyncPollEvent`` a poll loop has in flight (Java's ``AsyncKafkaConsumer``
    keeps it in ``inflightPoll`` and checks it with ``checkInflightPoll``): one home for
    the background-thread shell and the event-loop shell (``kproto.aio``)."""

    __slots__ = ("event", "_submit", "_buffer_is_empty", "kept")

    def __init__(self, submit: Callable[[ApplicationEvent], Any], buffer_is_empty: Callable[[], bool]) -> None:
        self.event: Optional[AsyncPollEvent] = None
        self._submit = submit
        self._buffer_is_empty = buffer_is_empty
        # Whether the last check() kept a completed round for the records still buffered.
        self.kept = False

    def round_missed_positions(self) -> bool:
        """Whether the round in flight is over but created its fetches with positions
        missing: a poll loop then waits at most ``retry.backoff.ms`` (the offset lookups
        may be backing off) before the next round, as Java's ``pollForFetches`` does."""
        inflight = self.event
        return inflight is None or not inflight.is_complete() or not inflight.had_all_fetch_positions

    def check(self, deadline_ms: int, now_ms: int, first_pass: bool) -> AsyncPollEvent:
        """The poll event in flight (a new one submitted if the last completed); raises its
        error."""
        inflight = self.event
        self.kept = False
        if inflight is not None and inflight.is_complete():
            error = inflight.error()
            if error is not None:
                self.event = None
                raise error
            # Keep a completed event whose records are still buffered (poll(0) must return
            # them, not start validating positions again); otherwise start a new round.
            # A kept round created no fetches for this poll: if what was buffered yields
            # no records (a fetch read to its end), the poll loop must pass again, which
            # starts the round that fetches (see ``kept``), rather than wait for records
            # with no fetch in flight.
            if not first_pass or self._buffer_is_empty():
                self.event = None
            else:
                self.kept = True
        if self.event is None:
            self.event = AsyncPollEvent(deadline_ms, now_ms)
            self._submit(self.event)
        return self.event


class CreateFetchRequestsEvent(CompletableApplicationEvent):
    """Prefetch: ask for the next fetches while the application processes records."""


class CommitEvent(CompletableApplicationEvent):
    """Commit ``offsets`` (None: everything consumed, resolved on the background thread)."""

    def __init__(self, deadline_ms: int, offsets: Optional[Mapping[Any, Any]] = None) -> None:
        super().__init__(deadline_ms)
        self.offsets = None if offsets is None else dict(offsets)
        # Completed with the offsets actually being committed, before the request is sent,
        # so a commit_sync() without offsets is not perturbed by fetches that begin later.
        self.offsets_ready: Future[Any] = Future()


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

    def __init__(self, topic: str, deadline_ms: int) -> None:
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

    def __init__(self, method_name: ConsumerRebalanceListenerMethodName, future: Future[Any],
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


class ConsumerRebalanceListenerCallbackNeededEvent(CompletableBackgroundEvent):
    """Run ``method_name(partitions)`` of the rebalance listener on the application thread."""

    def __init__(self, method_name: ConsumerRebalanceListenerMethodName, partitions: Iterable[Any]) -> None:
        super().__init__()
        self.method_name = method_name
        self.partitions = tuple(sorted(partitions))


def request_listener_callback(handler: "BackgroundEventHandler", has_listener: bool,
                              method: ConsumerRebalanceListenerMethodName, partitions: Iterable[Any],
                              always: bool = False) -> Future[Any]:
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
