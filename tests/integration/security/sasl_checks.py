"""What the SASL tests share: the first poll() raising the authentication error, and consuming
everything through an authenticated connection."""

from __future__ import annotations

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.brokers._net import wait_until


def assert_first_poll_raises(consumer: KafkaConsumer, topic: str, error: type, match: str | None = None) -> None:
    """Assigned partition 0 of ``topic``, the consumer's first poll() raises ``error``
    (the login failed); the consumer is closed either way."""
    try:
        consumer.assign([TopicPartition(topic, 0)])
        with pytest.raises(error, match=match):
            consumer.poll(timeout_ms=30_000)
    finally:
        consumer.close()


def consume_all(consumer: KafkaConsumer, expected: int) -> list:
    got: list = []

    def step() -> bool:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(batch)
        return len(got) >= expected

    assert wait_until(step, timeout=60, interval=0), "consumed {} of {}".format(len(got), expected)
    return got
