"""The abstract group managers in the shell work without the consumer group's half: a
share-group-shaped member and heartbeat (no listener, no auto-commit, its own request)
join, reconcile, acknowledge, get fenced and leave, sans-IO on a fake clock."""

from __future__ import annotations

import queue

from kproto.consumer.background.abstract_heartbeat_request_manager import AbstractHeartbeatRequestManager
from kproto.consumer.background.abstract_membership_manager import (LEAVE_GROUP_MEMBER_EPOCH,
                                                                    AbstractMembershipManager)
from kproto.consumer.background.coordinator_request_manager import CoordinatorRequestManager
from kproto.consumer.background.events import BackgroundEventHandler, drain
from kproto.consumer.background.member_state import MemberState as S
from kproto.consumer.subscription_state import SubscriptionState
from kproto.errors import ErrorCode, GroupAuthorizationFailedError
from kproto.messages import FindCoordinatorResponse
from kproto.structs import TopicPartition as TP

from tests.support.clock import FakeClock
from tests.support.heartbeats import TOPIC_IDS, heartbeat_response


class ShapedHeartbeat(AbstractHeartbeatRequestManager):
    """What a ShareHeartbeatRequestManager supplies: the request (a stand-in here)."""

    heartbeat_api = "ShareGroupHeartbeat"

    def build_heartbeat_request(self):
        return ("heartbeat", self.membership_manager.member_id, self.membership_manager.member_epoch)


def _group(clock):
    subscriptions = SubscriptionState()
    subscriptions.subscribe(["alpha"], None)
    member = AbstractMembershipManager("share-group", subscriptions, time_ms=clock,
                                       topic_name_for_id={TOPIC_IDS["alpha"]: "alpha"}.get)
    coordinator = CoordinatorRequestManager("share-group", 100, 1000, jitter=0)
    (find,) = coordinator.poll(clock()).unsent_requests
    find.complete(FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
        key="share-group", node_id=1, host="127.0.0.1", port=9092)]), clock())
    errors: queue.Queue = queue.Queue()
    heartbeat = ShapedHeartbeat(clock(), coordinator, member, BackgroundEventHandler(errors),
                                retry_backoff_ms=100, jitter=0)
    return subscriptions, member, heartbeat, errors


def _send(heartbeat, clock):
    (unsent,) = heartbeat.poll(clock()).unsent_requests
    return unsent


def test_the_abstract_member_joins_reconciles_and_is_fenced_without_a_group_types_hooks():
    clock = FakeClock()
    subscriptions, member, heartbeat, _ = _group(clock)
    member.on_subscription_updated()
    member.on_consumer_poll()
    assert member.state is S.JOINING
    join = _send(heartbeat, clock)
    assert join.request == ("heartbeat", member.member_id, 0)
    join.complete(heartbeat_response(member.member_id, epoch=1, assignment={"alpha": [0, 1]}), clock())
    assert member.state is S.RECONCILING
    member.maybe_reconcile(can_commit=False)  # adds only, nothing to commit: no poll() needed
    assert member.state is S.ACKNOWLEDGING
    assert subscriptions.assigned_partitions() == {TP("alpha", 0), TP("alpha", 1)}
    clock.advance(100)  # retry_backoff_ms: the least time between two heartbeats
    _send(heartbeat, clock).complete(heartbeat_response(member.member_id, epoch=1), clock())
    assert member.state is S.STABLE

    clock.advance(3000)
    _send(heartbeat, clock).complete(
        heartbeat_response(member.member_id, error_code=ErrorCode.FENCED_MEMBER_EPOCH), clock())
    assert member.state is S.JOINING and subscriptions.assigned_partitions() == set()
    clock.advance(100)
    assert _send(heartbeat, clock).request == ("heartbeat", member.member_id, 0)


def test_the_abstract_member_leaves_with_the_leave_epoch_and_fatal_errors_surface():
    clock = FakeClock()
    _, member, heartbeat, errors = _group(clock)
    member.on_subscription_updated()
    member.on_consumer_poll()
    _send(heartbeat, clock).complete(heartbeat_response(member.member_id, epoch=1, assignment={"alpha": [0]}),
                                     clock())
    member.maybe_reconcile(can_commit=True)
    clock.advance(100)
    _send(heartbeat, clock)  # the acknowledgement
    assert member.state is S.STABLE
    left = member.leave_group()
    assert member.state is S.LEAVING
    clock.advance(100)
    leave = _send(heartbeat, clock)
    assert leave.request == ("heartbeat", member.member_id, LEAVE_GROUP_MEMBER_EPOCH)
    assert member.state is S.UNSUBSCRIBED and left.done()
    leave.complete(heartbeat_response(member.member_id, epoch=LEAVE_GROUP_MEMBER_EPOCH), clock())

    member.on_subscription_updated()
    member.on_consumer_poll()
    clock.advance(3000)
    _send(heartbeat, clock).complete(
        heartbeat_response(member.member_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED), clock())
    assert member.state is S.FATAL
    assert [type(e.error) for e in drain(errors)] == [GroupAuthorizationFailedError]


class EagerMember(AbstractMembershipManager):
    """A group type whose member asks for a heartbeat "now" in every state."""

    def should_heartbeat_now(self) -> bool:
        return True


def test_heartbeats_are_never_less_than_retry_backoff_apart_whatever_the_member_asks():
    clock = FakeClock()
    subscriptions = SubscriptionState()
    subscriptions.subscribe(["alpha"], None)
    member = EagerMember("share-group", subscriptions, time_ms=clock,
                         topic_name_for_id={TOPIC_IDS["alpha"]: "alpha"}.get)
    _, _, heartbeat, _ = _group(clock)
    heartbeat.membership_manager = member
    member.on_subscription_updated()
    member.on_consumer_poll()
    sent_at = []
    for _ in range(1000):  # a busy loop; every heartbeat answered at once, changing nothing
        for unsent in heartbeat.poll(clock()).unsent_requests:
            sent_at.append(clock())
            unsent.complete(heartbeat_response(member.member_id, epoch=0), clock())
            # What resets the interval and the backoff (a coordinator error) does not lift the floor.
            heartbeat.heartbeat_request_state.reset()
        spacing_ms = heartbeat.heartbeat_request_state.remaining_spacing_ms(clock())
        assert heartbeat.maximum_time_to_wait(clock()) == spacing_ms
        clock.advance(1)
    assert len(sent_at) == 10
    assert [b - a for a, b in zip(sent_at, sent_at[1:])] == [100] * 9
