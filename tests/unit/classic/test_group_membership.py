"""Sans-IO tests of the classic group member: liveness timers on a fake clock and the
membership state machine's verdicts on JoinGroup / SyncGroup / Heartbeat answers."""

from __future__ import annotations

import pytest

from kproto import errors
from kproto.consumer.classic.group_membership import NO_GENERATION, Generation, GroupMembership, MemberState
from kproto.consumer.classic.heartbeat import Heartbeat
from kproto.messages import JoinGroupResponse, SyncGroupResponse

NONE, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 0, 14, 15, 16
ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 22, 23, 25, 27
GROUP_AUTHORIZATION_FAILED, MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID = 30, 79, 82


def timers(now: float = 1000.0) -> Heartbeat:
    return Heartbeat(session_timeout_ms=10000, heartbeat_interval_ms=3000, max_poll_interval_ms=20000,
                     retry_backoff_ms=100, now_ms=now)


# --- Heartbeat timers ------------------------------------------------------------------------


def test_heartbeat_due_every_interval_and_not_while_in_flight():
    hb = timers(1000)
    assert not hb.should_heartbeat(3999)
    assert hb.time_to_next_heartbeat(2000) == 2000
    assert hb.should_heartbeat(4000)
    hb.sent_heartbeat(4000)
    assert not hb.should_heartbeat(8000)  # the previous one is still out
    hb.received_heartbeat(4050)
    assert not hb.should_heartbeat(6999)
    assert hb.should_heartbeat(7000)


def test_failed_heartbeat_retries_after_backoff_not_interval():
    hb = timers(0)
    hb.sent_heartbeat(3000)
    hb.fail_heartbeat(3010)
    assert not hb.should_heartbeat(3109)
    assert hb.should_heartbeat(3110)


def test_session_expires_without_successful_heartbeat_and_resets_on_answer():
    hb = timers(0)
    hb.sent_heartbeat(3000)
    assert not hb.session_timeout_expired(9999)
    hb.received_heartbeat(9000)
    assert not hb.session_timeout_expired(18999)
    assert hb.session_timeout_expired(19000)
    hb.reset_session_timeout(19000)
    assert not hb.session_timeout_expired(28999)


def test_poll_timer_expires_after_max_poll_interval_and_poll_restarts_it():
    hb = timers(0)
    assert not hb.poll_timeout_expired(19999)
    assert hb.poll_timeout_expired(20000)
    hb.poll(20000)
    assert not hb.poll_timeout_expired(39999)
    assert hb.poll_time_remaining(30000) == 10000


def test_reset_timeouts_restarts_every_timer():
    hb = timers(0)
    hb.sent_heartbeat(5000)
    hb.reset_timeouts(50000)
    assert not hb.heartbeat_in_flight
    assert not hb.session_timeout_expired(59999) and hb.session_timeout_expired(60000)
    assert not hb.poll_timeout_expired(69999)
    assert hb.time_to_next_heartbeat(50000) == 3000


def test_heartbeat_interval_must_be_below_session_timeout():
    with pytest.raises(errors.KafkaConfigurationError, match="heartbeat_interval_ms"):
        Heartbeat(session_timeout_ms=3000, heartbeat_interval_ms=3000, max_poll_interval_ms=1000,
                  retry_backoff_ms=100, now_ms=0)


# --- membership state machine -------------------------------------------------------------------


def join_answer(code=NONE, generation=1, member="m-1", leader="m-1", protocol="range"):
    return JoinGroupResponse(error_code=code, generation_id=generation, member_id=member, leader=leader,
                             protocol_name=protocol)


def joined(member="m-1", leader="m-1", generation=1) -> GroupMembership:
    m = GroupMembership("g")
    m.on_join_sent()
    assert m.handle_join_response(join_answer(generation=generation, member=member, leader=leader)).ok
    return m


def stable(**kw) -> GroupMembership:
    m = joined(**kw)
    assert m.handle_sync_response(SyncGroupResponse(assignment=b""), m.generation).ok
    return m


def test_member_id_required_handshake_keeps_the_id_and_joins_again():
    m = GroupMembership("g")
    m.on_join_sent()
    verdict = m.handle_join_response(join_answer(MEMBER_ID_REQUIRED, generation=-1, member="m-given", leader=""))
    assert verdict.retry and not verdict.backoff and not verdict.fatal
    assert m.generation.member_id == "m-given" and m.generation.generation_id == -1
    assert m.state is MemberState.UNJOINED and m.rejoin_needed
    m.on_join_sent()
    assert m.handle_join_response(join_answer(generation=5, member="m-given", leader="other")).ok
    assert m.generation == Generation(5, "m-given", "range")
    assert m.state is MemberState.COMPLETING_REBALANCE and not m.is_leader


def test_join_success_makes_the_leader_and_sync_makes_it_stable():
    m = joined(member="a", leader="a", generation=7)
    assert m.is_leader and m.rejoin_needed  # still joining until SyncGroup answers
    assert m.generation_if_stable() is None
    assert m.handle_sync_response(SyncGroupResponse(assignment=b"x"), m.generation).ok
    assert m.state is MemberState.STABLE and not m.rejoin_needed
    assert m.generation_if_stable() == Generation(7, "a", "range")


def test_join_unknown_member_forgets_the_member_id():
    m = GroupMembership("g")
    m.generation = Generation(3, "stale", "range")
    m.on_join_sent()
    verdict = m.handle_join_response(join_answer(UNKNOWN_MEMBER_ID))
    assert verdict.retry and not verdict.backoff
    assert m.generation == NO_GENERATION


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE])
def test_join_coordinator_errors_rediscover_with_backoff(code):
    m = GroupMembership("g")
    m.on_join_sent()
    verdict = m.handle_join_response(join_answer(code))
    assert verdict.retry and verdict.backoff and verdict.coordinator_unknown


def test_join_load_in_progress_retries_after_backoff_on_the_same_coordinator():
    m = GroupMembership("g")
    m.on_join_sent()
    verdict = m.handle_join_response(join_answer(COORDINATOR_LOAD_IN_PROGRESS))
    assert verdict.retry and verdict.backoff and not verdict.coordinator_unknown


@pytest.mark.parametrize("code,cls", [(INCONSISTENT_GROUP_PROTOCOL, errors.InconsistentGroupProtocolError),
                                      (GROUP_AUTHORIZATION_FAILED, errors.GroupAuthorizationFailedError)])
def test_join_fatal_errors(code, cls):
    m = GroupMembership("g")
    m.on_join_sent()
    verdict = m.handle_join_response(join_answer(code))
    assert verdict.fatal and isinstance(verdict.error, cls)


def test_fenced_instance_is_fatal_with_a_clear_message():
    m = GroupMembership("g", group_instance_id="instance-1")
    m.on_join_sent()
    verdict = m.handle_join_response(join_answer(FENCED_INSTANCE_ID))
    assert verdict.fatal and isinstance(verdict.error, errors.FencedInstanceIdError)
    assert "instance-1" in str(verdict.error) and "group_instance_id" in str(verdict.error)


def test_join_answer_after_leaving_is_not_applied():
    m = GroupMembership("g")
    m.on_join_sent()
    m.on_leave("poll timeout")
    verdict = m.handle_join_response(join_answer())
    assert verdict.retry and m.generation == NO_GENERATION and m.state is MemberState.UNJOINED


def test_sync_rebalance_in_progress_rejoins_keeping_the_member_id():
    m = joined()
    verdict = m.handle_sync_response(SyncGroupResponse(error_code=REBALANCE_IN_PROGRESS), m.generation)
    assert verdict.retry and m.rejoin_needed and m.generation.member_id == "m-1"


@pytest.mark.parametrize("code", [UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION])
def test_sync_stale_membership_resets_generation(code):
    m = joined()
    verdict = m.handle_sync_response(SyncGroupResponse(error_code=code), m.generation)
    assert verdict.retry and m.generation == NO_GENERATION and m.rejoin_needed


def test_sync_answer_for_an_old_generation_is_not_applied():
    m = joined(generation=2)
    old = m.generation
    m.reset_generation("heartbeat said so")
    verdict = m.handle_sync_response(SyncGroupResponse(assignment=b""), old)
    assert verdict.retry and m.state is MemberState.UNJOINED


def test_heartbeat_rebalance_in_progress_requests_rejoin_only_when_stable():
    completing = joined()
    completing.rejoin_needed = False
    completing.handle_heartbeat_response(REBALANCE_IN_PROGRESS, completing.generation)
    assert not completing.rejoin_needed  # the SyncGroup answer decides
    m = stable()
    verdict = m.handle_heartbeat_response(REBALANCE_IN_PROGRESS, m.generation)
    assert verdict.retry and not verdict.fatal and m.rejoin_needed
    assert m.generation.member_id == "m-1"  # a rebalance keeps the member id


@pytest.mark.parametrize("code", [ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID])
def test_heartbeat_stale_generation_resets_only_the_generation_it_carried(code):
    m = stable(generation=4)
    old = Generation(3, "m-1", "range")
    m.handle_heartbeat_response(code, old)
    assert m.state is MemberState.STABLE and m.generation.generation_id == 4
    m.handle_heartbeat_response(code, m.generation)
    assert m.generation == NO_GENERATION and m.state is MemberState.UNJOINED and m.rejoin_needed


def test_heartbeat_coordinator_errors_and_fencing():
    m = stable()
    assert m.handle_heartbeat_response(NOT_COORDINATOR, m.generation).coordinator_unknown
    assert m.state is MemberState.STABLE
    static = GroupMembership("g", group_instance_id="i")
    static.on_join_sent()
    static.handle_join_response(join_answer())
    static.handle_sync_response(SyncGroupResponse(), static.generation)
    assert static.handle_heartbeat_response(FENCED_INSTANCE_ID, static.generation).fatal
    assert not static.handle_heartbeat_response(FENCED_INSTANCE_ID, Generation(0, "x", None)).fatal


def test_leave_resets_generation_and_needs_a_join():
    m = stable()
    m.on_leave("closing")
    assert m.generation == NO_GENERATION and m.state is MemberState.UNJOINED and m.rejoin_needed
