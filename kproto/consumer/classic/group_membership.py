"""Sans-IO membership state of a classic group member (Java's AbstractCoordinator state).

Owns ``MemberState`` (UNJOINED -> PREPARING_REBALANCE -> COMPLETING_REBALANCE -> STABLE), the
current ``Generation`` (generation id, member id, chosen protocol), the rejoin-needed flag
with its reason, and the verdict on every JoinGroup / SyncGroup / Heartbeat answer: what the
answer does to the state and whether the caller retries now, retries after a backoff,
looks the coordinator up again, or fails. No I/O, no clock, no locks: the coordinator
(``abstract_coordinator``) calls it under its own lock.

Error handling follows Java's response handlers:

- JoinGroup: MEMBER_ID_REQUIRED keeps the member id the coordinator handed out and joins
  again at once (KIP-394); UNKNOWN_MEMBER_ID forgets the member id and joins again;
  REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION join again; COORDINATOR_LOAD_IN_PROGRESS
  retries after a backoff; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE rediscover the
  coordinator; FENCED_INSTANCE_ID and anything else (authorization, inconsistent
  protocols, bad session timeout, group full, ...) are fatal.
- SyncGroup: REBALANCE_IN_PROGRESS joins again; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION reset
  the generation and join again; coordinator errors rediscover; FENCED_INSTANCE_ID,
  authorization and version errors are fatal; anything else joins again after a backoff
  (librdkafka's rule; Java fails, but a rejoin is always safe).
- Heartbeat: REBALANCE_IN_PROGRESS asks for a rejoin (only when STABLE: during
  COMPLETING_REBALANCE the SyncGroup answer decides); ILLEGAL_GENERATION /
  UNKNOWN_MEMBER_ID reset the generation (only if it is still the one the Heartbeat
  carried); coordinator errors rediscover; FENCED_INSTANCE_ID fatal.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import NamedTuple, Optional

from kproto import errors, transition_log
from kproto.messages.join_group import JoinGroupResponse
from kproto.messages.sync_group import SyncGroupResponse

log = logging.getLogger("kproto.consumer.classic")

DEFAULT_GENERATION_ID = -1
UNKNOWN_MEMBER_ID = ""


class MemberState(enum.Enum):
    UNJOINED = "UNJOINED"  # not in the group (initial, after leaving or a reset)
    PREPARING_REBALANCE = "PREPARING_REBALANCE"  # JoinGroup sent, no answer yet
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"  # joined, SyncGroup sent
    STABLE = "STABLE"  # assignment received, heartbeating

    def has_not_joined_group(self) -> bool:
        return self in (MemberState.UNJOINED, MemberState.PREPARING_REBALANCE)


class Generation(NamedTuple):
    generation_id: int
    member_id: str
    protocol_name: Optional[str]

    def has_member_id(self) -> bool:
        return self.member_id != UNKNOWN_MEMBER_ID


NO_GENERATION = Generation(DEFAULT_GENERATION_ID, UNKNOWN_MEMBER_ID, None)


@dataclass
class Verdict:
    """What to do after an answer. ``error`` None and ``retry`` False: success."""

    error: Optional[BaseException] = None
    retry: bool = False  # send again (join again for JoinGroup/SyncGroup)
    backoff: bool = False  # ... after retry_backoff_ms
    coordinator_unknown: bool = False  # ... after looking the coordinator up again

    @property
    def fatal(self) -> bool:
        return self.error is not None and not self.retry

    @property
    def ok(self) -> bool:
        return self.error is None and not self.retry


def fenced_instance_error(group_id: str, instance_id: Optional[str]) -> errors.KafkaError:
    return errors.FencedInstanceIdError(
        "group {!r}: another consumer with the same group_instance_id {!r} joined the group and fenced this "
        "one; give every static member a unique group_instance_id".format(group_id, instance_id))


class GroupMembership:
    """State and answer handling of one member; see the module docstring."""

    def __init__(self, group_id: str, group_instance_id: Optional[str] = None) -> None:
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.generation = NO_GENERATION
        self._state = MemberState.UNJOINED
        self.event_source: Optional[str] = None  # the client_id, for kproto.events
        self.rejoin_needed = True
        self.rejoin_reason = "initial join"
        self.leader_id: Optional[str] = None

    @property
    def state(self) -> MemberState:
        return self._state

    @state.setter
    def state(self, new: MemberState) -> None:
        if new is not self._state and transition_log.enabled():
            transition_log.emit("member_state", source=self.event_source, group=self.group_id,
                        member_id=self.generation.member_id,
                        generation=self.generation.generation_id, previous=self._state.name,
                        state=new.name)
        self._state = new

    # --- simple transitions -------------------------------------------------------------------

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_leader(self) -> bool:
        return self.leader_id is not None and self.leader_id == self.generation.member_id

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            log.info("Group %s: rejoin requested (%s)", self.group_id, reason)
        self.rejoin_needed = True
        self.rejoin_reason = reason

    def reset_generation(self, reason: str) -> None:
        """Forget generation and member id (the partitions are then lost, not revoked)."""
        log.info("Group %s: resetting generation %s (%s)", self.group_id, self.generation, reason)
        self.generation = NO_GENERATION
        self.leader_id = None
        self.state = MemberState.UNJOINED
        self.request_rejoin(reason)

    def generation_if_stable(self) -> Optional[Generation]:
        """The generation commits may carry, or None while (re)joining."""
        return self.generation if self.state is MemberState.STABLE else None

    def on_join_sent(self) -> None:
        self.state = MemberState.PREPARING_REBALANCE

    def on_leave(self, reason: str) -> None:
        """After LeaveGroup was sent (or a static member stopped): start over unjoined."""
        self.generation = NO_GENERATION
        self.leader_id = None
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self.rejoin_reason = reason

    # --- answers ----------------------------------------------------------------------------

    def handle_join_response(self, response: JoinGroupResponse) -> Verdict:
        code = response.error_code
        if code == errors.ErrorCode.NONE:
            if self.state is not MemberState.PREPARING_REBALANCE:
                # We left (poll timeout) or reset while the JoinGroup was out: join again.
                return Verdict(errors.IllegalStateError("JoinGroup answer arrived after the member left"), retry=True)
            self.generation = Generation(response.generation_id, response.member_id, response.protocol_name)
            self.leader_id = response.leader
            self.state = MemberState.COMPLETING_REBALANCE
            log.info("Group %s: joined generation %d as %s (leader %s, protocol %s)", self.group_id,
                     response.generation_id, response.member_id, response.leader, response.protocol_name)
            return Verdict()
        exc = errors.exception_for(code)  # JoinGroup answers carry no error message
        cls = type(exc)
        self.state = MemberState.UNJOINED
        if cls is errors.MemberIdRequiredError:
            # KIP-394: the coordinator hands out the member id; join again with it at once.
            self.generation = Generation(DEFAULT_GENERATION_ID, response.member_id, None)
            return Verdict(exc, retry=True)
        if cls is errors.UnknownMemberIdError:
            self.generation = NO_GENERATION
            return Verdict(exc, retry=True)
        if cls in (errors.RebalanceInProgressError, errors.IllegalGenerationError):
            return Verdict(exc, retry=True)
        if cls is errors.CoordinatorLoadInProgressError:
            return Verdict(exc, retry=True, backoff=True)
        if cls in (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError):
            return Verdict(exc, retry=True, backoff=True, coordinator_unknown=True)
        if cls is errors.FencedInstanceIdError:
            return Verdict(fenced_instance_error(self.group_id, self.group_instance_id))
        log.error("Group %s: JoinGroup failed: %s", self.group_id, exc)
        return Verdict(exc)

    def handle_sync_response(self, response: SyncGroupResponse, sent_generation: Generation) -> Verdict:
        code = response.error_code
        if code == errors.ErrorCode.NONE:
            if self.generation != sent_generation or self.state is not MemberState.COMPLETING_REBALANCE:
                return Verdict(errors.IllegalStateError("SyncGroup answer for an old generation"), retry=True)
            self.state = MemberState.STABLE
            self.rejoin_needed = False
            self.rejoin_reason = ""
            return Verdict()
        exc = errors.exception_for(code)  # SyncGroup answers carry no error message
        cls = type(exc)
        if cls is errors.RebalanceInProgressError:
            self.state = MemberState.UNJOINED
            self.request_rejoin("SyncGroup: the group is rebalancing again")
            return Verdict(exc, retry=True)
        if cls in (errors.UnknownMemberIdError, errors.IllegalGenerationError):
            self.reset_generation("SyncGroup: {}".format(exc))
            return Verdict(exc, retry=True)
        if cls in (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError):
            self.state = MemberState.UNJOINED
            self.request_rejoin("SyncGroup: coordinator moved")
            return Verdict(exc, retry=True, backoff=True, coordinator_unknown=True)
        if cls is errors.FencedInstanceIdError:
            return Verdict(fenced_instance_error(self.group_id, self.group_instance_id))
        self.state = MemberState.UNJOINED
        if cls in (errors.GroupAuthorizationFailedError, errors.UnsupportedVersionError):
            log.error("Group %s: SyncGroup failed: %s", self.group_id, exc)
            return Verdict(exc)
        # Anything else (the mock cluster answers INVALID_REQUEST to a SyncGroup that comes
        # after the leader's completed the round): join again, as librdkafka does.
        log.warning("Group %s: SyncGroup failed (%s); joining again", self.group_id, exc)
        self.request_rejoin("SyncGroup: {}".format(exc))
        return Verdict(exc, retry=True, backoff=True)

    def handle_heartbeat_response(self, code: int, sent_generation: Generation) -> Verdict:
        if code == errors.ErrorCode.NONE:
            return Verdict()
        exc = errors.exception_for(code)
        cls = type(exc)
        if cls is errors.RebalanceInProgressError:
            if self.state is MemberState.STABLE:
                self.request_rejoin("Heartbeat: the group is rebalancing")
            return Verdict(exc, retry=True)
        if cls in (errors.IllegalGenerationError, errors.UnknownMemberIdError):
            if self.generation == sent_generation:
                self.reset_generation("Heartbeat: {}".format(exc))
            return Verdict(exc, retry=True)
        if cls in (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError):
            return Verdict(exc, retry=True, backoff=True, coordinator_unknown=True)
        if cls is errors.FencedInstanceIdError:
            if self.generation != sent_generation:
                return Verdict(exc, retry=True)  # an old generation's answer: ignore
            return Verdict(fenced_instance_error(self.group_id, self.group_instance_id))
        return Verdict(exc)
