"""Java-parity review of the fetch pipeline: divergences shown against librdkafka's mock cluster.

Each test is a case where Java's consumer (AbstractFetch / FetchCollector, Kafka 4.0) and
kproto behaved differently; both engines share the fetch pipeline, so each runs on both.
Every test gets a fresh mock cluster (fault injection), so injected faults cannot leak.
"""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.support.reading import consume

FETCH_API_KEY = 1
TOPIC_AUTHORIZATION_FAILED = 29
# Every test: both engines, on a fresh mock cluster of its own.
pytestmark = [pytest.mark.parametrize("group_protocol", ["classic", "consumer"]),
              pytest.mark.needs("fault_injection"), pytest.mark.broker_kinds("mock")]


def _consumer(cluster, group_protocol: str, **configs) -> KafkaConsumer:
    configs.setdefault("auto_offset_reset", "earliest")
    configs.setdefault("fetch_max_wait_ms", 50)
    return KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_protocol=group_protocol, **configs)


def _preferred_read_replica(consumer: KafkaConsumer, tp: TopicPartition):
    for name, metric in consumer.metrics(raw=True).items():
        if name.name == "preferred-read-replica" and name.tags.get("topic") == tp.topic \
                and name.tags.get("partition") == str(tp.partition):
            return metric.value()
    return None


def _topic_led_by_broker_1(broker, partitions: int) -> str:
    topic = broker.new_topic(partitions=partitions)
    for p in range(partitions):
        broker.set_partition_leader(topic, p, 1)
    return topic


def _replicated_topic(broker) -> str:
    topic = "replicated"  # a fresh cluster per test: the name is free
    broker.create_topic(topic, partitions=1, replication=3)  # broker 2 is a replica
    broker.set_partition_leader(topic, 0, 1)
    return topic


def _await_redirect(consumer: KafkaConsumer, tp: TopicPartition) -> None:
    """Poll (nothing comes) until the leader's answer named broker 2 as read replica."""
    deadline = time.monotonic() + 20
    while _preferred_read_replica(consumer, tp) != 2 and time.monotonic() < deadline:
        assert consumer.poll(timeout_ms=100) == {}
    assert _preferred_read_replica(consumer, tp) == 2


def test_paused_partition_with_buffered_data_does_not_block_its_node(broker, group_protocol):
    # Java (KAFKA-17182): a node leading a partition with buffered data is skipped, but
    # not for a paused partition: its data stays buffered until resume, and skipping its
    # node would starve every other partition that node leads.
    topic = _topic_led_by_broker_1(broker, 2)
    # The mock answers one batch per partition per Fetch. Partition 0: exactly one
    # 40-record batch (written as one; librdkafka may send the first records alone), so
    # after 4 of its records the rest of its fetch is still buffered. Partition 1: at
    # least four batches, so its records need four Fetches from the same node.
    written = broker.produce_batch(topic, 40, partition=0)
    for i in range(4):
        written += broker.produce(topic, 10, partitions=[1], start_index=40 + 10 * i)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with _consumer(broker, group_protocol, max_poll_records=4) as consumer:
        consumer.assign([tp0, tp1])
        records: list = []
        deadline = time.monotonic() + 30
        while not any(r.partition == 0 for r in records) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        assert any(r.partition == 0 for r in records)
        consumer.pause(tp0)
        expected_p1 = [w for w in written if w.partition == 1]
        records += consume(consumer, len(expected_p1) - sum(r.partition == 1 for r in records), timeout_s=20)
        got_p1 = sorted(r.offset for r in records if r.partition == 1)
        assert got_p1 == [w.offset for w in expected_p1]
        # Resumed, partition 0 goes on from its buffered data without loss or repeat.
        consumer.resume(tp0)
        records += consume(consumer, len(written) - len(records), timeout_s=20)
    got = sorted((r.partition, r.offset) for r in records)
    assert got == [(w.partition, w.offset) for w in written]


def test_preferred_read_replica_missing_from_metadata_falls_back_to_the_leader(broker, group_protocol):
    # Java's selectReadReplica uses the preferred replica only while the metadata knows
    # it as an online replica of the partition; otherwise it refreshes the metadata,
    # forgets the replica and fetches from the leader (the mock leaves a broker that is
    # down out of its Metadata responses).
    topic = _replicated_topic(broker)
    written = broker.produce(topic, 20)
    tp = TopicPartition(topic, 0)
    broker.broker_down(2)
    broker.set_partition_follower(topic, 0, 2)
    # Default metadata_max_age_ms (5 min): the replica's lease must not be what ends the stall.
    with _consumer(broker, group_protocol, client_rack="r1") as consumer:
        consumer.assign([tp])
        _await_redirect(consumer, tp)
        # The leader stops redirecting (as Kafka's does for a replica out of the ISR).
        broker.set_partition_follower(topic, 0, -1)
        records = consume(consumer, len(written), timeout_s=20)
    assert [r.offset for r in records] == [w.offset for w in written]


def test_partition_error_of_an_unassigned_partition_is_ignored(broker, group_protocol):
    # Java's FetchCollector.initialize ignores a fetch (error or not) for a partition
    # without a valid position: here it was unassigned while its Fetch was in flight.
    topic = _topic_led_by_broker_1(broker, 2)
    written = broker.produce(topic, 20, partitions=[1])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with _consumer(broker, group_protocol) as consumer:
        consumer.assign([tp0])
        consumer.poll(timeout_ms=500)  # metadata and positions settle; partition 0 is empty
        # Answers from broker 1 now come 1 s late. Any Fetch already sent reaches the mock
        # (and is answered without the error) during the pause; the next one carries it.
        broker.broker_rtt(1, 1000)
        time.sleep(1.5)
        broker.push_partition_request_errors(topic, 0, FETCH_API_KEY, [TOPIC_AUTHORIZATION_FAILED] * 50)
        broker.start_request_tracking()
        try:
            deadline = time.monotonic() + 20
            while not any(r.api_key == FETCH_API_KEY for r in broker.requests()) and time.monotonic() < deadline:
                consumer.poll(timeout_ms=20)
            assert any(r.api_key == FETCH_API_KEY for r in broker.requests())
        finally:
            broker.stop_request_tracking()
        # The Fetch naming partition 0 is on its way back (1 s late) with the error.
        consumer.assign([tp1])
        broker.broker_rtt(1, 0)
        records = consume(consumer, len(written), timeout_s=20)
    assert [r.offset for r in records] == [w.offset for w in written]


def test_unreachable_preferred_read_replica_is_dropped(broker, group_protocol):
    # Java sends the Fetch to the preferred replica even before it is connected; when the
    # connection fails the request fails, and handleFetchFailure forgets the replica, so
    # the next Fetch goes to the leader. Here the replica's broker stops while the
    # consumer's metadata (5 minutes old at most) still lists it.
    topic = _replicated_topic(broker)
    written = broker.produce(topic, 20)
    tp = TopicPartition(topic, 0)
    with _consumer(broker, group_protocol, client_rack="r1") as consumer:
        consumer.assign([tp])
        records = consume(consumer, len(written), timeout_s=20)
        broker.broker_down(2)
        broker.set_partition_follower(topic, 0, 2)
        _await_redirect(consumer, tp)
        broker.set_partition_follower(topic, 0, -1)
        written += broker.produce(topic, 20, start_index=20)
        records += consume(consumer, 20, timeout_s=20)
    assert [r.offset for r in records] == [w.offset for w in written]
