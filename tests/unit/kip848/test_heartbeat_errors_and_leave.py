"""KIP-848 Java-parity review: the heartbeat request manager, sans-IO on a fake clock."""

from __future__ import annotations

from kproto.consumer.background.member_state import MemberState as S
from kproto.consumer.background.request_manager import RequestBuilder
from kproto.errors import TopicAuthorizationFailedError
from kproto.messages import ConsumerGroupHeartbeatRequest

from tests.unit.kip848.heartbeat_engine import BACKOFF_MS, Engine


def test_topic_authorization_error_backs_off_then_heartbeats_with_full_state() -> None:
    """Java onErrorResponse: onFailedAttempt for every error, then a full heartbeat."""
    e = Engine("alpha")
    e.stable({"alpha": [0]}, interval_ms=10_000)
    e.clock.advance(10_000)
    e.answer(e.one_heartbeat(), error_code=29)
    (error,) = e.errors()
    assert isinstance(error, TopicAuthorizationFailedError) and e.h.manager.state is S.STABLE
    assert e.heartbeats() == []  # the backoff
    e.clock.advance(BACKOFF_MS)
    again = e.one_heartbeat().request  # well before the 10 s interval
    assert again.subscribed_topic_names == ["alpha", "beta", "gamma"] and again.member_epoch == 1


def test_close_while_preparing_to_leave_sends_the_leave_heartbeat() -> None:
    """Java pollOnClose: a member closed while still leaving sends the leave heartbeat."""
    e = Engine("alpha")
    e.stable({"alpha": [0]}, epoch=2, interval_ms=10_000)
    done = e.h.manager.leave_group()  # on_partitions_revoked never runs: the consumer closes
    assert e.h.manager.state is S.PREPARE_LEAVING
    (unsent,) = e.heartbeat.poll_on_close(e.clock()).unsent_requests
    assert isinstance(unsent.request, RequestBuilder)
    leave, _ = unsent.request.build(ConsumerGroupHeartbeatRequest.max_version)
    assert leave.member_epoch == -1 and done.done() and e.h.manager.state is S.UNSUBSCRIBED
    assert e.heartbeat.poll_on_close(e.clock()).unsent_requests == []
