"""Classic engine: topics a Metadata response names as unauthorized are raised from poll().

Parity with the KIP-848 engine (``tests/integration/kip848/test_engine.py``): the error is raised once
per metadata update, and consumption resumes once the broker stops reporting it.
"""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer, TopicPartition
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


@pytest.mark.needs("fault_injection")
@pytest.mark.parametrize("mode", ["subscribe", "assign"])
def test_unauthorized_topic_is_raised_from_poll_then_consumption_resumes(broker, mode) -> None:
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 10)
    broker.set_topic_error(topic, 29)  # TOPIC_AUTHORIZATION_FAILED in Metadata responses
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                             auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
                             metadata_max_age_ms=500, session_timeout_ms=6000, heartbeat_interval_ms=1000)
    try:
        if mode == "subscribe":
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consume_after_error(consumer, broker, topic, written)
    finally:
        consumer.close()
