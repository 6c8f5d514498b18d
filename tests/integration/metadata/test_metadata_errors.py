"""Classic engine: topics a Metadata response names as unauthorized are raised from poll().

Parity with the KIP-848 engine (``tests/integration/kip848/test_engine.py``): the error is raised once
per metadata update, and consumption resumes once the broker stops reporting it.
"""

from __future__ import annotations


import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.support.topic_errors import consume_after_error


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
