"""A consumer reading a partition led by broker 1 (the leader-change tests against the mock
cluster)."""

from __future__ import annotations

import contextlib

from kproto import KafkaConsumer, TopicPartition
from tests.support.reading import consume


@contextlib.contextmanager
def reading_from_broker_1(cluster, group_protocol: str):
    """A one-partition topic led by broker 1 with 10 records, and a consumer assigned to it
    that has read them: yields ``(consumer, tp, written, records)`` for a test to go on."""
    topic = cluster.new_topic(partitions=1)
    cluster.set_partition_leader(topic, 0, 1)
    written = cluster.produce(topic, 10)
    tp = TopicPartition(topic, 0)
    with KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_protocol=group_protocol,
                       auto_offset_reset="earliest", fetch_max_wait_ms=50) as consumer:
        consumer.assign([tp])
        yield consumer, tp, written, consume(consumer, len(written), timeout_s=20)
