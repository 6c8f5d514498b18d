"""A Kafka 4.4 broker killed (SIGKILL) and restarted mid-read, on the three-node cluster.

Topics have three replicas; the seeding producer waits for acks=all, so every
acknowledged record is on every in-sync replica and survives one node's death. In each
mode the consumer reads a first round, one node is killed, a second round is written (the
producer waits for the new leaders) and read, the node comes back, a third round is
written and read: every record exactly once.

- assign mode: the killed node leads a partition the consumer reads;
- a classic group member and a KIP-848 member: the killed node is the group's coordinator
  (and leads partitions): the member finds the new coordinator and goes on committing. A
  record read twice is allowed only where a commit was refused meanwhile and the record
  lies at or past the last commit Kafka acknowledged (what a member resuming from the
  commit reads again); none is expected.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest

from kproto import KafkaConsumer, TopicPartition
from kproto.errors import KafkaError
from kproto.messages import FindCoordinatorRequest
from tests.brokers import raw

DEADLINE_S = 120


class Reader:
    """Polls one consumer, counting each (partition, offset); commits after each poll
    when ``commit`` (a refused commit is counted, not raised)."""

    def __init__(self, consumer: KafkaConsumer, commit: bool) -> None:
        self.consumer = consumer
        self.commit = commit
        self.seen: Counter = Counter()
        self.unexplained: list[tuple[int, int]] = []
        self.acknowledged: dict[int, int] = {}  # partition -> last commit Kafka accepted
        self.refused = 0
        self.accepted = 0  # commits Kafka acknowledged
        self._consumed: dict[int, int] = {}

    def read(self, count: int, timeout_s: float = DEADLINE_S) -> None:
        """Poll until ``count`` distinct records were seen in all."""
        deadline = time.monotonic() + timeout_s
        while len(self.seen) < count:
            assert time.monotonic() < deadline, "read {} of {}".format(len(self.seen), count)
            polled = self.consumer.poll(timeout_ms=200)
            for tp, records in polled.items():
                for r in records:
                    key = (tp.partition, r.offset)
                    if key in self.seen and not (
                            self.refused and r.offset >= self.acknowledged.get(tp.partition, 0)):
                        self.unexplained.append(key)
                    self.seen[key] += 1
                    self._consumed[tp.partition] = r.offset + 1
            if self.commit and polled:
                try:
                    self.consumer.commit(timeout_ms=15_000)
                    self.acknowledged.update(self._consumed)
                    self.accepted += 1
                except KafkaError:
                    self.refused += 1


def node_of(cluster, address: tuple[str, int]) -> int:
    return cluster.ports.index(address[1]) + 1


def coordinator_of(cluster, group: str) -> int:
    for node in cluster.addresses:
        try:
            answer = raw.roundtrip(node, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
        except OSError:
            continue  # a node that is down
        (coordinator,) = answer.coordinators
        if coordinator.error_code == 0:
            return coordinator.node_id
    raise AssertionError("no node names the coordinator of {}".format(group))


def read_through_a_kill(cluster, reader: Reader, topic: str, victim, while_down=None) -> None:
    """Round one read; ``victim()`` (the node id to kill, chosen once the consumer reads)
    killed; round two written and read (then ``while_down(node_id)``); the node restarted;
    round three written and read. Exactly once, and the positions end at the log ends."""
    written = cluster.produce(topic, 30)
    reader.read(len(written))
    node_id = victim()
    cluster.kill(node_id)
    try:
        written += cluster.produce(topic, 30, start_index=100)
        reader.read(len(written))
        if while_down is not None:
            while_down(node_id)
    finally:
        cluster.restart(node_id)
    written += cluster.produce(topic, 30, start_index=200)
    reader.read(len(written))
    assert reader.consumer.poll(timeout_ms=300) == {}
    assert set(reader.seen) == {(w.partition, w.offset) for w in written}
    assert reader.unexplained == []
    if not reader.refused:
        assert set(reader.seen.values()) == {1}
    for p in range(3):
        end = max(w.offset for w in written if w.partition == p) + 1
        assert reader.consumer.position(TopicPartition(topic, p)) == end


def test_assigned_reader_outlives_a_partition_leader_killed(apache_kafka_cluster):
    cluster = apache_kafka_cluster
    topic = cluster.new_topic(partitions=3)
    with KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                       fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        read_through_a_kill(cluster, Reader(consumer, commit=False), topic, lambda: node_of(
            cluster, raw.partition_leader(cluster.bootstrap_servers, topic, 0)))


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_group_member_outlives_its_coordinator_killed(apache_kafka_cluster, group_protocol):
    cluster = apache_kafka_cluster
    topic = cluster.new_topic(partitions=3)
    group = "g-" + uuid.uuid4().hex
    with KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                       group_protocol=group_protocol, auto_offset_reset="earliest",
                       enable_auto_commit=False, fetch_max_wait_ms=100) as consumer:
        reader = Reader(consumer, commit=True)
        accepted_before_kill: list[int] = []

        def coordinator() -> int:
            accepted_before_kill.append(reader.accepted)
            return coordinator_of(cluster, group)

        def moved(killed: int) -> None:
            # Another node coordinates the group now, and it accepted the member's commits.
            assert coordinator_of(cluster, group) != killed
            assert reader.accepted > accepted_before_kill[0]

        read_through_a_kill(cluster, reader, topic, coordinator, moved)
        assert len(consumer.assignment()) == 3
        consumer.commit()
        assert {p: consumer.committed(TopicPartition(topic, p)) for p in range(3)} == {
            p: consumer.position(TopicPartition(topic, p)) for p in range(3)}
