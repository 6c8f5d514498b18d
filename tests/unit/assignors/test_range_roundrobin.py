"""range and roundrobin: the scenarios of Kafka's RangeAssignorTest/RoundRobinAssignorTest and
the assignors' documented examples (inputs and expected outputs are Java's), the interface
kafka-python callers use, and the strategy resolver."""

from __future__ import annotations

import pytest

from kproto.consumer.classic.assignors import (
    ClusterView,
    CooperativeStickyAssignor,
    GroupMember,
    RangePartitionAssignor,
    RebalanceProtocol,
    RoundRobinPartitionAssignor,
    StickyPartitionAssignor,
    resolve_assignors,
    select_rebalance_protocol,
)
from kproto.consumer.classic.assignors.abstract import AbstractPartitionAssignor, JavaStyleAssignor
from kproto.consumer.classic.consumer_protocol import Assignment, Subscription, decode_assignment, encode_assignment
from kproto.errors import KafkaConfigurationError
from tests.unit.assignors.java_fixtures import (
    ALL_RACKS,
    null_racks,
    parse_tps,
    partition_infos_by_rack_count,
    racks,
    tp,
    verify_rack_assignment,
)

RACK_CONFIGS = ["NO_BROKER_RACK", "NO_CONSUMER_RACK", "BROKER_AND_CONSUMER_RACK"]


class RangeFixture:
    """Java's RangeAssignorTest set-up: replication factor = max consumers, and with broker
    racks every partition is on every rack (so rack-aware logic, forced on, changes nothing)."""

    def __init__(self, rack_config: str, max_consumers: int = 3) -> None:
        self.assignor = RangePartitionAssignor()
        self.assignor.prefer_rack_aware_logic = True
        self.rf = max_consumers
        self.num_broker_racks = max_consumers if rack_config != "NO_BROKER_RACK" else 0
        self.has_consumer_rack = rack_config != "NO_CONSUMER_RACK"

    def infos(self, topic, n):
        return partition_infos_by_rack_count(topic, n, self.rf, self.num_broker_racks, 0)

    def sub(self, topics, index, instance=None):
        num_racks = self.num_broker_racks if self.num_broker_racks > 0 else len(ALL_RACKS)
        rack = ALL_RACKS[index % num_racks] if self.has_consumer_rack else None
        return Subscription(list(topics), None, [], -1, rack, instance)

    def assign(self, ppt, subs):
        return {c: set(v) for c, v in self.assignor.assign_partitions(ppt, subs).items()}


@pytest.mark.parametrize("cfg", RACK_CONFIGS)
def test_range_basic_scenarios(cfg):
    f = RangeFixture(cfg)
    assert f.assign({}, {"consumer1": f.sub([], 0)}) == {"consumer1": set()}
    assert f.assign({}, {"consumer1": f.sub(["topic1"], 0)}) == {"consumer1": set()}
    assert f.assign({"topic1": f.infos("topic1", 3)}, {"consumer1": f.sub(["topic1"], 0)}) == {
        "consumer1": {tp("topic1", 0), tp("topic1", 1), tp("topic1", 2)}}
    # only subscribed topics
    assert f.assign({"topic1": f.infos("topic1", 3), "other": f.infos("other", 3)},
                    {"consumer1": f.sub(["topic1"], 0)})["consumer1"] == {tp("topic1", i) for i in range(3)}
    assert f.assign({"topic1": f.infos("topic1", 1), "topic2": f.infos("topic2", 2)},
                    {"consumer1": f.sub(["topic1", "topic2"], 0)})["consumer1"] == {
        tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)}
    one = {"topic1": f.infos("topic1", 1)}
    assert f.assign(one, {"consumer1": f.sub(["topic1"], 0), "consumer2": f.sub(["topic1"], 1)}) == {
        "consumer1": {tp("topic1", 0)}, "consumer2": set()}
    two = {"topic1": f.infos("topic1", 2)}
    assert f.assign(two, {"consumer1": f.sub(["topic1"], 0), "consumer2": f.sub(["topic1"], 1)}) == {
        "consumer1": {tp("topic1", 0)}, "consumer2": {tp("topic1", 1)}}


@pytest.mark.parametrize("cfg", RACK_CONFIGS)
def test_range_mixed_topics_and_static_members(cfg):
    f = RangeFixture(cfg)
    ppt = {"topic1": f.infos("topic1", 3), "topic2": f.infos("topic2", 2)}
    assert f.assign(ppt, {"consumer1": f.sub(["topic1"], 0), "consumer2": f.sub(["topic1", "topic2"], 1),
                          "consumer3": f.sub(["topic1"], 2)}) == {
        "consumer1": {tp("topic1", 0)},
        "consumer2": {tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)},
        "consumer3": {tp("topic1", 2)}}
    ppt = {"topic1": f.infos("topic1", 3), "topic2": f.infos("topic2", 3)}
    both = ["topic1", "topic2"]
    assert f.assign(ppt, {"consumer1": f.sub(both, 0), "consumer2": f.sub(both, 1)}) == {
        "consumer1": {tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)},
        "consumer2": {tp("topic1", 2), tp("topic2", 2)}}
    # static members sort by instance id, not member id; static before dynamic
    low, high = "consumer-b", "consumer-a"
    expected = {low: {tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)},
                high: {tp("topic1", 2), tp("topic2", 2)}}
    assert f.assign(ppt, {low: f.sub(both, 0, "instance1"), high: f.sub(both, 1, "instance2")}) == expected
    assert f.assign(ppt, {low: f.sub(both, 0, "instance1"), high: f.sub(both, 1)}) == expected


@pytest.mark.parametrize("cfg", RACK_CONFIGS)
def test_range_static_assignment_persistent(cfg):
    f = RangeFixture(cfg, 5)
    both = ["topic1", "topic2"]
    ppt = {"topic1": f.infos("topic1", 5), "topic2": f.infos("topic2", 4)}
    subs = {"consumer{}".format(i + 1): f.sub(both, i, "instance{}".format(i + 1)) for i in range(3)}
    subs["consumer4"] = f.sub(both, 3)
    expected = {"consumer1": {tp("topic1", 0), tp("topic1", 1), tp("topic2", 0)},
                "consumer2": {tp("topic1", 2), tp("topic2", 1)},
                "consumer3": {tp("topic1", 3), tp("topic2", 2)},
                "consumer4": {tp("topic1", 4), tp("topic2", 3)}}
    assert f.assign(ppt, subs) == expected
    del subs["consumer4"]
    subs["consumer5"] = f.sub(both, 4)
    expected["consumer5"] = expected.pop("consumer4")
    assert f.assign(ppt, subs) == expected


def _by_instance(assignor, ppt, subs):
    result = assignor.assign_partitions(ppt, subs)
    return {s.group_instance_id: set(result[m]) for m, s in subs.items()}


@pytest.mark.parametrize("cfg", RACK_CONFIGS)
def test_range_static_assignment_survives_member_id_changes(cfg):
    f = RangeFixture(cfg)
    both = ["topic1", "topic2"]
    ppt = {"topic1": f.infos("topic1", 5), "topic2": f.infos("topic2", 5)}
    subs = {"consumer{}".format(i + 1): f.sub(both, i, "instance{}".format(i + 1)) for i in range(3)}
    expected = {"instance1": {tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)},
                "instance2": {tp("topic1", 2), tp("topic1", 3), tp("topic2", 2), tp("topic2", 3)},
                "instance3": {tp("topic1", 4), tp("topic2", 4)}}
    assert _by_instance(f.assignor, ppt, subs) == expected
    subs["consumer4"] = subs.pop("consumer3")
    subs["consumer5"] = subs.pop("consumer2")
    assert _by_instance(f.assignor, ppt, subs) == expected


def test_range_rack_aware_static_members_persistent():
    a = RangePartitionAssignor()
    a.prefer_rack_aware_logic = True
    both = ["topic1", "topic2"]
    ppt = {t: partition_infos_by_rack_count(t, 5, 2, 3, 0) for t in both}
    subs = {"consumer{}".format(i + 1): Subscription(both, None, [], -1, ALL_RACKS[i], "instance{}".format(i + 1))
            for i in range(3)}
    expected = {"instance1": {tp("topic1", 0), tp("topic1", 2), tp("topic2", 0), tp("topic2", 2)},
                "instance2": {tp("topic1", 1), tp("topic1", 3), tp("topic2", 1), tp("topic2", 3)},
                "instance3": {tp("topic1", 4), tp("topic2", 4)}}
    assert _by_instance(a, ppt, subs) == expected
    subs["consumer4"] = subs.pop("consumer3")
    subs["consumer5"] = subs.pop("consumer2")
    assert _by_instance(a, ppt, subs) == expected


def _verify_non_rack_aware(topics, consumer_topics, expected):
    a = RangePartitionAssignor()
    verify_rack_assignment(a, topics, 3, null_racks(3), racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(a, topics, 3, racks(3), null_racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(a, topics, 3, racks(3), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(a, topics, 4, racks(4), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(a, topics, 3, racks(3), ["d", "e", "f"], consumer_topics, expected, -1)
    verify_rack_assignment(a, topics, 3, racks(3), [None, "e", "f"], consumer_topics, expected, -1)
    a.prefer_rack_aware_logic = True
    verify_rack_assignment(a, topics, 3, racks(3), racks(3), consumer_topics, expected, 0)


def test_range_rack_aware_uniform_subscription():
    topics = {"t1": 6, "t2": 7, "t3": 2}
    ct = [["t1", "t2", "t3"]] * 3
    _verify_non_rack_aware(topics, ct, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1",
                                        "t1-4, t1-5, t2-5, t2-6"])
    a = RangePartitionAssignor()
    verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct,
                           ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"], 0)
    verify_rack_assignment(a, topics, 2, racks(3), racks(3), ct,
                           ["t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"], 1)
    verify_rack_assignment(a, topics, 3, racks(2), racks(3), ct,
                           ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"], 4)


def test_range_rack_aware_non_equal_subscription():
    topics = {"t1": 6, "t2": 7, "t3": 2}
    ct = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    _verify_non_rack_aware(topics, ct, ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0",
                                        "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"])
    a = RangePartitionAssignor()
    verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct,
                           ["t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"], 2)
    verify_rack_assignment(a, topics, 2, racks(3), racks(3), ct,
                           ["t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"], 0)
    verify_rack_assignment(a, topics, 3, racks(2), racks(3), ct,
                           ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"], 2)


def test_range_rack_aware_uniform_partitions_keep_co_partitioning():
    topics = {"t1": 5, "t2": 5, "t3": 5}
    ct = [["t1", "t2", "t3"]] * 3
    expected = ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"]
    _verify_non_rack_aware(topics, ct, expected)
    a = RangePartitionAssignor()
    verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, expected, 10)
    verify_rack_assignment(a, topics, 2, racks(3), racks(3), ct, expected, 5)
    verify_rack_assignment(a, topics, 3, racks(2), racks(3), ct, expected, 3)


def test_range_rack_aware_uniform_partitions_non_equal_subscription():
    topics = {"t1": 5, "t2": 5, "t3": 5}
    ct = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    _verify_non_rack_aware(topics, ct, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1",
                                        "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"])
    a = RangePartitionAssignor()
    verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct,
                           ["t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"], 9)
    verify_rack_assignment(a, topics, 2, racks(3), racks(3), ct,
                           ["t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"], 0)
    verify_rack_assignment(a, topics, 3, racks(2), racks(3), ct,
                           ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"], 2)


def test_range_rack_aware_co_partitioning():
    a = RangePartitionAssignor()
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
    ct = [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]]
    cr = [ALL_RACKS[0], ALL_RACKS[1], ALL_RACKS[1], ALL_RACKS[0]]
    plain = ["t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5", "t3-0, t4-0", "t3-1, t4-1"]
    verify_rack_assignment(a, topics, 3, racks(2), cr, ct, plain, -1)
    verify_rack_assignment(a, topics, 2, racks(2), cr, ct, plain, 0)
    verify_rack_assignment(a, topics, 1, racks(2), cr, ct,
                           ["t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5",
                            "t3-1, t4-1", "t3-0, t4-0"], 0)
    ct = [["t1", "t2", "t3", "t4"]] * 4
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t4-0", "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1", "t1-4, t2-4", "t1-5, t2-5"]
    verify_rack_assignment(a, topics, 3, racks(2), cr, ct, plain, -1)
    verify_rack_assignment(a, topics, 2, racks(2), cr, ct, plain, 0)
    verify_rack_assignment(a, topics, 1, racks(2), cr, ct,
                           ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1",
                            "t1-5, t2-5", "t1-4, t2-4"], 0)
    verify_rack_assignment(a, topics, 1, racks(3), cr, ct,
                           ["t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1",
                            "t1-2, t2-2", "t1-5, t2-5"], 6)


def test_range_co_partitioned_same_subscription():
    a = RangePartitionAssignor()
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4}
    topic_list = ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"]
    ct = [topic_list] * 3
    cr = ALL_RACKS[:3]
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
             "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2", "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3"]
    verify_rack_assignment(a, topics, 3, null_racks(3), cr, ct, plain, -1)
    a.prefer_rack_aware_logic = True
    verify_rack_assignment(a, topics, 3, racks(3), cr, ct, plain, 0)
    verify_rack_assignment(a, topics, 2, racks(3), cr, ct,
                           ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1",
                            "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
                            "t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3"], 0)


# --- roundrobin: the examples in RoundRobinAssignor's documentation ---------------------


def _members(spec):
    return [GroupMember(m, inst, Subscription(list(topics))) for m, inst, topics in spec]


def _partitions(result):
    return {m: set(a.partitions()) for m, a in result.items()}


def test_roundrobin_documented_examples():
    rr = RoundRobinPartitionAssignor()
    cluster = ClusterView({"t0": 3, "t1": 3})
    both = ["t0", "t1"]
    assert _partitions(rr.assign(cluster, _members([("C0", None, both), ("C1", None, both)]))) == {
        "C0": {tp("t0", 0), tp("t0", 2), tp("t1", 1)}, "C1": {tp("t0", 1), tp("t1", 0), tp("t1", 2)}}
    cluster = ClusterView({"t0": 1, "t1": 2, "t2": 3})
    assert _partitions(rr.assign(cluster, _members([
        ("C0", None, ["t0"]), ("C1", None, ["t0", "t1"]), ("C2", None, ["t0", "t1", "t2"])]))) == {
        "C0": {tp("t0", 0)}, "C1": {tp("t1", 0)}, "C2": {tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)}}
    # static members: the order of instance ids, whatever the member ids
    cluster = ClusterView({"t0": 3, "t1": 3})
    first = rr.assign(cluster, _members([("C0", "I0", both), ("C1", "I1", both), ("C2", "I2", both)]))
    assert _partitions(first) == {"C0": {tp("t0", 0), tp("t1", 0)}, "C1": {tp("t0", 1), tp("t1", 1)},
                                  "C2": {tp("t0", 2), tp("t1", 2)}}
    bounced = rr.assign(cluster, _members([("C5", "I0", both), ("C3", "I1", both), ("C4", "I2", both)]))
    assert _partitions(bounced) == {"C5": {tp("t0", 0), tp("t1", 0)}, "C3": {tp("t0", 1), tp("t1", 1)},
                                    "C4": {tp("t0", 2), tp("t1", 2)}}
    # dynamic members after the bounce: reshuffled by member id, as documented
    bounced = rr.assign(cluster, _members([("C5", None, both), ("C3", None, both), ("C4", None, both)]))
    assert _partitions(bounced) == {"C3": {tp("t0", 0), tp("t1", 0)}, "C4": {tp("t0", 1), tp("t1", 1)},
                                    "C5": {tp("t0", 2), tp("t1", 2)}}


def test_range_documented_example_through_kafka_python_interface():
    cluster = ClusterView({"t0": 3, "t1": 3})
    # kafka-python 2.x style: {member_id: metadata}; metadata may be encoded bytes
    members = {"C0": Subscription(["t0", "t1"]).encode(0), "C1": Subscription(["t0", "t1"])}
    result = RangePartitionAssignor().assign(cluster, members)
    assert _partitions(result) == {"C0": {tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)},
                                   "C1": {tp("t0", 2), tp("t1", 2)}}
    # the results are encodable assignments
    assert decode_assignment(encode_assignment(result["C1"])).partitions() == [tp("t0", 2), tp("t1", 2)]


def test_java_string_order_for_member_ids():
    # Java compares UTF-16 code units: U+FF21 sorts after U+10000 (a surrogate pair starting 0xD800).
    rr = RoundRobinPartitionAssignor()
    members = _members([("\uff21", None, ["t"]), ("\U00010000", None, ["t"])])
    result = rr.assign(ClusterView({"t": 1}), members)
    assert result["\U00010000"].partitions() == [tp("t", 0)]


# --- resolver and interface --------------------------------------------------------------


def test_resolve_names_classes_instances():
    sticky = StickyPartitionAssignor()
    out = resolve_assignors(["range", RoundRobinPartitionAssignor, sticky])
    assert [a.name for a in out] == ["range", "roundrobin", "sticky"] and out[2] is sticky
    assert [a.name for a in resolve_assignors("cooperative-sticky, range")] == ["cooperative-sticky", "range"]
    assert [a.name for a in resolve_assignors("org.apache.kafka.clients.consumer.RangeAssignor")] == ["range"]
    assert resolve_assignors(RangePartitionAssignor)[0].name == "range"


@pytest.mark.parametrize("bad", [[], "nope", ["range", "range"], [object()], "range,,RANGE"])
def test_resolve_rejects(bad):
    with pytest.raises(KafkaConfigurationError):
        resolve_assignors(bad)


def test_rebalance_protocol_selection():
    assert select_rebalance_protocol([CooperativeStickyAssignor()]) == RebalanceProtocol.COOPERATIVE
    # eager and cooperative-sticky listed together (the migration path): EAGER is common
    assert select_rebalance_protocol(resolve_assignors("cooperative-sticky,range")) == RebalanceProtocol.EAGER

    class CoopOnly(JavaStyleAssignor):
        name = "coop-only"

        def supported_protocols(self):
            return [RebalanceProtocol.COOPERATIVE]

        def assign_partitions(self, ppt, subs):
            return {m: [] for m in subs}

    with pytest.raises(KafkaConfigurationError):
        resolve_assignors([CoopOnly, "range"])


def test_custom_assignor_kafka_python_style():
    class Everything(AbstractPartitionAssignor):
        name = "everything-to-first"

        def assign(self, cluster, members):
            first = min(m.member_id for m in members)
            parts = [tp(t, p) for m in members for t in m.metadata.topics for p in cluster.partitions_for_topic(t)]
            return {m.member_id: Assignment(sorted(set(parts)) if m.member_id == first else []) for m in members}

    a = resolve_assignors([Everything])[0]
    assert a.metadata({"b", "a"}).topics == ["a", "b"]
    out = a.assign(ClusterView({"a": 2}), _members([("m2", None, ["a"]), ("m1", None, ["a"])]))
    assert _partitions(out) == {"m1": {tp("a", 0), tp("a", 1)}, "m2": set()}
    assert a.supported_protocols() == [RebalanceProtocol.EAGER]


def test_kafka_python_style_assignors_take_our_members_and_cluster():
    from kafka.coordinator.assignors.range import RangePartitionAssignor as KPRange
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as KPRoundRobin

    from kproto.consumer.classic.consumer_protocol import coerce_assignment, coerce_subscription

    # An application's own kafka-python assignor (here: subclasses of kafka-python's, defined
    # outside kafka-python, so run as they are) takes our members and cluster view, and what
    # it returns is accepted as an assignment; the results match ours. (Groups where
    # kafka-python 3.0 is right: its range drops members when static and dynamic ones are
    # interleaved, its roundrobin fails when a member skips a topic.)
    class OwnRange(KPRange):
        pass

    class OwnRoundRobin(KPRoundRobin):
        pass

    cluster = ClusterView({"t0": 3, "t1": 5})
    mixed = _members([("b", None, ["t0", "t1"]), ("a", None, ["t0"]), ("c", None, ["t1", "t0"])])
    equal = _members([("b", None, ["t0", "t1"]), ("a", None, ["t0", "t1"]), ("c", None, ["t1", "t0"])])
    for kp_cls, ours, members in ((OwnRange, RangePartitionAssignor(), mixed),
                                  (OwnRoundRobin, RoundRobinPartitionAssignor(), equal)):
        (kp,) = resolve_assignors([kp_cls])
        assert isinstance(kp, kp_cls)
        theirs = {m: set(coerce_assignment(a).partitions()) for m, a in kp.assign(cluster, members).items()}
        assert theirs == _partitions(ours.assign(cluster, members))
        assert coerce_subscription(kp.metadata({"t0"})).topics == ["t0"]


def test_rack_aware_range_through_cluster_metadata():
    # Racks read from kproto.net's ClusterMetadata (replica node ids + broker racks) give
    # Java's rack-aware result (RangeAssignorTest, replication factor 1 on racks a, b, c).
    from kproto.messages import MetadataResponse
    from kproto.net.metadata import ClusterMetadata

    brokers = [MetadataResponse.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=9092 + i, rack=r)
               for i, r in enumerate("abc")]
    topics, next_index = [], 0
    for name, n in (("t1", 6), ("t2", 7), ("t3", 2)):
        parts = [MetadataResponse.MetadataResponsePartition(partition_index=p, leader_id=(p + next_index) % 3,
                                                            replica_nodes=[(p + next_index) % 3],
                                                            isr_nodes=[(p + next_index) % 3])
                 for p in range(n)]
        topics.append(MetadataResponse.MetadataResponseTopic(name=name, partitions=parts))
        next_index += n
    cluster = ClusterMetadata()
    cluster.update(MetadataResponse(brokers=brokers, topics=topics), 0)
    every = ["t1", "t2", "t3"]
    members = [GroupMember("consumer%d" % i, None, Subscription(every, rack_id=r)) for i, r in enumerate("abc")]
    result = {m: sorted(a.partitions()) for m, a in RangePartitionAssignor().assign(cluster, members).items()}
    expected = ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"]
    assert result == {"consumer%d" % i: sorted(parse_tps(e)) for i, e in enumerate(expected)}
