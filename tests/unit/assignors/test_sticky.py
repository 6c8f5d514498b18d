"""The sticky algorithm: the scenarios of Kafka's AbstractStickyAssignorTest/StickyAssignorTest
and the StickyAssignor documentation (inputs and expected outputs are Java's), for every rack
configuration Java runs them with, and for both sticky assignors (the eager one reading owned
partitions from its user data, the cooperative one from the subscription's fields; the
cooperative adjustment itself is tested in tests/unit/assignors/test_cooperative_sticky.py)."""

from __future__ import annotations

import pytest

from kproto.consumer.classic.assignors import (
    ClusterView,
    CooperativeStickyAssignor,
    GroupMember,
    StickyPartitionAssignor,
)
from kproto.consumer.classic.assignors.abstract_sticky import AbstractStickyAssignor
from kproto.consumer.classic.consumer_protocol import (
    Assignment,
    Subscription,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from tests.unit.assignors.java_fixtures import (
    StickyFixture,
    is_fully_balanced,
    null_racks,
    racks,
    tp,
    verify_rack_assignment,
    verify_validity_and_balance,
)

RACK_CONFIGS = ["NO_BROKER_RACK", "NO_CONSUMER_RACK", "BROKER_AND_CONSUMER_RACK"]
T, T1, T2, T3 = "topic", "topic1", "topic2", "topic3"
C1, C2, C3, C4 = "consumer1", "consumer2", "consumer3", "consumer4"
GEN = 1


@pytest.fixture(params=[(cls, rc) for cls in (StickyPartitionAssignor, CooperativeStickyAssignor)
                        for rc in RACK_CONFIGS], ids=lambda p: "{}-{}".format(p[0].name, p[1]))
def f(request):
    cls, rack_config = request.param
    return StickyFixture(cls(), rack_config)


def run(f, ppt, subs):
    # The shared algorithm (for the cooperative assignor: before it holds back moving partitions).
    out = AbstractStickyAssignor.assign_partitions(f.assignor, ppt, subs)
    verify_validity_and_balance(subs, out)
    return out


def test_one_consumer(f):
    for ppt, topics in (({}, []), ({T: []}, [T])):
        out = run(f, ppt, {"consumer": f.sub(topics, 0)})
        assert out == {"consumer": []} and f.assignor.partitions_transferring_ownership == {}
    assert run(f, {T: f.infos(T, 3)}, {"consumer": f.sub([T], 0)}) == {"consumer": [tp(T, 0), tp(T, 1), tp(T, 2)]}
    sub = f.sub_v2([T], [tp(T, 0), tp(T, 1), tp("other", 0), tp("other", 1)], GEN, 0)
    assert run(f, {T: f.infos(T, 2)}, {"consumer": sub}) == {"consumer": [tp(T, 0), tp(T, 1)]}
    ppt = {T1: f.infos(T1, 1), T2: f.infos(T2, 2)}
    assert run(f, ppt, {"consumer": f.sub([T1, T2], 0)}) == {"consumer": [tp(T1, 0), tp(T2, 0), tp(T2, 1)]}


def test_two_consumers_one_topic(f):
    out = run(f, {T: f.infos(T, 1)}, {C1: f.sub([T], 0), C2: f.sub([T], 1)})
    assert is_fully_balanced(out) and f.assignor.partitions_transferring_ownership == {}
    out = run(f, {T: f.infos(T, 2)}, {C1: f.sub([T], 0), C2: f.sub([T], 1)})
    assert out == {C1: [tp(T, 0)], C2: [tp(T, 1)]}


def test_mixed_topic_subscriptions_use_general_algorithm(f):
    ppt = {T1: f.infos(T1, 3), T2: f.infos(T2, 2)}
    out = run(f, ppt, {C1: f.sub([T1], 0), C2: f.sub([T1, T2], 1), C3: f.sub([T1], 2)})
    assert out == {C1: [tp(T1, 0), tp(T1, 2)], C2: [tp(T2, 0), tp(T2, 1)], C3: [tp(T1, 1)]}
    assert f.assignor.partitions_transferring_ownership is None


def test_two_consumers_two_topics_six_partitions(f):
    ppt = {T1: f.infos(T1, 3), T2: f.infos(T2, 3)}
    out = run(f, ppt, {C1: f.sub([T1, T2], 0), C2: f.sub([T1, T2], 1)})
    assert out == {C1: [tp(T1, 0), tp(T1, 2), tp(T2, 1)], C2: [tp(T1, 1), tp(T2, 0), tp(T2, 2)]}


def test_quota_cases(f):
    both = [T1, T2]
    ppt = {T1: f.infos(T1, 2), T2: f.infos(T2, 3)}
    out = run(f, ppt, {C1: f.sub_v2(both, [tp(T1, 0), tp(T2, 1)], GEN, 0),
                       C2: f.sub_v2(both, [tp(T1, 1), tp(T2, 2)], GEN, 1)})
    assert out == {C1: [tp(T1, 0), tp(T2, 1), tp(T2, 0)], C2: [tp(T1, 1), tp(T2, 2)]}
    assert f.assignor.partitions_transferring_ownership == {}

    f2 = StickyFixture(type(f.assignor)(), "BROKER_AND_CONSUMER_RACK")
    for fx in (f, f2):
        ppt = {T1: fx.infos(T1, 2), T2: fx.infos(T2, 2)}
        out = run(fx, ppt, {C1: fx.sub_v2(both, [tp(T1, 0), tp(T2, 0)], GEN, 0),
                            C2: fx.sub_v2(both, [tp(T1, 1), tp(T2, 1)], GEN, 1),
                            C3: fx.sub_v2(both, [], GEN, 2)})
        assert fx.assignor.partitions_transferring_ownership == {tp(T2, 0): C3}
        assert out == {C1: [tp(T1, 0)], C2: [tp(T1, 1), tp(T2, 1)], C3: [tp(T2, 0)]}

    ppt = {T1: f.infos(T1, 2), T2: f.infos(T2, 3)}
    out = run(f, ppt, {C1: f.sub_v2(both, [tp(T1, 0)], GEN, 0), C2: f.sub_v2(both, [tp(T1, 1)], GEN, 1),
                       C3: f.sub_v2(both, [], GEN, 2)})
    assert f.assignor.partitions_transferring_ownership == {}
    assert out == {C1: [tp(T1, 0), tp(T2, 1)], C2: [tp(T1, 1), tp(T2, 2)], C3: [tp(T2, 0)]}

    ppt = {T: f.infos(T, 4)}
    out = run(f, ppt, {C1: f.sub_v2([T], [tp(T, 0), tp(T, 1)], GEN, 0), C2: f.sub_v2([T], [tp(T, 2)], GEN, 1),
                       C3: f.sub_v2([T], [], GEN, 2)})
    assert out == {C1: [tp(T, 0), tp(T, 1)], C2: [tp(T, 2)], C3: [tp(T, 3)]}


def test_add_remove_consumer_one_topic(f):
    ppt = {T: f.infos(T, 3)}
    subs = {C1: f.sub([T], 0)}
    out = run(f, ppt, subs)
    assert out[C1] == [tp(T, 0), tp(T, 1), tp(T, 2)]
    subs = {C1: f.sub_v2([T], out[C1], GEN, 0), C2: f.sub_v2([T], [], GEN, 1)}
    out = run(f, ppt, subs)
    assert f.assignor.partitions_transferring_ownership == {tp(T, 2): C2}
    assert out == {C1: [tp(T, 0), tp(T, 1)], C2: [tp(T, 2)]}
    subs = {C2: f.sub_v2([T], out[C2], GEN, 1)}
    out = run(f, ppt, subs)
    assert set(out[C2]) == {tp(T, 0), tp(T, 1), tp(T, 2)} and f.assignor.partitions_transferring_ownership == {}


def test_add_remove_two_consumers_two_topics(f):
    both = [T1, T2]
    ppt = {T1: f.infos(T1, 3), T2: f.infos(T2, 4)}
    out = run(f, ppt, {C1: f.sub(both, 0), C2: f.sub(both, 1)})
    assert out == {C1: [tp(T1, 0), tp(T1, 2), tp(T2, 1), tp(T2, 3)], C2: [tp(T1, 1), tp(T2, 0), tp(T2, 2)]}
    subs = {C1: f.sub_v2(both, out[C1], GEN, 0), C2: f.sub_v2(both, out[C2], GEN, 1),
            C3: f.sub_v2(both, [], GEN, 2), C4: f.sub_v2(both, [], GEN, 3)}
    out = run(f, ppt, subs)
    assert f.assignor.partitions_transferring_ownership == {tp(T1, 2): C3, tp(T2, 3): C3, tp(T2, 2): C4}
    assert out == {C1: [tp(T1, 0), tp(T2, 1)], C2: [tp(T2, 0), tp(T1, 1)], C3: [tp(T1, 2), tp(T2, 3)],
                   C4: [tp(T2, 2)]}
    subs = {C3: f.sub_v2(both, out[C3], GEN, 2), C4: f.sub_v2(both, out[C4], GEN, 3)}
    out = run(f, ppt, subs)
    assert out == {C3: [tp(T1, 2), tp(T2, 3), tp(T1, 0), tp(T2, 1)], C4: [tp(T2, 2), tp(T1, 1), tp(T2, 0)]}
    assert f.assignor.partitions_transferring_ownership == {}


def test_topic_balance_after_reassignment(f):
    both = [T1, T2]
    ppt = {T1: f.infos(T1, 12), T2: f.infos(T2, 12)}
    out = run(f, ppt, {C1: f.sub(both, 0)})
    counts = {1: 12, 2: 6, 4: 3}
    subs = {C1: f.sub_v2(both, out[C1], GEN, 0), C2: f.sub_v2(both, [], GEN, 1)}
    out = run(f, ppt, subs)
    assert all(sum(p.topic == t for p in v) == counts[2] for v in out.values() for t in both)
    subs = {C1: f.sub_v2(both, out[C1], GEN, 0), C2: f.sub_v2(both, out[C2], GEN, 1),
            C3: f.sub_v2(both, [], GEN, 2), C4: f.sub_v2(both, [], GEN, 3)}
    out = run(f, ppt, subs)
    assert all(sum(p.topic == t for p in v) == counts[4] for v in out.values() for t in both)
    subs = {C3: f.sub_v2(both, out[C3], GEN, 2), C4: f.sub_v2(both, out[C4], GEN, 3)}
    out = run(f, ppt, subs)
    assert all(sum(p.topic == t for p in v) == counts[2] for v in out.values() for t in both)


def test_generations_and_conflicting_claims(f):
    both = [T, T2]
    ppt = {T: f.infos(T, 3), T2: f.infos(T2, 3)}
    mine = [tp(T, 0), tp(T, 2), tp(T2, 1)]
    for other_generation in (9, -1):  # stale generation, and no generation at all
        out = run(f, ppt, {C1: f.sub_v2(both, mine, 10, 0), C2: f.sub_v2(both, mine, other_generation, 1)})
        assert set(out[C1]) == set(mine) and set(out[C2]) == {tp(T, 1), tp(T2, 0), tp(T2, 2)}
        assert f.assignor.partitions_transferring_ownership == {}

    out = run(f, ppt, {C1: f.sub_v2(both, [tp(T, 0), tp(T2, 1), tp(T, 1)], 10, 0),
                       C2: f.sub_v2(both, [tp(T, 0), tp(T2, 1), tp(T2, 2)], 8, 1)})
    assert set(out[C1]) == {tp(T, 0), tp(T2, 1), tp(T, 1)} and set(out[C2]) == {tp(T, 2), tp(T2, 2), tp(T2, 0)}

    ppt = {T: f.infos(T, 3)}
    out = run(f, ppt, {C1: f.sub_v2([T], [tp(T, 0), tp(T, 1)], GEN, 0), C2: f.sub_v2([T], [tp(T, 0), tp(T, 2)], GEN, 1),
                       C3: f.sub_v2([T], [], GEN, 2)})
    assert f.assignor.partitions_transferring_ownership == {tp(T, 0): C3}
    assert out == {C1: [tp(T, 1)], C2: [tp(T, 2)], C3: [tp(T, 0)]}

    ppt = {T: f.infos(T, 4)}
    out = run(f, ppt, {C1: f.sub_v2([T], [tp(T, 0), tp(T, 1)], GEN, 0), C2: f.sub_v2([T], [tp(T, 0), tp(T, 2)], GEN, 1),
                       C3: f.sub_v2([T], [], GEN, 2)})
    assert out == {C1: [tp(T, 1), tp(T, 3)], C2: [tp(T, 2)], C3: [tp(T, 0)]}

    three = [T, T2, T3]
    ppt = {T: f.infos(T, 3), T2: f.infos(T2, 3), T3: f.infos(T3, 3)}
    out = run(f, ppt, {C1: f.sub_v2(three, [tp(T, 0), tp(T2, 0), tp(T3, 0)], 10, 0),
                       C2: f.sub_v2(three, [tp(T, 1), tp(T2, 1), tp(T3, 1)], 9, 1),
                       C3: f.sub_v2(three, [tp(T2, 1), tp(T3, 0), tp(T3, 2)], 8, 1)})
    assert {c: set(v) for c, v in out.items()} == {
        C1: {tp(T, 0), tp(T2, 0), tp(T3, 0)}, C2: {tp(T, 1), tp(T2, 1), tp(T3, 1)}, C3: {tp(T, 2), tp(T2, 2), tp(T3, 2)}}

    four = [T, T2, T3, T1]
    ppt = {t: f.infos(t, 3) for t in (T, T1, T2, T3)}
    out = run(f, ppt, {C1: f.sub_v2(four, [], -1, 0),
                       C2: f.sub_v2(four, [tp(T, 0), tp(T2, 0), tp(T1, 0)], 9, 1),
                       C3: f.sub_v2(four, [tp(T3, 2), tp(T2, 2), tp(T1, 1)], 8, 2),
                       C4: f.sub_v2(four, [tp(T3, 1), tp(T, 1), tp(T, 2)], 7, 3)})
    assert set(out[C1]) == {tp(T1, 2), tp(T2, 1), tp(T3, 0)}


def test_three_generations_claiming_the_same_partition():
    for gens in ((1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)):
        f = StickyFixture(CooperativeStickyAssignor() if gens[0] % 2 else StickyPartitionAssignor())
        ppt = {T: f.infos(T, 6), T1: f.infos(T1, 1)}
        subs = {C1: f.sub_v2([T], [tp(T, 0), tp(T, 2)], gens[0], 0),
                C2: f.sub_v2([T], [tp(T, 1), tp(T, 2), tp(T, 3)], gens[1], 1),
                C3: f.sub_v2([T], [tp(T, 2), tp(T, 4), tp(T, 5)], gens[2], 2),
                C4: f.sub_v2([T1], [tp(T1, 0)], 2, 3)}
        out = AbstractStickyAssignor.assign_partitions(f.assignor, ppt, subs)
        everything = [p for v in out.values() for p in v]
        assert len(everything) == len(set(everything)) == 7
        assert all(1 <= len(v) <= 2 for v in out.values())


def test_stickiness_when_the_leader_leaves(f):
    ppt = {T1: f.infos(T1, 3)}
    subs = {c: f.sub([T1], i) for i, c in enumerate((C1, C2, C3, C4))}
    out = run(f, ppt, subs)
    before = {c: v[0] for c, v in out.items() if v}
    assert all(len(v) <= 1 for v in out.values())
    subs = {c: f.sub_v2([T1], out[c], GEN, i) for i, c in enumerate((C1, C2, C3, C4)) if c != C1}
    out = run(f, ppt, subs)
    assert all(len(v) == 1 for v in out.values())
    assert all(c not in before or before[c] in out[c] for c in out)


def test_poor_round_robin_scenario_and_new_subscriptions(f):
    ppt = {"topic%d" % i: f.infos("topic%d" % i, i % 2 + 1) for i in range(1, 6)}
    every = ["topic1", "topic2", "topic3", "topic4", "topic5"]
    odd = ["topic1", "topic3", "topic5"]
    run(f, ppt, {C1: f.sub(every, 0), C2: f.sub(odd, 1), C3: f.sub(odd, 2), C4: f.sub(every, 3)})
    ppt = {"topic%d" % i: f.infos("topic%d" % i, 1) for i in range(1, 7)}
    run(f, ppt, {C1: f.sub_v2(["topic1", "topic2"], [tp("topic1", 0)], GEN, 0),
                 C2: f.sub_v2(["topic1", "topic2", "topic3", "topic4"], [tp("topic2", 0), tp("topic3", 0)], GEN, 1),
                 C3: f.sub_v2(["topic2", "topic3", "topic4", "topic5", "topic6"],
                              [tp("topic4", 0), tp("topic5", 0), tp("topic6", 0)], GEN, 2)})
    assert f.assignor.partitions_transferring_ownership is None


def _name(prefix, i, max_num):
    return prefix + str(i).zfill(len(str(max_num)))


def test_reassignment_after_one_consumer_leaves(f):
    ppt = {_name("t", i, 20): f.infos(_name("t", i, 20), i) for i in range(1, 20)}
    subs = {_name("c", i, 20): f.sub([_name("t", j, 20) for j in range(1, i + 1)], i) for i in range(1, 20)}
    out = run(f, ppt, subs)
    subs = {c: f.sub_v2(s.topics, out[c], GEN, i + 1) for i, (c, s) in enumerate(subs.items())}
    del subs["c10"]
    before = out
    out = run(f, ppt, subs)
    kept = sum(len(set(out[c]) & set(before[c])) for c in out)
    assert kept >= sum(len(before[c]) for c in out) - len(before["c10"])  # only c10's partitions were free


def test_same_subscriptions_member_leaves(f):
    ppt = {_name("t", i, 15): f.infos(_name("t", i, 15), i) for i in range(1, 15)}
    topics = list(ppt)
    subs = {_name("c", i, 9): f.sub(topics, i) for i in range(1, 9)}
    out = run(f, ppt, subs)
    assert f.assignor.partitions_transferring_ownership == {}
    subs = {c: f.sub_v2(topics, out[c], GEN, i + 1) for i, c in enumerate(subs)}
    del subs[_name("c", 5, 9)]
    run(f, ppt, subs)
    assert f.assignor.partitions_transferring_ownership == {}


def test_deleted_topics(f):
    ppt = {T1: f.infos(T1, 1), T3: f.infos(T3, 100)}
    out = run(f, ppt, {"consumer": f.sub([T1, T2, T3], 0)})
    assert len(out["consumer"]) == 101
    ppt = {T: f.infos(T, 3)}
    out = run(f, ppt, {"consumer": f.sub([T], 0)})
    out = run(f, {}, {"consumer": f.sub_v2([T], out["consumer"], GEN, 0)})
    assert out == {"consumer": []} and f.assignor.partitions_transferring_ownership == {}


def test_claimed_by_multiple_consumers_in_same_generation_is_invalidated(f):
    ppt = {T: f.infos(T, 3)}
    out = run(f, ppt, {C1: f.sub_v2([T], [tp(T, 0), tp(T, 1)], GEN, 0),
                       C2: f.sub_v2([T], [tp(T, 0), tp(T, 2)], GEN, 1), C3: f.sub_v2([T], [], GEN, 2)})
    assert out == {C1: [tp(T, 1)], C2: [tp(T, 2)], C3: [tp(T, 0)]}


# --- rack-aware (KIP-881), Java's expected outputs ------------------------------------


def _rack_verify(a, topics, rf, broker_racks, consumer_racks, ct, expected, mismatched, owned=None):
    # Java's verifyRackAssignment keeps the subscriptions in a HashMap sized to the member count.
    a.subscriptions_map_initial_capacity = len(consumer_racks)
    verify_rack_assignment(a, topics, rf, broker_racks, consumer_racks, ct, expected, mismatched, owned)


def _verify_twice(a, topics, ct, rf, br, cr, expected, mismatched):
    """Java's verifyUniformSubscription/verifyNonEqualSubscription: from scratch, then with
    the expected assignment as the previous one."""
    _rack_verify(a, topics, rf, br, cr, ct, expected, mismatched)
    _rack_verify(a, topics, rf, br, cr, ct, expected, mismatched, expected)


def _racks_that_change_nothing(a, topics, ct, plain):
    """The rack layouts where Java expects the non-rack-aware result."""
    _verify_twice(a, topics, ct, 3, null_racks(3), racks(3), plain, -1)
    _verify_twice(a, topics, ct, 3, racks(3), null_racks(3), plain, -1)
    a.prefer_rack_aware_logic = True
    _verify_twice(a, topics, ct, 3, racks(3), racks(3), plain, 0)
    _verify_twice(a, topics, ct, 4, racks(4), racks(3), plain, 0)
    a.prefer_rack_aware_logic = False
    _verify_twice(a, topics, ct, 3, racks(3), racks(3), plain, 0)
    _verify_twice(a, topics, ct, 3, racks(3), ["d", "e", "f"], plain, -1)
    _verify_twice(a, topics, ct, 3, racks(3), [None, "e", "f"], plain, -1)


MISALIGNED = ["t1-0, t1-1, t1-2, t1-3, t1-4", "t1-5, t2-0, t2-1, t2-2, t2-3", "t2-4, t2-5, t2-6, t3-0, t3-1"]


def test_rack_aware_uniform_subscription():
    a = StickyPartitionAssignor()
    topics = {"t1": 6, "t2": 7, "t3": 2}
    ct = [["t1", "t2", "t3"]] * 3
    plain = ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"]
    _racks_that_change_nothing(a, topics, ct, plain)
    _verify_twice(a, topics, ct, 1, racks(3), racks(3), plain, 0)
    _verify_twice(a, topics, ct, 2, racks(3), racks(3), plain, 0)
    _verify_twice(a, topics, ct, 3, racks(2), racks(3), plain, 5)
    _rack_verify(a, topics, 1, racks(3), racks(3), ct, plain, 0, MISALIGNED)
    a.prefer_rack_aware_logic = True
    _rack_verify(a, topics, 3, racks(3), racks(3), ct, plain, 0, plain)


def test_rack_aware_non_equal_subscription():
    a = StickyPartitionAssignor()
    topics = {"t1": 6, "t2": 7, "t3": 2}
    ct = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    plain = ["t1-5, t2-0, t2-2, t2-4, t2-6", "t1-3, t2-1, t2-3, t2-5, t3-0", "t1-0, t1-1, t1-2, t1-4, t3-1"]
    _racks_that_change_nothing(a, topics, ct, plain)
    rf1 = ["t1-3, t2-0, t2-2, t2-3, t2-6", "t1-4, t2-1, t2-4, t2-5, t3-0", "t1-0, t1-1, t1-2, t1-5, t3-1"]
    _verify_twice(a, topics, ct, 1, racks(3), racks(3), rf1, 4)
    _verify_twice(a, topics, ct, 2, racks(3), racks(3), ["t1-3, t2-0, t2-2, t2-5, t2-6", "t1-0, t2-1, t2-3, t2-4, t3-0",
                                                         "t1-1, t1-2, t1-4, t1-5, t3-1"], 0)
    _verify_twice(a, topics, ct, 3, racks(2), racks(3), plain, 5)
    _rack_verify(a, topics, 1, racks(3), racks(3), ct, rf1, 4, MISALIGNED)
    for prefer in (False, True):
        a.prefer_rack_aware_logic = prefer
        _rack_verify(a, topics, 3, racks(3), racks(3), ct, plain, 0, MISALIGNED)


# --- the StickyAssignor documentation's examples and its user data ---------------------


def _member(mid, topics, previous=None, generation=None):
    user_data = None if previous is None else encode_sticky_user_data(previous, generation)
    return GroupMember(mid, None, Subscription(topics, user_data))


def test_documented_example_1():
    a = StickyPartitionAssignor()
    cluster = ClusterView({"t0": 2, "t1": 2, "t2": 2, "t3": 2})
    topics = ["t0", "t1", "t2", "t3"]
    first = a.assign(cluster, [_member(m, topics) for m in ("C0", "C1", "C2")])
    assert {m: set(x.partitions()) for m, x in first.items()} == {
        "C0": {tp("t0", 0), tp("t1", 1), tp("t3", 0)}, "C1": {tp("t0", 1), tp("t2", 0), tp("t3", 1)},
        "C2": {tp("t1", 0), tp("t2", 1)}}
    second = a.assign(cluster, [_member(m, topics, first[m].partitions(), 1) for m in ("C0", "C2")])
    # The documentation's second table predates the constrained algorithm (Kafka 2.8), which
    # fills the sorted under-quota members round-robin with C1's freed partitions; what the
    # documentation promises still holds: every previous assignment kept, 4 each.
    assert {m: set(x.partitions()) for m, x in second.items()} == {
        "C0": {tp("t0", 0), tp("t1", 1), tp("t3", 0), tp("t0", 1)},
        "C2": {tp("t1", 0), tp("t2", 1), tp("t2", 0), tp("t3", 1)}}


def test_documented_example_2():
    a = StickyPartitionAssignor()
    cluster = ClusterView({"t0": 1, "t1": 2, "t2": 3})
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    first = a.assign(cluster, [_member(m, t) for m, t in subs.items()])
    assert {m: set(x.partitions()) for m, x in first.items()} == {
        "C0": {tp("t0", 0)}, "C1": {tp("t1", 0), tp("t1", 1)}, "C2": {tp("t2", 0), tp("t2", 1), tp("t2", 2)}}
    second = a.assign(cluster, [_member(m, subs[m], first[m].partitions(), 1) for m in ("C1", "C2")])
    assert {m: set(x.partitions()) for m, x in second.items()} == {
        "C1": {tp("t1", 0), tp("t1", 1), tp("t0", 0)}, "C2": {tp("t2", 0), tp("t2", 1), tp("t2", 2)}}


def test_user_data_round_trip_through_on_assignment():
    a = StickyPartitionAssignor()
    assert a.subscription_user_data({"t"}) is None  # nothing owned yet
    a.on_assignment(Assignment([tp("t", 1), tp("u", 0)]), 7)
    assert decode_sticky_user_data(a.metadata({"t", "u"}).user_data) == ([tp("t", 1), tp("u", 0)], 7)
    data = a.member_data(Subscription(["t"], encode_sticky_user_data([tp("t", 2)], None)))
    assert (data.partitions, data.generation) == ([tp("t", 2)], None)  # a v0 member
