"""Rack-aware fetching (KIP-392) on the three-node Kafka 4.4 cluster, read from kproto's wire trace.

The session cluster puts node ``i`` in rack ``RACKS[i - 1]`` with Kafka's
``RackAwareReplicaSelector``. A consumer whose ``client_rack`` is a follower's rack sends
its first Fetch to the partition's leader, which answers with no records and names the
follower as ``preferred_read_replica`` (Java's ``ReplicaManager.findPreferredReadReplica``);
from then on it fetches from that follower (Java's ``AbstractFetch.selectReadReplica``) and
reads every record exactly once, until the follower's lease (``metadata_max_age_ms``)
runs out and it asks the leader again. Without ``client_rack`` it reads from the leader
only. Both engines (``group_protocol``), in assign mode and as a group member.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.brokers import raw
from tests.integration.kafka44.test_broker_kill import node_of
from tests.support.reading import assert_same, consume
from tests.wire_log import WireLog

RECORDS = 30


FINAL_EPOCH = -1  # Java's FetchMetadata.FINAL_EPOCH
SENT = -2  # in place of preferred_read_replica: the entry is a request


def _fetches(wire: WireLog) -> list[tuple[int, int, int]]:
    """The one consumer's Fetches in trace order: (index in the trace, node, SENT) for a
    request, (index, node, preferred_read_replica) for each partition of an answer."""
    out = []
    for i, e in enumerate(wire.entries()):
        if e.api_name != "Fetch":
            continue
        if e.direction == ">>":
            if e.tree["session_epoch"] == FINAL_EPOCH:
                continue  # closing a fetch session: sent to every node with one on close
            out.append((i, int(e.node), SENT))
        else:
            out.extend((i, int(e.node), p["preferred_read_replica"])
                       for t in e.tree["responses"] for p in t["partitions"])
    return out


def _seed(cluster) -> tuple[str, list, int]:
    """A new one-partition topic (three replicas) with ``RECORDS`` records: the topic, the
    records written, and the partition's leader (asked once the producer saw it lead)."""
    topic = cluster.new_topic(partitions=1)
    written = cluster.produce(topic, RECORDS)
    return topic, written, node_of(cluster, raw.partition_leader(cluster.bootstrap_servers, topic, 0))


def _read(topic: str, written: list, mode: str, **configs) -> WireLog:
    """Read every record of ``written`` (each exactly once); the wire trace."""
    with WireLog() as wire:
        if mode == "group":
            consumer = KafkaConsumer(topic, group_id="g-" + uuid.uuid4().hex, **configs)
        else:
            consumer = KafkaConsumer(**configs)
            consumer.assign([TopicPartition(topic, 0)])
        with consumer:
            records = consume(consumer, RECORDS, timeout_s=60)
            assert consumer.poll(timeout_ms=300) == {}
    assert_same(records, written)
    return wire


@pytest.mark.parametrize("mode", ["assign", "group"])
@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_consumer_fetches_from_the_follower_in_its_rack(apache_kafka_cluster, group_protocol, mode):
    cluster = apache_kafka_cluster
    topic, written, leader = _seed(cluster)
    follower = leader % len(cluster.nodes) + 1
    wire = _read(topic, written, mode, bootstrap_servers=cluster.bootstrap_servers,
                 group_protocol=group_protocol, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                 client_rack=cluster.RACKS[follower - 1])
    fetches = _fetches(wire)
    redirects = [i for i, node, replica in fetches if node == leader and replica == follower]
    assert redirects, fetches  # the leader named the follower in the consumer's rack
    first = redirects[0]
    assert {node for i, node, _ in fetches if i < first} == {leader}
    after = [(node, replica) for i, node, replica in fetches if i > first]
    # Every Fetch after the redirect went to the follower, which names no other replica.
    assert after and {node for node, _ in after} == {follower}, fetches
    assert {replica for _, replica in after} <= {-1, SENT}


def test_consumer_without_a_rack_reads_from_the_leader(apache_kafka_cluster):
    cluster = apache_kafka_cluster
    topic, written, leader = _seed(cluster)
    wire = _read(topic, written, "assign", bootstrap_servers=cluster.bootstrap_servers,
                 auto_offset_reset="earliest", fetch_max_wait_ms=100)
    fetches = _fetches(wire)
    assert fetches and {node for _, node, _ in fetches} == {leader}
    assert {replica for _, _, replica in fetches} == {-1, SENT}


def test_preferred_read_replica_expires_after_the_metadata_max_age(apache_kafka_cluster):
    """The follower is a lease of ``metadata_max_age_ms`` (Java's ``FetchCollector``): once it
    ran out the consumer asks the leader again, which names the follower again."""
    cluster = apache_kafka_cluster
    topic, written, leader = _seed(cluster)
    follower = leader % len(cluster.nodes) + 1

    def redirects(wire: WireLog) -> list[int]:
        return [i for i, node, replica in _fetches(wire) if node == leader and replica == follower]

    with WireLog() as wire:
        with KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                           fetch_max_wait_ms=100, metadata_max_age_ms=2000,
                           client_rack=cluster.RACKS[follower - 1]) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            records = consume(consumer, RECORDS, timeout_s=60)
            deadline = time.monotonic() + 60
            while len(redirects(wire)) < 2:
                assert time.monotonic() < deadline, _fetches(wire)
                assert consumer.poll(timeout_ms=200) == {}
            written += cluster.produce(topic, RECORDS, start_index=100)
            records += consume(consumer, RECORDS, timeout_s=60)
            assert consumer.poll(timeout_ms=300) == {}
    assert_same(records, written)
    fetches = _fetches(wire)
    # Each lease: the follower until it ran out, then the leader once, naming the follower
    # again. The lease runs on while the second round is written and read, which a loaded
    # machine may take longer than: there may be more than two.
    marks = redirects(wire)
    assert len(marks) >= 2
    for first, second in zip(marks, marks[1:]):
        between = [node for i, node, replica in fetches if first < i < second and replica == SENT]
        assert between[-1] == leader and follower in between and set(between) == {leader, follower}
    # Then the follower to the end; only a lease running out as the consumer closed leaves a
    # last Fetch to the leader, unanswered.
    after = [node for i, node, replica in fetches if i > marks[-1] and replica == SENT]
    assert set(after[:-1]) <= {follower}, fetches
