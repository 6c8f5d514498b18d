"""The worker's pool of task consumers (Spark's consumer cache) on real brokers, without Spark.

``read_range`` borrows its consumer from ``kproto.spark.consumer_pool.POOL`` and returns
it when the range is read: the partition's next range reads on it, also after an early
stop; a failed read closes it. The pool's own rules (idle timeout, capacity) are checked
on a pool of its own, its clock a counter the test moves.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow", reason="kproto.spark reads into PyArrow: pip install 'kproto[spark]'")

from kproto import KafkaConsumer, TopicPartition  # noqa: E402
from kproto.errors import IllegalStateError  # noqa: E402
from kproto.spark.consumer_pool import POOL, InternalKafkaConsumerPool  # noqa: E402
from kproto.spark.planning import OffsetRange  # noqa: E402
from kproto.spark.reader import _pool_key, read_range, task_consumer_config  # noqa: E402
from kproto.spark.resolver import DataLossError  # noqa: E402
from tests.integration.spark.test_reader import options, rows  # noqa: E402

pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka")


def offsets(batches):
    return [row["offset"] for row in rows(batches)]


def key_of(opts, topic):
    return _pool_key(task_consumer_config(opts), TopicPartition(topic, 0))


def test_a_partitions_next_ranges_read_on_the_pooled_consumer(broker):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 300)
    # Small fetches: the first range's end falls inside a fetched batch, whose rest stays
    # buffered for the next range.
    opts = options(broker, topic, **{"kafka.max.partition.fetch.bytes": "4096"})
    key = key_of(opts, topic)
    created, reused = POOL.created, POOL.reused
    assert offsets(read_range(opts, OffsetRange(topic, 0, 0, 101))) == list(range(101))
    assert POOL.idle_count(key) == 1
    assert offsets(read_range(opts, OffsetRange(topic, 0, 101, 250))) == list(range(101, 250))
    # Backwards (a task rerun): the pooled consumer seeks.
    assert offsets(read_range(opts, OffsetRange(topic, 0, 50, 60))) == list(range(50, 60))
    # Spark stops reading early (a LIMIT): the consumer goes back to the pool all the same.
    partial = read_range(opts, OffsetRange(topic, 0, 0, 300), batch_rows=10)
    assert offsets([next(partial)]) == list(range(10))
    partial.close()
    assert offsets(read_range(opts, OffsetRange(topic, 0, 250, 300))) == list(range(250, 300))
    assert (POOL.created - created, POOL.reused - reused) == (1, 4)
    assert POOL.idle_count(key) == 1
    assert len(written) == 300


def test_a_failed_read_closes_its_consumer_and_the_idle_ones_of_its_key(broker):
    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 20)
    opts = options(broker, topic, **{"kafkaConsumer.pollTimeoutMs": "1000"})
    key = key_of(opts, topic)
    assert offsets(read_range(opts, OffsetRange(topic, 0, 0, 10))) == list(range(10))
    assert POOL.idle_count(key) == 1
    created = POOL.created
    with pytest.raises(DataLossError, match="now ends at offset 20, below the planned end 25"):
        list(read_range(opts, OffsetRange(topic, 0, 10, 25)))
    assert POOL.idle_count(key) == 0
    # The next task starts on a fresh consumer.
    assert offsets(read_range(opts, OffsetRange(topic, 0, 10, 20))) == list(range(10, 20))
    assert POOL.created - created == 1


def test_idle_consumers_expire_and_the_longest_idle_go_beyond_capacity(broker):
    now = [0.0]
    pool: InternalKafkaConsumerPool[KafkaConsumer] = InternalKafkaConsumerPool(
        capacity=2, idle_timeout_ms=60_000, clock=lambda: now[0])

    def new() -> KafkaConsumer:
        return KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)

    a, b, c = pool.borrow("a", new), pool.borrow("b", new), pool.borrow("c", new)
    for key, consumer in (("a", a), ("b", b), ("c", c)):
        pool.release(key, consumer)
        now[0] += 1
    # Three idle, capacity two: the longest idle (a) was closed.
    assert pool.idle_count() == 2 and pool.idle_count("a") == 0
    with pytest.raises(IllegalStateError):
        a.poll(timeout_ms=0)
    assert pool.borrow("b", new) is b
    pool.release("b", b)
    now[0] += 61  # c idle for 62 s, b for 61 s: both past the timeout
    fresh = pool.borrow("c", new)
    assert fresh is not c and pool.idle_count() == 0
    for closed in (b, c):
        with pytest.raises(IllegalStateError):
            closed.poll(timeout_ms=0)
    pool.release("c", fresh)
    pool.close()
    assert pool.idle_count() == 0
    assert (pool.created, pool.reused) == (4, 1)
