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
