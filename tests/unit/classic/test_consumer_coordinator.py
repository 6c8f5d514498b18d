"""ConsumerCoordinator's protocol logic without a broker: JoinGroup metadata, the leader's
assignment, applying assignments (eager, cooperative, lost), the rebalance listener,
rejoin triggers, and the lenient reading of the mock cluster's error answers."""

from __future__ import annotations

import struct

import pytest

from kproto import errors
from kproto.consumer.classic.group_requests import LenientJoinGroupResponse as _JoinGroupResponse
from kproto.consumer.classic.group_requests import LenientSyncGroupResponse as _SyncGroupResponse
from kproto.consumer.classic.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kproto.consumer.classic.group_membership import NO_GENERATION, Generation, MemberState
from kproto.messages import JoinGroupResponse
from kproto.structs import OffsetAndMetadata, TopicPartition
from tests.support.coordinator_fixture import make, metadata


def tp(topic, p):
    return TopicPartition(topic, p)


def test_join_metadata_is_one_protocol_per_assignor_with_owned_partitions_generation_and_rack(make):
    coordinator, subs, _ = make(topics=("b", "a"))
    coordinator.membership.generation = Generation(7, "m", "range")
    subs.assign_from_subscribed([tp("a", 1), tp("b", 0)])
    protocols = coordinator.metadata()
    assert [name for name, _ in protocols] == ["range", "roundrobin"]
    sub = decode_subscription(protocols[0][1])
    assert sub.topics == ["a", "b"]
    assert sorted(sub.owned_partitions) == [tp("a", 1), tp("b", 0)]
    assert sub.generation_id == 7 and sub.rack_id == "rack-a"
    assert coordinator.protocol_type() == "consumer"


def test_leader_assigns_every_member_with_the_chosen_assignor(make):
    coordinator, _, _ = make(topics=("t",), partitions={"t": 4, "u": 2})
    members = [JoinGroupResponse.JoinGroupResponseMember(member_id=m, metadata=encode_subscription(Subscription(t)))
               for m, t in (("m1", ["t"]), ("m2", ["t", "u"]))]
    result = coordinator.perform_assignment("m1", "range", members, False)
    got = {m: sorted(decode_assignment(data).partitions()) for m, data in result.items()}
    assert got == {"m1": [tp("t", 0), tp("t", 1)], "m2": [tp("t", 2), tp("t", 3), tp("u", 0), tp("u", 1)]}
    # The leader now tracks every member's topics; a partition-count change means rejoin.
    assert coordinator._assignment_snapshot == {"t": 4, "u": 2}
    coordinator.membership.rejoin_needed = False
    coordinator._joined_subscription = frozenset({"t"})
    assert not coordinator.rejoin_needed_or_pending()
    coordinator._cluster.update(metadata({"t": 4, "u": 3}), 1)
    assert coordinator.rejoin_needed_or_pending()


def test_an_unknown_protocol_from_the_group_is_a_clear_error(make):
    coordinator, _, _ = make()
    with pytest.raises(errors.IllegalStateError, match="sticky"):
        coordinator.perform_assignment("m1", "sticky", [], False)


def test_eager_join_prepare_revokes_everything_and_join_complete_assigns(make):
    coordinator, subs, listener = make()
    owned = [tp("t", 0), tp("t", 1)]
    subs.assign_from_subscribed(owned)
    coordinator.on_join_prepare(Generation(3, "m", "range"))
    assert listener.calls == [("revoked", set(owned))] and subs.assigned_partitions() == set()
    coordinator.on_join_complete(Generation(4, "m", "range"), encode_assignment(Assignment([tp("t", 2)])))
    assert listener.calls[-1] == ("assigned", {tp("t", 2)})
    assert subs.assigned_partitions() == {tp("t", 2)}


def test_lost_generation_reports_partitions_lost_not_revoked(make):
    coordinator, subs, listener = make()
    subs.assign_from_subscribed([tp("t", 0)])
    coordinator.on_join_prepare(NO_GENERATION)
    assert listener.calls == [("lost", {tp("t", 0)})]


def test_cooperative_revokes_only_moved_partitions_and_rejoins(make):
    coordinator, subs, listener = make(strategy="cooperative-sticky")
    subs.assign_from_subscribed([tp("t", 0), tp("t", 1), tp("t", 2)])
    coordinator.on_join_prepare(Generation(3, "m", "cooperative-sticky"))
    assert listener.calls == []  # nothing revoked before the join
    coordinator.membership.state = MemberState.STABLE
    coordinator.membership.rejoin_needed = False
    coordinator.on_join_complete(Generation(4, "m", "cooperative-sticky"),
                                 encode_assignment(Assignment([tp("t", 0), tp("t", 1), tp("t", 3)])))
    assert listener.calls == [("revoked", {tp("t", 2)}), ("assigned", {tp("t", 3)})]
    assert subs.assigned_partitions() == {tp("t", 0), tp("t", 1), tp("t", 3)}
    assert coordinator.membership.rejoin_needed  # the second round hands t-2 over


def test_listener_failure_is_raised_after_the_assignment_is_applied(make):
    coordinator, subs, listener = make()

    def boom(partitions):
        raise ValueError("app bug")

    listener.on_partitions_assigned = boom
    with pytest.raises(errors.KafkaError, match="app bug"):
        coordinator.on_join_complete(Generation(1, "m", "range"), encode_assignment(Assignment([tp("t", 1)])))
    assert subs.assigned_partitions() == {tp("t", 1)}


def test_assignment_outside_the_subscription_asks_for_a_rejoin(make):
    coordinator, subs, listener = make()
    coordinator.membership.rejoin_needed = False
    coordinator.on_join_complete(Generation(1, "m", "range"), encode_assignment(Assignment([tp("other", 0)])))
    assert coordinator.membership.rejoin_needed and subs.assigned_partitions() == set() and listener.calls == []


def test_subscription_change_asks_for_a_rejoin(make):
    coordinator, subs, _ = make()
    coordinator.metadata()  # joined with ["t"]
    coordinator.membership.rejoin_needed = False
    assert not coordinator.rejoin_needed_or_pending()
    subs.subscribe(["t", "u"])
    assert coordinator.rejoin_needed_or_pending()


def test_commits_during_a_rebalance_fail_with_rebalance_in_progress(make):
    coordinator, subs, _ = make()
    subs.assign_from_subscribed([tp("t", 0)])
    with pytest.raises(errors.RebalanceInProgressError):
        coordinator.commit_offsets_sync({tp("t", 0): OffsetAndMetadata(1, "", -1)}, 100)
    results = []
    coordinator.commit_offsets_async({tp("t", 0): OffsetAndMetadata(1, "", -1)},
                                     lambda offsets, result: results.append(result))
    assert isinstance(results[0], errors.RebalanceInProgressError)


# --- the mock cluster's error answers -------------------------------------------------------


def test_sync_group_error_answer_with_null_assignment_is_read():
    answer = _SyncGroupResponse.decode(struct.pack(">ihi", 0, 27, -1), 3)
    assert answer.error_code == 27 and answer.assignment == b""
    # A success with a null assignment stays corrupt, as does anything else malformed.
    with pytest.raises(errors.CorruptMessageError):
        _SyncGroupResponse.decode(struct.pack(">ihi", 0, 0, -1), 3)
    with pytest.raises(errors.CorruptMessageError):
        _SyncGroupResponse.decode(b"\x00\x00", 3)


def test_join_group_error_answer_with_null_strings_is_read():
    body = struct.pack(">ihihhhi", 0, 82, -1, -1, -1, -1, 0)
    answer = _JoinGroupResponse.decode(body, 5)
    assert answer.error_code == 82 and answer.member_id == "" and answer.members == []
    with pytest.raises(errors.CorruptMessageError):
        _JoinGroupResponse.decode(struct.pack(">ihihhhi", 0, 0, 1, -1, -1, -1, 0), 5)
    with pytest.raises(errors.CorruptMessageError):
        _JoinGroupResponse.decode(struct.pack(">ihi", 0, 82, -1), 5)


def test_wakeup_check_interrupts_a_blocking_coordinator_wait(make):
    coordinator, _, _ = make()
    calls = []

    def check():
        calls.append(1)
        raise errors.WakeupException()

    coordinator.check_wakeup = check
    with pytest.raises(errors.WakeupException):
        coordinator.ensure_coordinator_ready(60000)  # nothing listens on 127.0.0.1:9
    assert calls == [1]


def test_group_request_versions_are_capped_but_follow_a_broker_that_dropped_old_ones():
    from kproto.consumer.classic.group_requests import choose_version
    from kproto.messages import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest

    assert choose_version(JoinGroupRequest, (0, 9)) == 5
    assert choose_version(JoinGroupRequest, (0, 4)) == 4
    assert choose_version(LeaveGroupRequest, (3, 5)) == 3  # a broker without v0-2
    assert choose_version(HeartbeatRequest, (0, 4)) == 4
    with pytest.raises(errors.UnsupportedVersionError):
        choose_version(JoinGroupRequest, (10, 12))


@pytest.mark.parametrize("version", range(0, 6))
def test_leave_group_and_heartbeat_requests_encode_at_every_version(version):
    from kproto.consumer.classic.group_requests import build_heartbeat, build_join_group, build_leave_group, build_sync_group

    build_leave_group(version, "g", "m", "closing").encode(version)
    if version <= 4:
        build_heartbeat(version, "g", 3, "m", "i" if version >= 3 else None).encode(version)
    build_sync_group(version, "g", 3, "m", None, "consumer", "range", {"m": b"x"}).encode(version)
    build_join_group(version, "g", "m", "i" if version >= 5 else None, 6000, 30000, "consumer",
                     [("range", b"x")], "why").encode(version)


@pytest.mark.parametrize("version", range(6, 10))
def test_join_group_encodes_at_the_flexible_versions(version):
    from kproto.consumer.classic.group_requests import build_join_group
    from kproto.messages import JoinGroupRequest

    data = build_join_group(version, "g", "m", "i", 6000, 30000, "consumer", [("range", b"x")], "why").encode(version)
    decoded = JoinGroupRequest.decode(data, version)
    assert decoded.group_instance_id == "i" and decoded.protocols[0].name == "range"
    assert decoded.reason == ("why" if version >= 8 else None)
