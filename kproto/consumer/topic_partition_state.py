"""TopicPartitionState: one assigned partition's fetch state machine (Java's inner class).

Owns the value types of a partition's position — ``FetchPosition`` (offset, its epoch, the
leader then), ``LeaderAndEpoch``, ``LogTruncation`` — the ``AutoOffsetResetStrategy``,
the ``FetchState`` enum with Java's ``FetchStates`` transition table, and
``TopicPartitionState`` itself, which enforces the table. Only ``SubscriptionState``
changes a ``TopicPartitionState``, under its lock; the rest of the consumer imports these
names from ``kproto.consumer.subscription_state``.
"""

from __future__ import annotations

import enum
import itertools
from typing import NamedTuple, Optional

from kproto import transition_log
from kproto.errors import IllegalArgumentError, IllegalStateError
from kproto.structs import OffsetAndMetadata, TopicPartition


class AutoOffsetResetStrategy(enum.Enum):
    """What to do without a valid position; ``timestamp`` is ListOffsets' special value."""

    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"

    @property
    def timestamp(self) -> int:
        if self is AutoOffsetResetStrategy.EARLIEST:
            return -2
        if self is AutoOffsetResetStrategy.LATEST:
            return -1
        raise IllegalStateError("reset strategy 'none' has no ListOffsets timestamp")

    @classmethod
    def of(cls, value: "str | AutoOffsetResetStrategy") -> "AutoOffsetResetStrategy":
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise IllegalArgumentError("unknown offset reset strategy {!r}".format(value)) from None


class FetchState(enum.Enum):
    INITIALIZING = "INITIALIZING"
    FETCHING = "FETCHING"
    AWAIT_RESET = "AWAIT_RESET"
    AWAIT_VALIDATION = "AWAIT_VALIDATION"

    @property
    def valid_transitions(self) -> frozenset["FetchState"]:
        return _TRANSITIONS[self]

    @property
    def requires_position(self) -> bool:
        return self in (FetchState.FETCHING, FetchState.AWAIT_VALIDATION)

    @property
    def has_valid_position(self) -> bool:
        return self is _FETCHING


# Read per partition of every fetch: a module global, where FetchState.FETCHING is an enum
# member looked up through its class (several times the cost).
_FETCHING = FetchState.FETCHING

_TRANSITIONS: dict[FetchState, frozenset[FetchState]] = {
    FetchState.INITIALIZING: frozenset({FetchState.FETCHING, FetchState.AWAIT_RESET, FetchState.AWAIT_VALIDATION}),
    FetchState.FETCHING: frozenset({FetchState.FETCHING, FetchState.AWAIT_RESET, FetchState.AWAIT_VALIDATION}),
    FetchState.AWAIT_RESET: frozenset({FetchState.FETCHING, FetchState.AWAIT_RESET}),
    FetchState.AWAIT_VALIDATION: frozenset({FetchState.FETCHING, FetchState.AWAIT_RESET, FetchState.AWAIT_VALIDATION}),
}


class LeaderAndEpoch(NamedTuple):
    """The partition leader's node id and leader epoch as last known (either may be None)."""

    leader: Optional[int] = None
    epoch: Optional[int] = None


class FetchPosition(NamedTuple):
    """The offset of the next record to return, its leader epoch, and the leader then."""

    offset: int
    offset_epoch: Optional[int] = None
    current_leader: LeaderAndEpoch = LeaderAndEpoch()


class LogTruncation(NamedTuple):
    """Validation found the log truncated below ``fetch_position`` (and no reset policy)."""

    topic_partition: TopicPartition
    fetch_position: FetchPosition
    divergent_offset: Optional[OffsetAndMetadata]


# Numbers the fetch-state transitions of every TopicPartitionState (next() on a count is
# atomic): ``TopicPartitionState.last_transition`` changes whenever some position is set.
_TRANSITION_NUMBERS = itertools.count(1)


class TopicPartitionState:
    """One assigned partition's state; only SubscriptionState touches it (under its lock).

    ``TopicPartitionState.last_transition`` (class-wide) is the number of the latest
    transition of any state: SubscriptionState skips re-checking every position against
    the metadata's leaders while neither it nor the metadata changed.
    """

    last_transition = 0

    __slots__ = ("fetch_state", "position", "high_watermark", "log_start_offset", "last_stable_offset",
                 "paused", "pending_revocation", "pending_on_assigned_callback", "reset_strategy",
                 "next_retry_time_ms", "preferred_read_replica", "preferred_read_replica_expiration_ms",
                 "event_label")

    def __init__(self) -> None:
        self.fetch_state = FetchState.INITIALIZING
        self.position: Optional[FetchPosition] = None
        self.high_watermark: Optional[int] = None
        self.log_start_offset: Optional[int] = None
        self.last_stable_offset: Optional[int] = None
        self.paused = False
        self.pending_revocation = False
        self.pending_on_assigned_callback = False
        self.reset_strategy: Optional[AutoOffsetResetStrategy] = None
        self.next_retry_time_ms: Optional[int] = None
        self.preferred_read_replica: Optional[int] = None
        self.preferred_read_replica_expiration_ms: Optional[float] = None
        # (source, "topic-p") for kproto.events, set by SubscriptionState.
        self.event_label: Optional[tuple[Optional[str], str]] = None

    def transition_state(self, new_state: FetchState, position: Optional[FetchPosition] = None) -> None:
        if new_state not in self.fetch_state.valid_transitions:
            raise IllegalStateError("illegal fetch state transition {} -> {}".format(
                self.fetch_state.name, new_state.name))
        if new_state.requires_position:
            if position is None:
                raise IllegalStateError("transitioned to {} without a position".format(new_state.name))
            self.position = position
        else:
            self.position = None
        if self.event_label is not None and transition_log.enabled():
            transition_log.emit("fetch_state", source=self.event_label[0], partition=self.event_label[1],
                        previous=self.fetch_state.name, state=new_state.name,
                        position=None if self.position is None else self.position.offset)
        self.fetch_state = new_state
        self.next_retry_time_ms = None
        TopicPartitionState.last_transition = next(_TRANSITION_NUMBERS)

    def is_fetchable(self) -> bool:
        return (not self.paused and not self.pending_revocation and not self.pending_on_assigned_callback
                and self.fetch_state is _FETCHING)

    def seek_validated(self, position: FetchPosition) -> None:
        self.transition_state(FetchState.FETCHING, position)

    def seek_unvalidated(self, position: FetchPosition) -> None:
        self.seek_validated(position)
        self.validate_position(position)

    def validate_position(self, position: FetchPosition) -> None:
        # Without both epochs there is nothing OffsetForLeaderEpoch could check.
        if position.offset_epoch is not None and position.current_leader.epoch is not None:
            self.transition_state(FetchState.AWAIT_VALIDATION, position)
        else:
            self.transition_state(FetchState.FETCHING, position)

    def reset(self, strategy: AutoOffsetResetStrategy) -> None:
        self.transition_state(FetchState.AWAIT_RESET)
        self.reset_strategy = strategy

    def awaiting_retry_backoff(self, now_ms: int) -> bool:
        return self.next_retry_time_ms is not None and now_ms < self.next_retry_time_ms

    def __repr__(self) -> str:
        return "TopicPartitionState(fetch_state={}, position={}, paused={})".format(
            self.fetch_state.name, self.position, self.paused)
