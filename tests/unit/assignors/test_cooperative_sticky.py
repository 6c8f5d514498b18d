"""cooperative-sticky (KIP-429): a partition changing owner is left out of the first
assignment (its owner revokes it), and the follow-up rebalance hands it over; the generation
in user data for members sending v0/v1 subscriptions."""

from __future__ import annotations

from typing import Dict, List

from kproto.consumer.classic.assignors import ClusterView, CooperativeStickyAssignor, GroupMember
from kproto.consumer.classic.consumer_protocol import (
    Assignment,
    Subscription,
    decode_subscription,
    encode_cooperative_user_data,
    encode_subscription,
)
from kproto.structs import TopicPartition
from tests.unit.assignors.java_fixtures import is_fully_balanced, tp, verify_validity_and_balance


def rebalance_until_stable(assignor, cluster, topics_by_member: Dict[str, List[str]],
                           owned: Dict[str, List[TopicPartition]], generation: int):
    """Drive rebalances the way members do: each round every member reports what it owns;
    check no partition is given to one member while another still owns it. Returns the
    final assignment and the number of rounds it took."""
    for rounds in range(1, 5):
        members = [GroupMember(m, None, Subscription(topics, None, owned.get(m, []), generation))
                   for m, topics in topics_by_member.items()]
        result = {m: a.partitions() for m, a in assignor.assign(cluster, members).items()}
        revoked, added = set(), set()
        for m, parts in result.items():
            mine = set(owned.get(m, []))
            revoked |= mine - set(parts)
            added |= set(parts) - mine
        assert not added & revoked, "assigned while still owned elsewhere: {}".format(added & revoked)
        # what was kept was never revoked
        for m, parts in result.items():
            assert set(owned.get(m, [])) & set(parts) == set(owned.get(m, [])) - revoked
        owned = result
        generation += 1
        if not revoked:
            return result, rounds
    raise AssertionError("no stable assignment after 4 rebalances")


def test_member_joining_takes_partitions_in_a_second_round():
    a = CooperativeStickyAssignor()
    cluster = ClusterView({"t": 6})
    first, rounds = rebalance_until_stable(a, cluster, {"c1": ["t"], "c2": ["t"]}, {}, -1)
    assert rounds == 1 and sorted(len(v) for v in first.values()) == [3, 3]
    # c3 joins: round 1 revokes from c1/c2 without giving anything to c3; round 2 gives it
    members = [GroupMember(m, None, Subscription(["t"], None, first.get(m, []), 1)) for m in ("c1", "c2", "c3")]
    round1 = {m: x.partitions() for m, x in a.assign(cluster, members).items()}
    assert round1["c3"] == []
    assert set(round1["c1"]) < set(first["c1"]) and set(round1["c2"]) < set(first["c2"])
    final, rounds = rebalance_until_stable(a, cluster, {m: ["t"] for m in ("c1", "c2", "c3")}, first, 1)
    assert rounds == 2 and sorted(len(v) for v in final.values()) == [2, 2, 2]
    assert set(final["c1"]) <= set(first["c1"]) and set(final["c2"]) <= set(first["c2"])


def test_java_scenario_add_consumer_one_topic():
    # AbstractStickyAssignorTest.testAddRemoveConsumerOneTopic, as the cooperative assignor
    # returns it: topic-2 moves to consumer2, so round 1 leaves it out.
    a = CooperativeStickyAssignor()
    cluster = ClusterView({"topic": 3})
    members = [GroupMember("consumer1", None, Subscription(["topic"], None, [tp("topic", i) for i in range(3)], 1)),
               GroupMember("consumer2", None, Subscription(["topic"], None, [], 1))]
    out = {m: x.partitions() for m, x in a.assign(cluster, members).items()}
    assert out == {"consumer1": [tp("topic", 0), tp("topic", 1)], "consumer2": []}
    assert a.partitions_transferring_ownership == {tp("topic", 2): "consumer2"}


def test_general_case_computes_the_moving_partitions_itself():
    # Different subscriptions: the general algorithm does not track moves, the cooperative
    # assignor derives them from owned vs assigned.
    a = CooperativeStickyAssignor()
    cluster = ClusterView({"t1": 4, "t2": 2})
    topics = {"c1": ["t1", "t2"], "c2": ["t1"], "c3": ["t1", "t2"]}
    owned = {"c1": [tp("t1", i) for i in range(4)] + [tp("t2", 0), tp("t2", 1)], "c2": [], "c3": []}
    final, rounds = rebalance_until_stable(a, cluster, topics, owned, 3)
    assert rounds == 2
    verify_validity_and_balance({m: Subscription(t) for m, t in topics.items()}, final)
    assert a.partitions_transferring_ownership is None


def test_doubly_claimed_partition_goes_to_nobody_first():
    a = CooperativeStickyAssignor()
    cluster = ClusterView({"topic": 3})
    members = [GroupMember("consumer1", None, Subscription(["topic"], None, [tp("topic", 0), tp("topic", 1)], 1)),
               GroupMember("consumer2", None, Subscription(["topic"], None, [tp("topic", 0), tp("topic", 2)], 1)),
               GroupMember("consumer3", None, Subscription(["topic"], None, [], 1))]
    out = {m: x.partitions() for m, x in a.assign(cluster, members).items()}
    assert out == {"consumer1": [tp("topic", 1)], "consumer2": [tp("topic", 2)], "consumer3": []}


def test_generation_from_user_data_for_old_subscription_versions():
    a = CooperativeStickyAssignor()
    a.on_assignment(Assignment([tp("t", 0)]), 5)
    sent = a.metadata({"t"})
    assert sent.user_data == encode_cooperative_user_data(5)
    # a v1 member: owned partitions on the wire, generation only in the user data
    v1 = decode_subscription(encode_subscription(
        Subscription(["t"], sent.user_data, [tp("t", 0)], 5), 1))
    assert v1.generation_id == -1
    data = a.member_data(v1)
    assert (data.partitions, data.generation) == ([tp("t", 0)], 5)
    # v2+: the field wins
    v2 = decode_subscription(encode_subscription(Subscription(["t"], sent.user_data, [tp("t", 0)], 6), 2))
    assert a.member_data(v2).generation == 6
    # v0 member without user data: owns nothing, no generation
    v0 = decode_subscription(encode_subscription(Subscription(["t"]), 0))
    assert (a.member_data(v0).partitions, a.member_data(v0).generation) == ([], None)
    # unreadable user data counts as the default generation
    assert a.member_data(Subscription(["t"], b"\x01")).generation == -1


def test_stale_generation_owner_loses_to_newer_one_without_double_assignment():
    a = CooperativeStickyAssignor()
    cluster = ClusterView({"t": 4})
    members = [GroupMember("old", None, Subscription(["t"], None, [tp("t", 0), tp("t", 1)], 3)),
               GroupMember("new", None, Subscription(["t"], None, [tp("t", 1), tp("t", 2)], 4))]
    out = {m: set(x.partitions()) for m, x in a.assign(cluster, members).items()}
    assert tp("t", 1) in out["new"] and tp("t", 1) not in out["old"]
    assert not out["old"] & out["new"] and is_fully_balanced({m: list(v) for m, v in out.items()})
