"""SubscriptionState: what the consumer reads and where, shared by both engines.

Java's ``SubscriptionState`` with its method names in snake_case. It owns the subscription
type (topics, pattern or manual assignment, mutually exclusive), the assigned partitions in
assignment order, and for each one a ``TopicPartitionState``: its fetch state, position,
high watermark / last stable offset / log start offset, pause and pending-revocation flags,
the reset strategy while awaiting a reset, and the preferred read replica (KIP-392).

Fetch states and their legal transitions (Java's ``FetchStates`` table)::

    INITIALIZING     -> FETCHING, AWAIT_RESET, AWAIT_VALIDATION
    FETCHING         -> FETCHING, AWAIT_RESET, AWAIT_VALIDATION
    AWAIT_RESET      -> FETCHING, AWAIT_RESET
    AWAIT_VALIDATION -> FETCHING, AWAIT_RESET, AWAIT_VALIDATION

FETCHING and AWAIT_VALIDATION require a position; entering INITIALIZING or AWAIT_RESET
clears it. An illegal transition raises ``IllegalStateError``.

Thread safety: every public method that writes, or reads more than one field, holds one
``RLock``, because the KIP-848 engine's background thread updates assignments and
watermarks while the application thread seeks, pauses and reads positions; one-field reads
of one partition (``@lock_free``) and the assigned and paused partitions (frozensets
published whole) take none. ``subscription_locking`` owns these rules and their decorators.

Layout: this module owns the subscription, the assignment, pause and revocation, and the
fetch-state machine's driving (seeks, positions, resets, OffsetForLeaderEpoch validation).
``SubscriptionState`` inherits the fetch pipeline's side, the hot path (``fetchable_positions``,
``update_position``, ``update_fetched_offsets``, ``apply_empty_fetches``, ``lags_and_leads``,
watermarks, preferred read replicas), from ``SubscriptionFetchPath`` in
``subscription_fetch_path``. The per-partition state machine and position types live in
``topic_partition_state``. All are re-exported here, where the rest of the consumer imports
them from.
"""

from __future__ import annotations

import enum
import logging
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any, Optional

from kproto.consumer.subscription_fetch_path import (EMPTY_FETCH_FETCHED, EMPTY_FETCH_PAUSED, EMPTY_FETCH_STALE,
                                                     EMPTY_FETCH_UNFETCHABLE, EmptyAnswer, SubscriptionFetchPath)
from kproto.consumer.subscription_locking import lock_free, synchronize_public_methods
from kproto.consumer.topic_partition_state import (AutoOffsetResetStrategy, FetchPosition, FetchState,
                                                   LeaderAndEpoch, LogTruncation, TopicPartitionState)
from kproto import transition_log
from kproto.errors import IllegalArgumentError, IllegalStateError, NoOffsetForPartitionError
from kproto.structs import OffsetAndMetadata, TopicPartition

__all__ = ["AutoOffsetResetStrategy", "EmptyAnswer", "EMPTY_FETCH_FETCHED", "EMPTY_FETCH_PAUSED", "EMPTY_FETCH_STALE",
           "EMPTY_FETCH_UNFETCHABLE", "FetchPosition", "FetchState", "LeaderAndEpoch", "LogTruncation",
           "SubscriptionState", "SubscriptionType", "TopicPartitionState"]

log = logging.getLogger("kproto.consumer")


class SubscriptionType(enum.Enum):
    NONE = "NONE"
    AUTO_TOPICS = "AUTO_TOPICS"
    AUTO_PATTERN = "AUTO_PATTERN"
    AUTO_PATTERN_RE2J = "AUTO_PATTERN_RE2J"  # a regex the broker evaluates (KIP-848)
    USER_ASSIGNED = "USER_ASSIGNED"


# Read per partition of every fetch: a module global (an enum member read through its
# class costs several times more).
_FETCHING = FetchState.FETCHING
# Asked on every poll: a set of the members, read once (an enum member read through its
# class costs more than the test itself).
_AUTO_ASSIGNED = frozenset({SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN,
                            SubscriptionType.AUTO_PATTERN_RE2J})
_PATTERNS = frozenset({SubscriptionType.AUTO_PATTERN, SubscriptionType.AUTO_PATTERN_RE2J})


@synchronize_public_methods
class SubscriptionState(SubscriptionFetchPath):
    """Subscription, assignment and per-partition fetch state; see the module docstring.

    Java's ``SubscriptionState``; the fetch pipeline's methods are inherited from
    ``SubscriptionFetchPath`` (the hot path, in its own module).
    """

    SUBSCRIPTION_EXCEPTION_MESSAGE = "Subscription to topics, partitions and pattern are mutually exclusive"

    def __init__(self, default_reset_strategy: "str | AutoOffsetResetStrategy" = "latest") -> None:
        self._lock = threading.RLock()
        self._default_reset_strategy = AutoOffsetResetStrategy.of(default_reset_strategy)
        self._subscription_type = SubscriptionType.NONE
        self._subscribed_pattern: Optional[re.Pattern[str]] = None
        self._subscription: frozenset[str] = frozenset()
        # The leader of a classic group also tracks the topics every member subscribed to.
        self._group_subscription: frozenset[str] = frozenset()
        # The assigned partitions in fetch order (changed in place under the lock) and the
        # same states for lock-free lookups (replaced whole, never changed in place).
        self._assignment: dict[TopicPartition, TopicPartitionState] = {}
        self._states: dict[TopicPartition, TopicPartitionState] = {}
        # The assigned partitions as handed out by assigned_partitions(): one immutable
        # snapshot shared by every caller until the assignment changes (copying 1,000
        # partitions per call cost ~40 µs), published whole with _states.
        self._assigned: frozenset[TopicPartition] = frozenset()
        # The paused partitions, kept with pause()/resume() so paused() walks no assignment.
        self._paused: frozenset[TopicPartition] = frozenset()
        # Bumped on every assignment change so in-flight fetches can tell they are stale.
        self._assignment_id = 0
        # (metadata update count, latest position transition) after the last full leader
        # check (see maybe_validate_positions_for_current_leaders); None: check again.
        self._leaders_checked: Optional[tuple[int, int]] = None
        # has_all_fetch_positions' answer and the (assignment id, transition) it holds for.
        self._all_positions = True
        self._all_positions_key: Optional[tuple[int, int]] = None
        # Partitions per waiting fetch state and the (assignment id, transition) they hold
        # for: every poll asks which partitions await a reset or a validation, and with
        # 1,000 partitions walking them all cost more than the records (_in_state).
        self._in_state_cache: dict[FetchState, list[tuple[TopicPartition, TopicPartitionState]]] = {}
        self._in_state_key: Optional[tuple[int, int]] = None
        self.rebalance_listener: Any = None
        # Who this consumer is in kproto.events (its client_id; set by the consumer).
        self.event_source: Optional[str] = None

    # --- subscription ---------------------------------------------------------------

    def _set_subscription_type(self, kind: SubscriptionType) -> None:
        if self._subscription_type is SubscriptionType.NONE:
            self._subscription_type = kind
        elif self._subscription_type is not kind:
            raise IllegalStateError(self.SUBSCRIPTION_EXCEPTION_MESSAGE)

    @property
    def subscription_type(self) -> SubscriptionType:
        return self._subscription_type

    def subscribe(self, topics: Iterable[str], listener: Any = None) -> bool:
        """Subscribe to a topic list; True if the subscription changed."""
        topics = [topics] if isinstance(topics, str) else list(topics)
        for topic in topics:
            if not isinstance(topic, str) or not topic.strip():
                raise IllegalArgumentError("Topic collection to subscribe to cannot contain null or empty topic")
        self._set_subscription_type(SubscriptionType.AUTO_TOPICS)
        self.rebalance_listener = listener
        return self._change_subscription(frozenset(topics))

    def subscribe_pattern(self, pattern: "str | re.Pattern[str]", listener: Any = None,
                          broker_evaluated: bool = False) -> None:
        """Subscribe to topics matching a regex (client-side, or by the broker for KIP-848)."""
        kind = SubscriptionType.AUTO_PATTERN_RE2J if broker_evaluated else SubscriptionType.AUTO_PATTERN
        try:
            compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        except re.error as exc:
            raise IllegalArgumentError("invalid subscription pattern {!r}: {}".format(pattern, exc)) from None
        self._set_subscription_type(kind)
        self.rebalance_listener = listener
        self._subscribed_pattern = compiled

    def subscribe_from_pattern(self, topics: Iterable[str]) -> bool:
        """Set the topics a client-side pattern matched in the latest metadata."""
        if self._subscription_type is not SubscriptionType.AUTO_PATTERN:
            raise IllegalArgumentError("Attempt to subscribe from pattern while subscription type set to "
                                       + self._subscription_type.name)
        return self._change_subscription(frozenset(topics))

    def _change_subscription(self, topics: frozenset[str]) -> bool:
        if topics == self._subscription:
            return False
        self._subscription = topics
        return True

    def subscription(self) -> set[str]:
        return set(self._subscription) if self.has_auto_assigned_partitions() else set()

    def subscribed_pattern(self) -> Optional[re.Pattern[str]]:
        return self._subscribed_pattern

    def matches_subscribed_pattern(self, topic: str) -> bool:
        return self._subscribed_pattern is not None and self._subscribed_pattern.fullmatch(topic) is not None

    def has_pattern_subscription(self) -> bool:
        return self._subscription_type in _PATTERNS

    def has_auto_assigned_partitions(self) -> bool:
        return self._subscription_type in _AUTO_ASSIGNED

    def has_no_subscription_or_user_assignment(self) -> bool:
        return self._subscription_type is SubscriptionType.NONE

    def group_subscribe(self, topics: Iterable[str]) -> bool:
        """(Classic leader) add every member's topics to the metadata this consumer tracks."""
        if not self.has_auto_assigned_partitions():
            raise IllegalStateError(self.SUBSCRIPTION_EXCEPTION_MESSAGE)
        merged = self._group_subscription | frozenset(topics)
        changed = merged != self._group_subscription
        self._group_subscription = merged
        return changed

    def reset_group_subscription(self) -> None:
        self._group_subscription = frozenset()

    def metadata_topics(self) -> set[str]:
        """Topics whose metadata the consumer needs."""
        if self._subscription_type is SubscriptionType.USER_ASSIGNED:
            return {tp.topic for tp in self._assignment}
        return set(self._subscription | self._group_subscription)

    def unsubscribe(self) -> None:
        self._subscription = frozenset()
        self._group_subscription = frozenset()
        self._assignment = {}
        self._states = {}
        self._assigned = frozenset()
        self._paused = frozenset()
        self._assignment_id += 1
        self._subscribed_pattern = None
        self._subscription_type = SubscriptionType.NONE
        self.rebalance_listener = None

    # --- assignment -----------------------------------------------------------------

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> bool:
        """Manual assignment; True if it changed. Existing partitions keep their state."""
        partitions = list(partitions)
        for tp in partitions:
            if not isinstance(tp, tuple) or len(tp) != 2 or not isinstance(tp[0], str) or not tp[0].strip():
                raise IllegalArgumentError("Topic partitions to assign to cannot have null or empty topic")
        self._set_subscription_type(SubscriptionType.USER_ASSIGNED)
        wanted = [TopicPartition(*tp) for tp in partitions]
        if set(wanted) == set(self._assignment):
            return False
        self._set_assignment(wanted)
        return True

    def assign_from_subscribed(self, assignments: Iterable[TopicPartition]) -> None:
        """An assignment from the group; every partition must belong to the subscription."""
        if not self.has_auto_assigned_partitions():
            raise IllegalArgumentError("Attempt to dynamically assign partitions while manual assignment in use")
        assignments = [TopicPartition(*tp) for tp in assignments]
        # A broker-evaluated pattern's topics are not known to the client; trust the broker.
        if self._subscription_type is not SubscriptionType.AUTO_PATTERN_RE2J:
            for tp in assignments:
                if tp.topic not in self._subscription and not self.matches_subscribed_pattern(tp.topic):
                    raise IllegalArgumentError("Assigned partition {}-{} for non-subscribed topic".format(*tp))
        self._set_assignment(assignments)

    def assign_from_subscribed_awaiting_callback(self, full: Iterable[TopicPartition],
                                                 added: Iterable[TopicPartition]) -> None:
        """(KIP-848) assign ``full``; ``added`` stay unfetchable until the assigned callback ran."""
        self.assign_from_subscribed(full)
        for tp in added:
            state = self._assignment.get(TopicPartition(*tp))
            if state is not None:
                state.pending_on_assigned_callback = True

    def enable_partitions_awaiting_callback(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            state = self._assignment.get(TopicPartition(*tp))
            if state is not None:
                state.pending_on_assigned_callback = False

    def _set_assignment(self, partitions: list[TopicPartition]) -> None:
        old = self._assignment
        self._assignment = {tp: old.get(tp) or TopicPartitionState() for tp in dict.fromkeys(partitions)}
        self._states = dict(self._assignment)
        self._assigned = frozenset(self._states)
        self._paused = frozenset(tp for tp, state in self._assignment.items() if state.paused)
        self._assignment_id += 1
        if transition_log.enabled():
            for tp, state in self._assignment.items():
                state.event_label = (self.event_source, "{}-{}".format(*tp))
            transition_log.emit("assignment", source=self.event_source,
                        partitions=sorted("{}-{}".format(*tp) for tp in self._assignment),
                        added=sorted("{}-{}".format(*tp) for tp in self._assignment if tp not in old),
                        removed=sorted("{}-{}".format(*tp) for tp in old if tp not in self._assignment))
        log.debug("assignment is now %s", list(self._assignment))

    @lock_free
    def assignment_id(self) -> int:
        return self._assignment_id

    @lock_free
    def assigned_partitions(self) -> frozenset[TopicPartition]:
        """The assigned partitions: an immutable snapshot, the same object until the
        assignment changes (callers cannot change the state through it)."""
        return self._assigned

    def assigned_partitions_list(self) -> list[TopicPartition]:
        return list(self._assignment)

    @lock_free
    def num_assigned_partitions(self) -> int:
        return len(self._states)

    @lock_free
    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._states

    def _state(self, tp: TopicPartition) -> TopicPartitionState:
        state = self._states.get(tp)
        if state is None:
            raise IllegalStateError("No current assignment for partition {}-{}".format(*tp))
        return state

    # --- fetchability, pause and revocation ----------------------------------------------

    def fetchable_partitions(self, predicate: Optional[Callable[[TopicPartition], bool]] = None) -> list[TopicPartition]:
        """Assigned partitions, in assignment order, that may be fetched now."""
        return [tp for tp, state in self._assignment.items()
                if state.is_fetchable() and (predicate is None or predicate(tp))]

    def is_fetchable(self, tp: TopicPartition) -> bool:
        state = self._assignment.get(tp)
        return state is not None and state.is_fetchable()

    def pause(self, tp: TopicPartition) -> None:
        self._state(tp).paused = True
        self._paused = self._paused | {TopicPartition(*tp)}

    def resume(self, tp: TopicPartition) -> None:
        self._state(tp).paused = False
        self._paused = self._paused - {TopicPartition(*tp)}

    @lock_free
    def is_paused(self, tp: TopicPartition) -> bool:
        state = self._states.get(tp)
        return state is not None and state.paused

    @lock_free
    def paused_partitions(self) -> frozenset[TopicPartition]:
        """The paused partitions: an immutable snapshot, replaced whole by pause/resume."""
        return self._paused

    def mark_pending_revocation(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching partitions about to be revoked (their state is kept until then)."""
        for tp in partitions:
            state = self._assignment.get(TopicPartition(*tp))
            if state is not None:
                state.pending_revocation = True

    def is_pending_revocation(self, tp: TopicPartition) -> bool:
        state = self._assignment.get(tp)
        return state is not None and state.pending_revocation

    # --- positions ------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """User seek: the next record returned will be ``offset``; no epoch to validate."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise IllegalArgumentError("seek offset must be a non-negative integer, got {!r}".format(offset))
        self.seek_validated(tp, FetchPosition(offset))

    def seek_validated(self, tp: TopicPartition, position: FetchPosition) -> None:
        self._state(tp).seek_validated(position)

    def seek_unvalidated(self, tp: TopicPartition, position: FetchPosition) -> None:
        """Set a position that needs OffsetForLeaderEpoch validation when it has epochs."""
        self._state(tp).seek_unvalidated(position)

    def maybe_seek_unvalidated(self, tp: TopicPartition, position: FetchPosition,
                               requested_strategy: AutoOffsetResetStrategy) -> None:
        """Apply a ListOffsets reset result unless the partition moved on in the meantime."""
        state = self._assignment.get(tp)
        if state is None:
            log.debug("skipping reset of %s: no longer assigned", tp)
        elif state.fetch_state is not FetchState.AWAIT_RESET:
            log.debug("skipping reset of %s: no longer awaiting a reset", tp)
        elif state.reset_strategy is not requested_strategy:
            log.debug("skipping reset of %s: strategy changed", tp)
        else:
            state.seek_unvalidated(position)

    @lock_free
    def position(self, tp: TopicPartition) -> Optional[FetchPosition]:
        return self._state(tp).position

    @lock_free
    def position_or_none(self, tp: TopicPartition) -> Optional[FetchPosition]:
        """The position, or None if there is none or the partition is not assigned."""
        state = self._states.get(tp)
        return None if state is None else state.position

    def valid_position(self, tp: TopicPartition) -> Optional[FetchPosition]:
        state = self._state(tp)
        return state.position if state.fetch_state is FetchState.FETCHING else None

    @lock_free
    def has_valid_position(self, tp: TopicPartition) -> bool:
        state = self._states.get(tp)
        return state is not None and state.fetch_state is _FETCHING

    def has_all_fetch_positions(self) -> bool:
        # Every poll asks; the answer can only change with the assignment or a transition.
        key = (self._assignment_id, TopicPartitionState.last_transition)
        if key != self._all_positions_key:
            self._all_positions = all(state.fetch_state.has_valid_position for state in self._assignment.values())
            self._all_positions_key = key
        return self._all_positions

    @lock_free
    def fetch_state(self, tp: TopicPartition) -> FetchState:
        return self._state(tp).fetch_state

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The offsets to commit: each valid position with its leader epoch."""
        return {tp: OffsetAndMetadata(state.position.offset, "",
                                      -1 if state.position.offset_epoch is None else state.position.offset_epoch)
                for tp, state in self._assignment.items()
                if state.fetch_state.has_valid_position and state.position is not None}

    # --- resets ---------------------------------------------------------------------

    @property
    def default_reset_strategy(self) -> AutoOffsetResetStrategy:
        return self._default_reset_strategy

    def has_default_offset_reset_policy(self) -> bool:
        return self._default_reset_strategy is not AutoOffsetResetStrategy.NONE

    def request_offset_reset(self, tp: TopicPartition,
                             strategy: "str | AutoOffsetResetStrategy | None" = None) -> None:
        strategy = self._default_reset_strategy if strategy is None else AutoOffsetResetStrategy.of(strategy)
        self._state(tp).reset(strategy)

    def request_offset_reset_if_partition_assigned(self, tp: TopicPartition) -> None:
        if tp in self._assignment:
            self._assignment[tp].reset(self._default_reset_strategy)

    def is_offset_reset_needed(self, tp: TopicPartition) -> bool:
        return self._state(tp).fetch_state is FetchState.AWAIT_RESET

    def reset_strategy(self, tp: TopicPartition) -> Optional[AutoOffsetResetStrategy]:
        return self._state(tp).reset_strategy

    def initializing_partitions(self) -> set[TopicPartition]:
        """Partitions with no position yet (the committed offset should be fetched)."""
        return {tp for tp, state in self._assignment.items() if state.fetch_state is FetchState.INITIALIZING}

    def reset_initializing_positions(self, predicate: Optional[Callable[[TopicPartition], bool]] = None) -> None:
        """Move INITIALIZING partitions (no committed offset) to AWAIT_RESET by the default policy.

        Raises ``NoOffsetForPartitionError`` naming them if the policy is 'none'.
        """
        undefined = []
        for tp, state in self._assignment.items():
            if state.fetch_state is FetchState.INITIALIZING and (predicate is None or predicate(tp)):
                if self._default_reset_strategy is AutoOffsetResetStrategy.NONE:
                    undefined.append(tp)
                else:
                    state.reset(self._default_reset_strategy)
        if undefined:
            raise NoOffsetForPartitionError("Undefined offset with no reset policy for partitions: {}".format(
                ", ".join("{}-{}".format(*tp) for tp in undefined)))

    def _in_state(self, fetch_state: FetchState) -> list[tuple[TopicPartition, TopicPartitionState]]:
        """The assigned partitions in ``fetch_state``, walked again only after the assignment
        or some partition's fetch state changed."""
        key = (self._assignment_id, TopicPartitionState.last_transition)
        if key != self._in_state_key:
            self._in_state_cache = {}
            self._in_state_key = key
        found = self._in_state_cache.get(fetch_state)
        if found is None:
            found = self._in_state_cache[fetch_state] = [
                (tp, state) for tp, state in self._assignment.items() if state.fetch_state is fetch_state]
        return found

    def partitions_needing_reset(self, now_ms: int) -> set[TopicPartition]:
        return {tp for tp, state in self._in_state(FetchState.AWAIT_RESET)
                if not state.awaiting_retry_backoff(now_ms)}

    def set_next_allowed_retry(self, partitions: Iterable[TopicPartition], next_allowed_ms: int) -> None:
        for tp in partitions:
            state = self._assignment.get(tp)
            if state is not None:
                state.next_retry_time_ms = next_allowed_ms

    request_failed = set_next_allowed_retry

    # --- validation (OffsetForLeaderEpoch) -------------------------------------------

    def maybe_validate_position_for_current_leader(self, tp: TopicPartition, leader: LeaderAndEpoch) -> bool:
        """Note the current leader; True if the partition now awaits validation."""
        state = self._state(tp)
        self._note_current_leader(state, leader)
        return state.fetch_state is FetchState.AWAIT_VALIDATION

    @staticmethod
    def _note_current_leader(state: TopicPartitionState, leader: LeaderAndEpoch) -> None:
        if state.fetch_state is FetchState.AWAIT_RESET or leader.leader is None:
            return
        if state.position is not None and state.position.current_leader != leader:
            state.validate_position(state.position._replace(current_leader=leader))
            state.preferred_read_replica = None

    def maybe_validate_positions_for_current_leaders(
            self, current_leader: Callable[[TopicPartition], LeaderAndEpoch],
            metadata_version: Optional[int] = None) -> None:
        """``maybe_validate_position_for_current_leader`` for every assigned partition.

        Every poll asks this; with 1,000 partitions the per-partition work cost more than
        the records. So, as Java checks only when the metadata's update version changed,
        it is skipped when ``metadata_version`` (the metadata's update count; None: always
        check) and the latest position transition are what they were after the last check:
        then every position still names the leader it was checked against.
        """
        key = None if metadata_version is None else (metadata_version, TopicPartitionState.last_transition)
        if key is not None and key == self._leaders_checked:
            return
        for tp, state in self._assignment.items():
            if state.position is not None and state.fetch_state is not FetchState.AWAIT_RESET:
                self._note_current_leader(state, current_leader(tp))
        self._leaders_checked = (None if metadata_version is None
                                 else (metadata_version, TopicPartitionState.last_transition))

    def awaiting_validation(self, tp: TopicPartition) -> bool:
        state = self._assignment.get(tp)
        return state is not None and state.fetch_state is FetchState.AWAIT_VALIDATION

    def partitions_needing_validation(self, now_ms: int) -> set[TopicPartition]:
        return {tp for tp, state in self._in_state(FetchState.AWAIT_VALIDATION)
                if not state.awaiting_retry_backoff(now_ms)}

    def complete_validation(self, tp: TopicPartition) -> None:
        state = self._state(tp)
        if state.fetch_state is FetchState.AWAIT_VALIDATION:
            state.transition_state(FetchState.FETCHING, state.position)

    def maybe_complete_validation(self, tp: TopicPartition, requested_position: FetchPosition,
                                  end_offset: int, leader_epoch: int) -> Optional[LogTruncation]:
        """Apply an OffsetForLeaderEpoch answer (``end_offset``/``leader_epoch``, -1 if undefined).

        Returns a ``LogTruncation`` when the log diverged and there is no reset policy;
        with a policy the position moves to the divergence point (or a reset is requested).
        """
        state = self._assignment.get(tp)
        if state is None or state.fetch_state is not FetchState.AWAIT_VALIDATION:
            log.debug("skipping validation of %s: not awaiting validation", tp)
            return None
        current = state.position
        if current != requested_position:
            log.debug("skipping validation of %s: position changed to %s", tp, current)
            return None
        if end_offset < 0 or leader_epoch < 0:
            if self.has_default_offset_reset_policy():
                state.reset(self._default_reset_strategy)
                return None
            return LogTruncation(tp, requested_position, None)
        if end_offset < current.offset:
            if self.has_default_offset_reset_policy():
                state.seek_validated(FetchPosition(end_offset, leader_epoch, current.current_leader))
                return None
            return LogTruncation(tp, requested_position, OffsetAndMetadata(end_offset, "", leader_epoch))
        state.transition_state(FetchState.FETCHING, current)
        return None

