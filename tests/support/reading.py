"""What the consumer tests share for reading: poll until a number of records arrived, and
compare them with what was produced."""

from __future__ import annotations

import time

from kproto import KafkaConsumer


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
