"""KafkaConsumer.current_lag (Java's currentLag) in both engines, assign mode, on real brokers."""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer, TopicPartition, errors

pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka")


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_current_lag_is_the_fetched_end_minus_the_position(broker, group_protocol):
    topic = broker.new_topic(partitions=2, prefix="lag")
    written = broker.produce(topic, 40, partitions=[0])
    tp, other = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol=group_protocol,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        consumer.assign([tp])
        assert consumer.current_lag(tp) is None  # no fetch has reported the end yet
        with pytest.raises(errors.IllegalStateError):
            consumer.current_lag(other)
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < 15 and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout_ms=200, max_records=15 - len(got)).get(tp, []))
        assert len(got) == 15
        # Java's definition, from what the fetch reported: high watermark - position.
        assert consumer.current_lag(tp) == consumer.highwater(tp) - consumer.position(tp)
        assert consumer.current_lag(tp) == written[-1].offset + 1 - (got[-1].offset + 1)
        while len(got) < len(written) and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout_ms=200).get(tp, []))
        assert len(got) == len(written)
        assert consumer.current_lag(tp) == 0
    finally:
        consumer.close()
