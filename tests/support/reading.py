"""What the consumer tests share for reading: poll until a number of records arrived, and
compare them with what was produced."""

from __future__ import annotations

import time

from kproto import KafkaConsumer, TopicPartition


def consume(consumer: KafkaConsumer, count: int, timeout_s: float = 30.0, **poll_kw) -> list:
    """Poll until ``count`` records arrived (or the timeout: the caller's assert fails)."""
    records: list = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200, **poll_kw).values():
            records.extend(batch)
    return records


def assert_same(records, written) -> None:
    """Every written record exactly once, with identical fields."""
    got = sorted(records, key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset) for r in got] == [(w.partition, w.offset) for w in written]
    for r, w in zip(got, written):
        assert r.topic == w.topic
        assert r.key == w.key
        assert r.value == w.value
        assert r.timestamp == w.timestamp
        assert r.timestamp_type == 0
        assert list(r.headers) == list(w.headers)
        assert r.serialized_key_size == (-1 if w.key is None else len(w.key))
        assert r.serialized_value_size == (-1 if w.value is None else len(w.value))


def read_while_one_partition_idles(broker, consumer: KafkaConsumer, topic: str, rounds: int = 3,
                                   between=None) -> None:
    """Read a 3-partition topic; then partitions 0 and 1 get ``rounds`` more batches of
    records while 2 stays idle (``between(round)`` runs before each); every record must
    come exactly once, and the positions end at the log ends."""
    written = broker.produce(topic, 30)
    tps = [TopicPartition(topic, p) for p in range(3)]
    consumer.assign(tps)
    got = consume(consumer, len(written))
    for n in range(rounds):
        if between is not None:
            between(n)
        more = broker.produce(topic, 8, partitions=[0, 1], start_index=1000 + 100 * n)
        written = sorted(written + more, key=lambda w: (w.partition, w.offset))
        got += consume(consumer, len(more))
    assert_same(got, written)
    assert consumer.poll(timeout_ms=300) == {}
    for tp in tps:
        assert consumer.position(tp) == max(w.offset for w in written if w.partition == tp.partition) + 1
