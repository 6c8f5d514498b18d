"""The member states of the KIP-848-style group protocols (consumer groups, share groups) and
the legal transitions between them (Java's ``MemberState``).

Owns ``MemberState`` and ``MemberState.PREVIOUS_VALID_STATES``: the membership manager
refuses (``IllegalStateError``) any transition whose source state is not listed for its
target. The spine is UNSUBSCRIBED -> JOINING -> RECONCILING -> ACKNOWLEDGING -> STABLE; the
back-edges are a new target assignment (STABLE -> RECONCILING), fencing (-> FENCED ->
JOINING), leaving (-> PREPARE_LEAVING -> LEAVING -> UNSUBSCRIBED) and the poll-timer
recovery (LEAVING -> STALE -> JOINING). FATAL is terminal.
"""

from __future__ import annotations

import enum
from typing import Optional, Protocol

from kproto.structs import TopicPartition


class MemberState(enum.Enum):
    UNSUBSCRIBED = "UNSUBSCRIBED"
    """Not in the group: not subscribed, or left, or fenced while leaving."""
    JOINING = "JOINING"
    """Heartbeating with epoch 0 (full state) until the broker answers with an epoch."""
    RECONCILING = "RECONCILING"
    """A target assignment differs from the owned one; revocation/assignment in progress."""
    ACKNOWLEDGING = "ACKNOWLEDGING"
    """Reconciled; the next heartbeat (sent at once) tells the broker what is now owned."""
    STABLE = "STABLE"
    """Owns its target assignment; heartbeats at the broker's interval."""
    FENCED = "FENCED"
    """UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: releasing (lost) partitions, then rejoins."""
    PREPARE_LEAVING = "PREPARE_LEAVING"
    """Leaving (unsubscribe/close): running onPartitionsRevoked before the leave heartbeat."""
    LEAVING = "LEAVING"
    """The leave heartbeat (epoch -1, or -2 for a static member) is to be sent."""
    FATAL = "FATAL"
    """An unrecoverable error (authorization, unsupported version, ...); no more heartbeats."""
    STALE = "STALE"
    """Left because the poll timer expired; rejoins on the next application poll()."""

    def can_handle_new_assignment(self) -> bool:
        """Whether a target assignment in a heartbeat response is taken in this state."""
        return self in _CAN_HANDLE_NEW_ASSIGNMENT

_CAN_HANDLE_NEW_ASSIGNMENT = frozenset({
    MemberState.JOINING, MemberState.RECONCILING, MemberState.ACKNOWLEDGING, MemberState.STABLE})

S = MemberState
# target state -> the states it may be entered from (Java's previousValidStates).
PREVIOUS_VALID_STATES: dict[MemberState, frozenset[MemberState]] = {
    S.STABLE: frozenset({S.JOINING, S.ACKNOWLEDGING, S.RECONCILING}),
    S.RECONCILING: frozenset({S.STABLE, S.JOINING, S.ACKNOWLEDGING, S.RECONCILING}),
    S.ACKNOWLEDGING: frozenset({S.JOINING, S.RECONCILING}),
    S.FATAL: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING, S.PREPARE_LEAVING,
                        S.LEAVING, S.UNSUBSCRIBED, S.FENCED, S.STALE}),
    S.FENCED: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING}),
    S.JOINING: frozenset({S.FENCED, S.UNSUBSCRIBED, S.STALE}),
    S.PREPARE_LEAVING: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING,
                                  S.UNSUBSCRIBED}),
    S.LEAVING: frozenset({S.PREPARE_LEAVING}),
    S.UNSUBSCRIBED: frozenset({S.PREPARE_LEAVING, S.LEAVING, S.FENCED, S.STALE}),
    S.STALE: frozenset({S.LEAVING}),
}
del S


def is_valid_transition(source: MemberState, target: MemberState) -> bool:
    return source in PREVIOUS_VALID_STATES[target]


class MemberStateListener(Protocol):
    """Told about epoch and assignment changes (the commit manager stamps its commits)."""

    def on_member_epoch_updated(self, member_epoch: Optional[int], member_id: str) -> None: ...

    def on_group_assignment_updated(self, partitions: set[TopicPartition]) -> None: ...
