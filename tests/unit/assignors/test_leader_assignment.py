"""The coordinator-facing glue: JoinGroup protocol metadata per assignor and the leader's
SyncGroup assignments, with Java's check that a cooperative assignor never hands over a
partition its owner has not revoked yet."""

from __future__ import annotations

import pytest

from kproto.consumer.classic.assignors import (
    ClusterView,
    CooperativeStickyAssignor,
    RebalanceProtocol,
    group_protocols,
    perform_assignment,
    resolve_assignors,
)
from kproto.consumer.classic.assignors.abstract import JavaStyleAssignor
from kproto.consumer.classic.consumer_protocol import (
    Assignment,
    decode_assignment,
    decode_cooperative_user_data,
    decode_subscription,
)
from kproto.errors import IllegalStateError
from kproto.messages import JoinGroupResponse
from tests.unit.assignors.java_fixtures import tp

Member = JoinGroupResponse.JoinGroupResponseMember


def test_group_protocols_are_v3_with_owned_generation_and_rack():
    assignors = resolve_assignors("cooperative-sticky,range")
    assignors[0].on_assignment(Assignment([tp("b", 0)]), 4)
    protocols = group_protocols(assignors, {"b", "a"}, [tp("b", 0)], 4, "rack-1")
    assert [name for name, _ in protocols] == ["cooperative-sticky", "range"]
    for name, data in protocols:
        assert data[:2] == b"\x00\x03"
        sub = decode_subscription(data)
        assert (sub.topics, sub.owned_partitions, sub.generation_id, sub.rack_id) == (
            ["a", "b"], [tp("b", 0)], 4, "rack-1")
    assert decode_cooperative_user_data(decode_subscription(protocols[0][1]).user_data) == 4
    assert decode_subscription(protocols[1][1]).user_data is None
    # not in a group yet, no rack
    sub = decode_subscription(group_protocols(assignors[1:], ["a"])[0][1])
    assert (sub.owned_partitions, sub.generation_id, sub.rack_id) == ([], -1, None)


def test_group_protocols_accept_kafka_python_assignors():
    from kafka.coordinator.assignors.range import RangePartitionAssignor as KPRange

    class OwnRange(KPRange):  # an application's own: its metadata() returns kafka-python's object
        pass

    ((name, data),) = group_protocols(resolve_assignors([OwnRange]), ["t"], [], 2, None)
    assert name == "range" and decode_subscription(data).topics == ["t"]


def _join_members(assignors_topics_owned):
    members = []
    for member_id, instance, topics, owned, generation in assignors_topics_owned:
        ((_, data),) = group_protocols([CooperativeStickyAssignor()], topics, owned, generation)
        members.append(Member(member_id=member_id, group_instance_id=instance, metadata=data))
    return members


def test_perform_assignment_decodes_members_and_encodes_results():
    members = _join_members([("m1", "static-a", ["t"], [tp("t", 0), tp("t", 1), tp("t", 2)], 3),
                             ("m2", None, ["t"], [], 3)])
    out = perform_assignment(CooperativeStickyAssignor(), ClusterView({"t": 4}), members,
                             RebalanceProtocol.COOPERATIVE)
    got = {m: sorted(decode_assignment(b).partitions()) for m, b in out.items()}
    # m1 keeps two of its three, the third waits a round; m2 gets the free one now
    assert got == {"m1": [tp("t", 0), tp("t", 1)], "m2": [tp("t", 3)]}


def test_cooperative_requirement_is_enforced():
    class Greedy(JavaStyleAssignor):
        name = "greedy"

        def supported_protocols(self):
            return [RebalanceProtocol.COOPERATIVE]

        def assign_partitions(self, ppt, subs):
            last = sorted(subs)[-1]  # everything to the last member, at once
            return {m: ([tp(t, i.partition) for t, infos in ppt.items() for i in infos] if m == last else [])
                    for m in subs}

    members = _join_members([("m1", None, ["t"], [tp("t", 0)], 1), ("m2", None, ["t"], [], 1)])
    with pytest.raises(IllegalStateError):
        perform_assignment(Greedy(), ClusterView({"t": 2}), members, RebalanceProtocol.COOPERATIVE)
    # the same is fine under the eager protocol (the owner revoked everything before joining)
    out = perform_assignment(Greedy(), ClusterView({"t": 2}), members, RebalanceProtocol.EAGER)
    assert decode_assignment(out["m2"]).partitions() == [tp("t", 0), tp("t", 1)]
