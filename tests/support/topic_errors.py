"""Reading through a topic's authorization error: poll() raises it until the broker clears it,
then everything arrives."""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer
from kproto.errors import TopicAuthorizationFailedError


# The loops below end on a condition; the bound only turns a hang into a failure.
DEADLINE_S = 60.0


def consume_after_error(consumer: KafkaConsumer, broker, topic: str, written) -> None:
    """poll() raises the topic's authorization error until it is cleared; then every written record arrives."""
    deadline = time.monotonic() + DEADLINE_S
    with pytest.raises(TopicAuthorizationFailedError, match=topic):
        while True:
            assert time.monotonic() < deadline, "the metadata error was never raised"
            consumer.poll(timeout_ms=100)
    broker.set_topic_error(topic, 0)
    seen: set = set()
    while len(seen) < len(written):
        assert time.monotonic() < deadline, "consumption did not resume; seen {}".format(len(seen))
        try:
            records = consumer.poll(timeout_ms=100)
        except TopicAuthorizationFailedError:
            continue  # a metadata update from before the error was cleared
        seen.update((tp.partition, r.offset) for tp, batch in records.items() for r in batch)
    assert seen == {(r.partition, r.offset) for r in written}
