"""Topics the Spark source tests read from: one with a transaction left open, one whose first
offsets the mock's retention dropped."""

from __future__ import annotations

import pytest

from kproto.spark.options import parse_options
from kproto.spark.resolver import OffsetResolver
from kproto.structs import TopicPartition


@pytest.fixture
def retained_topic(mock_cluster):
    """A mock-cluster partition whose first offsets were dropped by the mock's ~5 MiB
    retention: 100 records of 64 KiB; returns (topic, earliest offset)."""
    from confluent_kafka import Producer

    topic = mock_cluster.new_topic(partitions=1)
    producer = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "linger.ms": 0,
                         "batch.num.messages": 1, "log_level": 3})
    for i in range(100):
        producer.produce(topic, value=bytes([i]) * 65536, key=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    opts = parse_options({"kafka.bootstrap.servers": mock_cluster.bootstrap_servers, "subscribe": topic},
                         streaming=False)
    with OffsetResolver(opts) as resolver:
        earliest = resolver.earliest([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    assert 0 < earliest < 100
    return topic, earliest


def open_transaction(broker, topic, n):
    """A confluent-kafka transactional producer with ``n`` records written to partition 0
    in a transaction left open; the caller commits or aborts it."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "log_level": 3,
                         "transactional.id": "kproto-open-{}".format(topic)})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(n):
        producer.produce(topic, key=b"open-%d" % i, value=b"open-value-%d" % i, partition=0)
    assert producer.flush(30) == 0
    return producer
