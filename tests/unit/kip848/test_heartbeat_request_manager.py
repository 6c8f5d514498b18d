"""ConsumerGroupHeartbeat and FindCoordinator request managers, sans-IO on a fake clock.

Requests are the generated ``kproto.messages`` objects (and are encoded, to be sure they
are valid for the wire); responses are built from ``kproto.messages`` and handed back the
way the network thread does, by completing the ``UnsentRequest``.
"""

from __future__ import annotations

import re

import pytest

from kproto.consumer.background.member_state import MemberState as S
from kproto.consumer.background.request_manager import RequestBuilder
from kproto.consumer.kip848.consumer_heartbeat_request_manager import (
    CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG,
    REGEX_RESOLUTION_NOT_SUPPORTED_MSG,
)
from kproto.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
)
from kproto.messages import FindCoordinatorRequest, FindCoordinatorResponse
from kproto.structs import TopicPartition as TP

from tests.support.heartbeats import TOPIC_IDS
from tests.unit.kip848.heartbeat_engine import BACKOFF_MS, Engine, MAX_POLL_INTERVAL_MS


def test_find_coordinator_builds_the_right_request_per_version() -> None:
    e = Engine()
    (unsent,) = e.coordinator.poll(e.clock()).unsent_requests
    assert isinstance(unsent.request, RequestBuilder)
    (old, v_old), (new, v_new) = unsent.request.build(3), unsent.request.build(6)
    assert (v_old, v_new) == (3, 6)
    assert (old.key, old.key_type) == ("group-1", 0)
    assert (new.coordinator_keys, new.key_type) == (["group-1"], 0)
    old.encode(3)
    new.encode(v_new)
    # Answered in the pre-v4 shape (top-level fields).
    unsent.complete(FindCoordinatorResponse(node_id=5, host="127.0.0.1", port=9093), e.clock())
    assert e.coordinator.coordinator == (5, "127.0.0.1", 9093, 5)
    assert e.coordinator.poll(e.clock()).unsent_requests == []


def test_find_coordinator_backs_off_after_a_retriable_error_and_surfaces_a_fatal_one() -> None:
    e = Engine()
    (unsent,) = e.coordinator.poll(e.clock()).unsent_requests
    assert e.coordinator.poll(e.clock()).unsent_requests == []  # one at a time
    unsent.complete(FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
        key="group-1", error_code=15)]), e.clock())
    assert e.coordinator.coordinator is None
    result = e.coordinator.poll(e.clock())
    assert result.unsent_requests == [] and result.time_until_next_poll_ms == BACKOFF_MS
    e.clock.advance(BACKOFF_MS)
    (unsent,) = e.coordinator.poll(e.clock()).unsent_requests
    unsent.complete(FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
        key="group-1", error_code=30)]), e.clock())
    e.h.join()
    assert e.heartbeats() == []  # no coordinator: no heartbeat, but the error surfaces
    (error,) = e.errors()
    assert isinstance(error, GroupAuthorizationFailedError)


def test_join_sends_full_state_then_only_changes() -> None:
    e = Engine("alpha", "beta", server_assignor="uniform", rack_id="rack-a", subscribe=("beta", "alpha"))
    e.find_coordinator(node_id=3)
    e.h.join()
    join = e.one_heartbeat()
    assert join.node_id == 3
    req = join.request
    assert (req.group_id, req.member_id, req.member_epoch) == ("group-1", e.h.manager.member_id, 0)
    assert req.subscribed_topic_names == ["alpha", "beta"]
    assert req.rebalance_timeout_ms == MAX_POLL_INTERVAL_MS
    assert (req.server_assignor, req.rack_id) == ("uniform", "rack-a")
    # v1: names and regex travel together, an empty regex meaning none.
    assert req.topic_partitions == [] and req.subscribed_topic_regex == ""
    assert e.heartbeats() == []  # one in flight

    e.answer(join, epoch=1, assignment={"alpha": [0, 1]}, interval_ms=5000)
    e.h.manager.maybe_reconcile(can_commit=True)
    e.h.run_application_callbacks()
    e.clock.advance(BACKOFF_MS)  # the floor between two heartbeats
    ack_sent = e.one_heartbeat()  # ACKNOWLEDGING: sent at once, not after the interval
    ack = ack_sent.request
    assert ack.member_epoch == 1
    assert [(tp.topic_id, tp.partitions) for tp in ack.topic_partitions] == [(TOPIC_IDS["alpha"], [0, 1])]
    assert (ack.subscribed_topic_names, ack.rebalance_timeout_ms, ack.server_assignor, ack.rack_id) == \
        (None, -1, None, None)
    assert e.h.manager.state is S.STABLE
    e.answer(ack_sent, epoch=1, interval_ms=5000)

    # STABLE: the next heartbeat waits for the broker's interval.
    e.clock.advance(4999)
    result = e.heartbeat.poll(e.clock())
    assert result.unsent_requests == [] and result.time_until_next_poll_ms == 1
    e.clock.advance(1)
    beat = e.one_heartbeat().request
    assert (beat.member_epoch, beat.subscribed_topic_names, beat.topic_partitions, beat.rebalance_timeout_ms) == \
        (1, None, None, -1)


def test_subscription_change_is_sent_alone_and_an_error_resends_everything() -> None:
    e = Engine("alpha")
    e.stable({"alpha": [0]}, interval_ms=1000)
    e.h.subscriptions.subscribe(["alpha", "gamma"], e.h.listener)
    e.clock.advance(1000)
    sent = e.one_heartbeat()
    assert sent.request.subscribed_topic_names == ["alpha", "gamma"]
    assert sent.request.topic_partitions is None and sent.request.rebalance_timeout_ms == -1
    e.answer(sent, error_code=14)  # COORDINATOR_LOAD_IN_PROGRESS: retried after backoff
    assert e.heartbeats() == []
    e.clock.advance(BACKOFF_MS)
    again = e.one_heartbeat().request
    assert again.subscribed_topic_names == ["alpha", "gamma"]
    assert again.rebalance_timeout_ms == MAX_POLL_INTERVAL_MS
    assert [(tp.topic_id, tp.partitions) for tp in again.topic_partitions] == [(TOPIC_IDS["alpha"], [0])]


def test_broker_evaluated_regex_is_sent_on_join_only() -> None:
    e = Engine(subscribe=())
    e.h.subscriptions.subscribe_pattern("al.*", e.h.listener, broker_evaluated=True)
    e.find_coordinator()
    e.h.join()
    join = e.one_heartbeat()
    assert join.request.subscribed_topic_regex == "al.*" and join.request.subscribed_topic_names == []
    e.answer(join, epoch=1, assignment={}, interval_ms=1000)
    e.h.manager.maybe_reconcile(can_commit=True)
    e.h.run_application_callbacks()
    e.clock.advance(BACKOFF_MS)
    ack = e.one_heartbeat().request
    assert ack.subscribed_topic_regex is None and ack.subscribed_topic_names is None


def test_version_zero_heartbeats_carry_no_regex() -> None:
    e = Engine("alpha")
    e.find_coordinator()
    e.h.join()
    (join,) = e.heartbeats(version=0)
    assert join.request.subscribed_topic_names == ["alpha", "beta", "gamma"]
    assert join.request.subscribed_topic_regex is None


def test_a_regex_on_a_version_zero_coordinator_fails_the_member_naming_the_regex() -> None:
    e = Engine(subscribe=())
    e.h.subscriptions.subscribe_pattern("al.*", e.h.listener, broker_evaluated=True)
    e.find_coordinator()
    e.h.join()
    (unsent,) = e.heartbeat.poll(e.clock()).unsent_requests
    with pytest.raises(UnsupportedVersionError) as built:
        unsent.request.build(0)  # what the network client does for a v0-only coordinator
    unsent.complete_exceptionally(built.value, e.clock())  # ... and how it reports the failure
    (error,) = e.errors()
    assert isinstance(error, UnsupportedVersionError)
    assert REGEX_RESOLUTION_NOT_SUPPORTED_MSG in str(error)
    assert CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG not in str(error)
    assert e.h.manager.state is S.FATAL


def test_an_unsupported_version_answer_about_the_regex_keeps_its_explanation() -> None:
    e = Engine(subscribe=())
    e.h.subscriptions.subscribe_pattern("al.*", e.h.listener, broker_evaluated=True)
    e.find_coordinator()
    e.h.join()
    e.answer(e.one_heartbeat(), error_code=35, error_message=REGEX_RESOLUTION_NOT_SUPPORTED_MSG)
    (error,) = e.errors()
    assert isinstance(error, UnsupportedVersionError)
    assert REGEX_RESOLUTION_NOT_SUPPORTED_MSG in str(error)
    assert e.h.manager.state is S.FATAL


@pytest.mark.parametrize("instance_id,leave_epoch", [(None, -1), ("static-1", -2)])
def test_poll_timer_expiry_sends_a_leave_heartbeat_and_the_next_poll_rejoins(instance_id, leave_epoch) -> None:
    e = Engine("alpha", instance_id=instance_id)
    e.stable({"alpha": [0]}, epoch=5, interval_ms=3000)
    e.h.log.clear()
    e.heartbeat.reset_poll_timer(e.clock())
    # Blocking is bounded by half the remaining poll timer (and by the next heartbeat).
    e.clock.advance(3000)
    e.answer(e.one_heartbeat(), epoch=5, interval_ms=MAX_POLL_INTERVAL_MS * 2)
    assert e.heartbeat.maximum_time_to_wait(e.clock()) == (MAX_POLL_INTERVAL_MS - 3000) // 2
    e.clock.advance(MAX_POLL_INTERVAL_MS - 3000)
    assert e.heartbeat.maximum_time_to_wait(e.clock()) == 0
    leave = e.one_heartbeat()
    assert leave.request.member_epoch == leave_epoch
    assert leave.request.instance_id == instance_id
    assert e.h.manager.state is S.STALE
    e.h.run_application_callbacks()
    assert e.h.log == [("lost", [TP("alpha", 0)])] and e.h.owned() == []
    assert e.heartbeats() == []  # stale: no heartbeats until the application polls
    e.answer(leave, epoch=leave_epoch)  # the leave's response is ignored
    assert e.h.manager.state is S.STALE

    e.clock.advance(BACKOFF_MS)
    e.heartbeat.reset_poll_timer(e.clock())  # the application's next poll()
    assert e.h.manager.state is S.JOINING
    rejoin = e.one_heartbeat().request
    assert rejoin.member_epoch == 0 and rejoin.subscribed_topic_names == ["alpha", "beta", "gamma"]
    assert rejoin.topic_partitions == [] and rejoin.rebalance_timeout_ms == MAX_POLL_INTERVAL_MS


@pytest.mark.parametrize("code", [16, 15])  # NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE
def test_coordinator_errors_rediscover_then_heartbeat_without_backoff(code: int) -> None:
    e = Engine("alpha")
    e.stable({"alpha": [0]}, interval_ms=1000)
    e.clock.advance(1000)
    e.answer(e.one_heartbeat(), error_code=code)
    assert e.coordinator.coordinator is None and e.heartbeats() == []
    e.find_coordinator(node_id=4)
    e.clock.advance(BACKOFF_MS)  # the floor only: no backoff, no interval
    sent = e.one_heartbeat()
    assert sent.node_id == 4 and sent.request.rebalance_timeout_ms == MAX_POLL_INTERVAL_MS
    assert e.h.manager.state is S.STABLE and e.errors() == []


@pytest.mark.parametrize("code", [25, 110])  # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH
def test_fencing_errors_lose_partitions_and_rejoin_with_epoch_zero(code: int) -> None:
    e = Engine("alpha")
    e.stable({"alpha": [0, 1]}, epoch=3, interval_ms=1000)
    e.h.log.clear()
    e.clock.advance(1000)
    e.answer(e.one_heartbeat(), error_code=code)
    assert e.h.manager.state is S.FENCED and e.heartbeats() == []
    e.h.run_application_callbacks()
    assert e.h.log == [("lost", [TP("alpha", 0), TP("alpha", 1)])]
    e.clock.advance(BACKOFF_MS)  # the floor only: no backoff, no interval
    rejoin = e.one_heartbeat().request
    assert rejoin.member_epoch == 0 and rejoin.topic_partitions == []
    assert rejoin.member_id == e.h.manager.member_id
    assert e.errors() == []


@pytest.mark.parametrize("code,name", [(30, "GROUP_AUTHORIZATION_FAILED"), (35, "UNSUPPORTED_VERSION"),
                                       (42, "INVALID_REQUEST"), (81, "GROUP_MAX_SIZE_REACHED"),
                                       (111, "UNRELEASED_INSTANCE_ID"), (112, "UNSUPPORTED_ASSIGNOR"),
                                       (128, "INVALID_REGULAR_EXPRESSION"), (58, "SASL_AUTHENTICATION_FAILED")])
def test_fatal_errors_are_surfaced_and_stop_heartbeats(code: int, name: str) -> None:
    e = Engine("alpha")
    e.stable({"alpha": [0]}, interval_ms=1000)
    e.h.log.clear()
    e.clock.advance(1000)
    e.answer(e.one_heartbeat(), error_code=code, error_message="broker says no")
    assert e.h.manager.state is S.FATAL
    (error,) = e.errors()
    assert error.errno == code and error.message == name
    if code == 35:
        assert CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG in str(error)
    e.clock.advance(10_000)
    assert e.heartbeats() == []


def test_topic_authorization_failure_is_surfaced_but_the_member_stays() -> None:
    e = Engine("alpha")
    e.stable({"alpha": [0]}, interval_ms=1000)
    e.clock.advance(1000)
    e.answer(e.one_heartbeat(), error_code=29)
    (error,) = e.errors()
    assert isinstance(error, TopicAuthorizationFailedError)
    assert e.h.manager.state is S.STABLE


def test_disconnect_marks_the_coordinator_unknown_and_backs_off() -> None:
    e = Engine("alpha")
    e.stable({"alpha": [0]}, interval_ms=1000)
    e.clock.advance(1000)
    e.one_heartbeat().complete_exceptionally(KafkaConnectionError("connection reset"), e.clock())
    assert e.coordinator.coordinator is None
    e.find_coordinator()
    assert e.heartbeats() == []  # backoff after the failure
    e.clock.advance(BACKOFF_MS)
    assert e.one_heartbeat().request.rebalance_timeout_ms == MAX_POLL_INTERVAL_MS  # full state again


def test_a_broker_without_the_api_fails_the_member_with_a_clear_error() -> None:
    e = Engine("alpha")
    e.find_coordinator()
    e.h.join()
    e.one_heartbeat().complete_exceptionally(UnsupportedVersionError("ConsumerGroupHeartbeat"), e.clock())
    (error,) = e.errors()
    assert isinstance(error, UnsupportedVersionError)
    assert re.search("group_protocol='classic'", str(error))
    assert e.h.manager.state is S.FATAL


def test_leave_group_heartbeat_is_sent_at_once() -> None:
    e = Engine("alpha")
    e.stable({"alpha": [0]}, epoch=2, interval_ms=10_000)
    done = e.h.manager.leave_group()
    e.h.run_application_callbacks()
    e.clock.advance(BACKOFF_MS)  # the floor since the last heartbeat
    leave = e.one_heartbeat()  # well before the interval
    assert leave.request.member_epoch == -1 and done.done()
    assert (leave.request.subscribed_topic_names, leave.request.topic_partitions) == (None, None)
    assert e.h.manager.state is S.UNSUBSCRIBED and e.heartbeats() == []


def test_the_answer_to_a_leave_is_not_taken_for_a_rejoin_sent_after_it() -> None:
    e = Engine("alpha")
    e.stable({"alpha": [0]}, epoch=2, interval_ms=10_000)
    member_id = e.h.manager.member_id
    e.h.manager.leave_group()
    e.h.run_application_callbacks()
    e.clock.advance(BACKOFF_MS)  # the floor since the last heartbeat
    leave = e.one_heartbeat()
    assert leave.request.member_epoch == -1
    # unsubscribe() returned once the leave went out; subscribe() again at once.
    e.h.subscriptions.subscribe(["alpha"], e.h.listener)
    e.h.join()
    assert e.h.manager.state is S.JOINING and e.heartbeats() == []  # the leave is in flight
    e.answer(leave, epoch=-1)
    assert (e.h.manager.state, e.h.manager.member_epoch) == (S.JOINING, 0)
    assert e.heartbeats() == []  # the floor since the leave
    e.clock.advance(BACKOFF_MS)
    rejoin = e.one_heartbeat()
    assert (rejoin.request.member_epoch, rejoin.request.member_id) == (0, member_id)
    e.answer(rejoin, epoch=3, assignment={"alpha": [0]})
    assert e.h.manager.member_epoch == 3 and e.h.manager.state is S.RECONCILING


def test_no_busy_wait_while_a_heartbeat_is_in_flight() -> None:
    e = Engine("alpha")
    e.find_coordinator()
    e.h.join()
    e.one_heartbeat()  # the join, unanswered
    e.clock.advance(5000)
    result = e.heartbeat.poll(e.clock())
    assert result.unsent_requests == [] and result.time_until_next_poll_ms >= BACKOFF_MS
