"""Helpers shared by the assignor tests: Java's test fixtures (partition layouts over racks,
subscriptions by consumer index) rebuilt in Python so Java's scenarios read the same."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from kproto.consumer.classic.assignors.abstract import PartitionInfo
from kproto.consumer.classic.consumer_protocol import Subscription
from kproto.structs import TopicPartition

ALL_RACKS = ["a", "b", "c", "d", "e", "f"]


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def parse_tps(text: str) -> List[TopicPartition]:
    """``"t1-0, t2-3"`` -> TopicPartitions (Java's test notation)."""
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        topic, _, p = item.rpartition("-")
        out.append(TopicPartition(topic, int(p)))
    return out


def racks(n: int) -> List[Optional[str]]:
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> List[Optional[str]]:
    return [None] * n


def partition_infos(topic: str, n: int, replication_factor: int, broker_racks: Sequence[Optional[str]],
                    next_node_index: int = 0) -> List[PartitionInfo]:
    """Partition i's replicas are brokers (i + j + next_node_index) % brokers, j < rf."""
    nb = len(broker_racks)
    return [PartitionInfo(topic, i, tuple(broker_racks[(i + j + next_node_index) % nb]
                                          for j in range(replication_factor))) for i in range(n)]


def partition_infos_by_rack_count(topic: str, n: int, replication_factor: int, num_broker_racks: int,
                                  next_node_index: int = 0) -> List[PartitionInfo]:
    num_brokers = replication_factor if num_broker_racks <= 0 else num_broker_racks * replication_factor
    broker_racks = [None if num_broker_racks <= 0 else ALL_RACKS[i % num_broker_racks] for i in range(num_brokers)]
    return partition_infos(topic, n, replication_factor, broker_racks, next_node_index)


def partitions_per_topic(num_partitions: Dict[str, int], replication_factor: int,
                         broker_racks: Sequence[Optional[str]]) -> Dict[str, List[PartitionInfo]]:
    result = {}
    next_index = 0
    for topic, n in num_partitions.items():  # insertion order, like Java's mkMap
        result[topic] = partition_infos(topic, n, replication_factor, broker_racks, next_index)
        next_index += n
    return result


def verify_rack_assignment(assignor, num_partitions: Dict[str, int], replication_factor: int,
                           broker_racks, consumer_racks, consumer_topics, expected: List[str],
                           num_mismatched: int, owned: Optional[List[str]] = None) -> None:
    """Java's ``AbstractPartitionAssignorTest.verifyRackAssignment``."""
    consumers = ["consumer{}".format(i) for i in range(len(consumer_racks))]
    ppt = partitions_per_topic(num_partitions, replication_factor, broker_racks)
    subs = {}
    for i, c in enumerate(consumers):
        owned_i = parse_tps(owned[i]) if owned and i < len(owned) else []
        subs[c] = Subscription(list(consumer_topics[i]), None, owned_i, -1, consumer_racks[i])
    result = assignor.assign_partitions(ppt, subs)
    assert {c: sorted(v) for c, v in result.items()} == {c: sorted(parse_tps(e)) for c, e in zip(consumers, expected)}
    if num_mismatched >= 0:
        mismatched = []
        for i, c in enumerate(consumers):
            rack = consumer_racks[i]
            if rack is None:
                continue
            for p in result[c]:
                info = ppt[p.topic][p.partition]
                if rack not in info.replica_racks:
                    mismatched.append(p)
        assert len(mismatched) == num_mismatched, mismatched


def is_fully_balanced(assignment: Dict[str, List[TopicPartition]]) -> bool:
    sizes = [len(v) for v in assignment.values()]
    return not sizes or max(sizes) - min(sizes) <= 1


def verify_validity_and_balance(subscriptions: Dict[str, Subscription],
                                assignment: Dict[str, List[TopicPartition]]) -> None:
    """Java's ``verifyValidityAndBalance``: members only get subscribed topics, no partition
    twice, and a member 2+ partitions behind another shares no topic with it."""
    assert set(subscriptions) == set(assignment)
    members = sorted(assignment)
    for i, c in enumerate(members):
        parts = assignment[c]
        assert all(p.topic in subscriptions[c].topics for p in parts), (c, parts)
        for other in members[i + 1:]:
            others = assignment[other]
            assert not set(parts) & set(others), (c, other)
            if abs(len(parts) - len(others)) <= 1:
                continue
            assert not {p.topic for p in parts} & {p.topic for p in others}, (c, other, assignment)


class StickyFixture:
    """Java's AbstractStickyAssignorTest set-up for one rack configuration."""

    def __init__(self, assignor, rack_config: str = "NO_RACKS") -> None:
        self.assignor = assignor
        self.next_partition_index = 0
        if rack_config == "NO_RACKS":  # tests that never call initializeRacks
            self.rf, self.num_broker_racks, self.has_consumer_rack = 2, 0, False
        else:
            self.rf = 3
            self.num_broker_racks = 3 if rack_config != "NO_BROKER_RACK" else 0
            self.has_consumer_rack = rack_config != "NO_CONSUMER_RACK"
            assignor.prefer_rack_aware_logic = True

    def infos(self, topic: str, n: int) -> List[PartitionInfo]:
        index = self.next_partition_index
        self.next_partition_index += 1
        return partition_infos_by_rack_count(topic, n, self.rf, self.num_broker_racks, index)

    def rack(self, index: int) -> Optional[str]:
        num = self.num_broker_racks if self.num_broker_racks > 0 else len(ALL_RACKS)
        return ALL_RACKS[index % num] if self.has_consumer_rack else None

    def sub(self, topics, index: int) -> Subscription:
        return Subscription(list(topics), None, [], -1, self.rack(index))

    def sub_v2(self, topics, partitions, generation: int, index: int) -> Subscription:
        """buildSubscriptionV2Above: eager sticky sends user data too; neither sends a rack."""
        from kproto.consumer.classic.assignors.sticky import StickyPartitionAssignor
        from kproto.consumer.classic.consumer_protocol import encode_sticky_user_data

        user_data = (encode_sticky_user_data(partitions, generation)
                     if isinstance(self.assignor, StickyPartitionAssignor) else None)
        return Subscription(list(topics), user_data, list(partitions), generation, None)
