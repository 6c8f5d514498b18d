"""SubscriptionFetchPath: the fetch pipeline's side of ``SubscriptionState``.

Java has these on ``SubscriptionState``; kproto's ``SubscriptionState`` inherits them from
this class, so every one is still ``SubscriptionState.method`` (reached by the class's own
attribute lookup: no extra call layer). Owns what ``AbstractFetch`` and ``FetchCollector``
read and write per partition of every Fetch: the positions to fetch from and their
advance (``fetchable_positions``, ``fetchable_position``, ``update_position``,
``move_partition_to_end``), the offsets an answer brings (high watermark, last stable
offset, log start offset: ``update_fetched_offsets``, and ``apply_empty_fetches`` for a run
of answers without records), lags and leads, and the preferred read replica (KIP-392).

Separate from ``subscription_state`` because this is the hot path, tuned by call count:
the combined calls take the lock once for what took several calls, and take it themselves
(``@locks_inside``, see ``subscription_locking``) rather than through a wrapper. The
subscription, the assignment and the fetch-state machine (seeks, resets, validation), which
change a few times per rebalance, stay in ``subscription_state``. The fields read here are
``SubscriptionState``'s, set in its ``__init__``; this class only declares them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Optional, Protocol

from kproto.consumer.subscription_locking import lock_free, locks_inside, synchronize_public_methods
from kproto.consumer.topic_partition_state import FetchPosition, FetchState, TopicPartitionState
from kproto.errors import IllegalStateError
from kproto.structs import IsolationLevel, TopicPartition

__all__ = ["EmptyAnswer", "EMPTY_FETCH_FETCHED", "EMPTY_FETCH_PAUSED", "EMPTY_FETCH_STALE",
           "EMPTY_FETCH_UNFETCHABLE", "SubscriptionFetchPath"]

# Read per partition of every fetch: a module global (an enum member read through its
# class costs several times more).
_FETCHING = FetchState.FETCHING

# What apply_empty_fetches found (plain ints: it answers for most partitions of every Fetch).
EMPTY_FETCH_STALE = 0
EMPTY_FETCH_PAUSED = 1
EMPTY_FETCH_UNFETCHABLE = 2
EMPTY_FETCH_FETCHED = 3


class EmptyAnswer(Protocol):
    """What ``apply_empty_fetches`` reads of a fetch answer (a ``CompletedFetch``)."""

    partition: TopicPartition
    next_fetch_offset: int
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int


@synchronize_public_methods
class SubscriptionFetchPath:
    """The per-Fetch reads and writes of ``SubscriptionState``; see the module docstring."""

    # SubscriptionState's fields (see its __init__): the lock, the assignment in fetch order
    # (changed in place under the lock), the same states for lock-free lookups (replaced
    # whole), and the leader check that a position's new leader invalidates.
    _lock: threading.RLock
    _assignment: dict[TopicPartition, TopicPartitionState]
    _states: dict[TopicPartition, TopicPartitionState]
    _leaders_checked: Optional[tuple[int, int]]

    if TYPE_CHECKING:
        def _state(self, tp: TopicPartition) -> TopicPartitionState:
            """SubscriptionState's: the state of an assigned ``tp``, else IllegalStateError."""

    # --- positions: the fetch order, what to fetch from, where to go on ---------------

    @locks_inside
    def fetchable_position(self, tp: TopicPartition) -> Optional[FetchPosition]:
        """The position of ``tp`` if it is assigned and fetchable now, else None (one read
        of both, so the collector never pairs the fetchability of one moment with the
        position of another)."""
        with self._lock:
            state = self._states.get(tp)
            return state.position if state is not None and state.is_fetchable() else None

    def fetchable_positions(self, skip: "set[TopicPartition] | frozenset[TopicPartition]" = frozenset()
                            ) -> list[tuple[TopicPartition, FetchPosition, Optional[int]]]:
        """``(partition, position, preferred read replica or None)`` of every fetchable
        partition not in ``skip``, in fetch order: what ``prepare_fetch_requests`` needs,
        under one lock rather than three per partition. The replica is as stored; its
        lease is checked by ``preferred_read_replica``."""
        out = []
        for tp, state in self._assignment.items():
            if state.is_fetchable() and tp not in skip:
                position = state.position
                if position is not None:
                    out.append((tp, position, state.preferred_read_replica))
        return out

    @locks_inside
    def update_position(self, tp: TopicPartition, position: FetchPosition, move_to_end: bool = False) -> None:
        """Advance the position (the collector, after returning records); with
        ``move_to_end``, ``move_partition_to_end`` too, under the same lock."""
        with self._lock:
            state = self._state(tp)
            if state.fetch_state is not _FETCHING:
                raise IllegalStateError("Cannot set a new position without a valid current position")
            if state.position is None or position.current_leader != state.position.current_leader:
                self._leaders_checked = None  # a leader to check again
            state.position = position
            if move_to_end:
                assignment = self._assignment
                assignment[tp] = assignment.pop(tp)

    @locks_inside
    def valid_position_or_none(self, tp: TopicPartition) -> Optional[FetchPosition]:
        """The position if ``tp`` is assigned with a valid one (FETCHING), else None."""
        with self._lock:
            state = self._states.get(tp)
            return state.position if state is not None and state.fetch_state is _FETCHING else None

    @locks_inside
    def move_partition_to_end(self, tp: TopicPartition) -> None:
        """Round-robin fairness: a partition just returned goes to the back of the order."""
        with self._lock:
            state = self._assignment.pop(tp, None)
            if state is not None:
                self._assignment[tp] = state

    # --- offsets a fetch answer brings: watermarks, lags, read replicas ----------------

    @locks_inside
    def any_behind(self, positions: Iterable[tuple[TopicPartition, FetchPosition]], read_committed: bool) -> bool:
        """Whether any of these partitions is known (from its last fetch answer) to be
        behind its high watermark, or its last stable offset when ``read_committed``: a
        fetch of it is answered at once rather than held for ``fetch.max.wait.ms``."""
        with self._lock:
            states = self._states
            for tp, position in positions:
                state = states.get(tp)
                if state is None:
                    continue
                end = state.last_stable_offset if read_committed else state.high_watermark
                if end is not None and end > position.offset:
                    return True
        return False

    @locks_inside
    def update_fetched_offsets(self, tp: TopicPartition, high_watermark: int, log_start_offset: int,
                               last_stable_offset: int) -> None:
        """A fetch answer's offsets of ``tp`` (each only if known, >= 0), under one lock."""
        with self._lock:
            state = self._states.get(tp)
            if state is not None:
                if high_watermark >= 0:
                    state.high_watermark = high_watermark
                if log_start_offset >= 0:
                    state.log_start_offset = log_start_offset
                if last_stable_offset >= 0:
                    state.last_stable_offset = last_stable_offset

    @locks_inside
    def apply_empty_fetches(self, answers: Iterable[EmptyAnswer]) -> list[int]:
        """Fetch answers with neither records nor an error, in order, under one lock: each
        one's offsets are taken (as ``update_fetched_offsets``) only if its partition still
        has a valid position at its ``next_fetch_offset``. One outcome per answer:
        ``EMPTY_FETCH_STALE`` (no valid position there: nothing taken), ``EMPTY_FETCH_PAUSED``
        (taken; the partition is paused), ``EMPTY_FETCH_UNFETCHABLE`` (taken; not fetchable
        now, e.g. pending revocation) or ``EMPTY_FETCH_FETCHED`` (taken; fetchable at that
        position). The collector's initialize and fetch_records of such answers, which most
        partitions of a Fetch across many partitions are: one call for all of them."""
        outcomes: list[int] = []
        append = outcomes.append
        with self._lock:
            states = self._states
            for answer in answers:
                state = states.get(answer.partition)
                if state is None or state.fetch_state is not _FETCHING:
                    append(EMPTY_FETCH_STALE)
                    continue
                position = state.position
                if position is None or position.offset != answer.next_fetch_offset:
                    append(EMPTY_FETCH_STALE)
                    continue
                if answer.high_watermark >= 0:
                    state.high_watermark = answer.high_watermark
                if answer.log_start_offset >= 0:
                    state.log_start_offset = answer.log_start_offset
                if answer.last_stable_offset >= 0:
                    state.last_stable_offset = answer.last_stable_offset
                if state.paused:
                    append(EMPTY_FETCH_PAUSED)
                else:
                    append(EMPTY_FETCH_FETCHED if state.is_fetchable() else EMPTY_FETCH_UNFETCHABLE)
        return outcomes

    def update_high_watermark(self, tp: TopicPartition, high_watermark: int) -> None:
        if tp in self._assignment:
            self._assignment[tp].high_watermark = high_watermark

    def update_log_start_offset(self, tp: TopicPartition, log_start_offset: int) -> None:
        if tp in self._assignment:
            self._assignment[tp].log_start_offset = log_start_offset

    def update_last_stable_offset(self, tp: TopicPartition, last_stable_offset: int) -> None:
        if tp in self._assignment:
            self._assignment[tp].last_stable_offset = last_stable_offset

    @lock_free
    def high_watermark(self, tp: TopicPartition) -> Optional[int]:
        return self._state(tp).high_watermark

    @lock_free
    def log_start_offset(self, tp: TopicPartition) -> Optional[int]:
        return self._state(tp).log_start_offset

    @lock_free
    def last_stable_offset(self, tp: TopicPartition) -> Optional[int]:
        return self._state(tp).last_stable_offset

    @locks_inside
    def lags_and_leads(self, partitions: Iterable[TopicPartition], isolation_level: IsolationLevel
                       ) -> list[tuple[TopicPartition, Optional[int], Optional[int]]]:
        """``(partition, partition_lag, lead)`` of each of ``partitions`` still assigned, in
        order, all read under one lock (the collector's metrics: a call per collection, not
        per partition); the lead is the position minus the log start offset, None if
        either is unknown."""
        read_committed = isolation_level == IsolationLevel.READ_COMMITTED
        out: list[tuple[TopicPartition, Optional[int], Optional[int]]] = []
        append = out.append
        with self._lock:
            states = self._states
            for tp in partitions:
                state = states.get(tp)
                if state is None:
                    continue
                position = state.position
                if position is None:
                    append((tp, None, None))
                    continue
                offset = position.offset
                end = state.last_stable_offset if read_committed else state.high_watermark
                start = state.log_start_offset
                append((tp, None if end is None else end - offset, None if start is None else offset - start))
        return out

    def partition_lag(self, tp: TopicPartition, isolation_level: IsolationLevel) -> Optional[int]:
        """Records between the position and the end (LSO under read_committed); None if unknown."""
        state = self._state(tp)
        end = state.last_stable_offset if isolation_level == IsolationLevel.READ_COMMITTED else state.high_watermark
        if end is None or state.position is None:
            return None
        return end - state.position.offset

    def update_preferred_read_replica(self, tp: TopicPartition, replica_id: int, expiration_ms: float) -> None:
        state = self._assignment.get(tp)
        if state is not None:
            state.preferred_read_replica = replica_id
            state.preferred_read_replica_expiration_ms = expiration_ms

    @lock_free
    def preferred_read_replica(self, tp: TopicPartition, now_ms: float) -> Optional[int]:
        """The follower to fetch from (KIP-392), or None once its lease expired."""
        state = self._states.get(tp)
        if state is None or state.preferred_read_replica is None:
            return None  # the common case, one field read: no lock
        with self._lock:
            replica: Optional[int] = state.preferred_read_replica
            expiry = state.preferred_read_replica_expiration_ms
            if replica is not None and expiry is not None and now_ms > expiry:
                state.preferred_read_replica = replica = None
            return replica

    def clear_preferred_read_replica(self, tp: TopicPartition) -> Optional[int]:
        state = self._assignment.get(tp)
        if state is None:
            return None
        old, state.preferred_read_replica = state.preferred_read_replica, None
        return old
