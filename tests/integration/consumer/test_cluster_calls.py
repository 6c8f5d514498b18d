"""topics() and bootstrap() in both engines, on real brokers and on a port nobody serves."""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from tests.brokers._net import closed_port

pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka")
ENGINES = ["classic", "consumer"]


@pytest.mark.parametrize("group_protocol", ENGINES)
def test_topics_lists_topics_the_consumer_never_asked_about(broker, group_protocol):
    mine = broker.new_topic(partitions=1, prefix="mine")
    other = broker.new_topic(partitions=3, prefix="other")
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol=group_protocol)
    try:
        consumer.assign([TopicPartition(mine, 0)])
        assert {mine, other} <= consumer.topics()
        assert consumer.partitions_for_topic(other) == {0, 1, 2}
    finally:
        consumer.close()


@pytest.mark.parametrize("group_protocol", ENGINES)
def test_bootstrap_waits_for_cluster_metadata(broker, group_protocol):
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol=group_protocol)
    try:
        consumer.bootstrap(timeout_ms=20_000)
        assert consumer.bootstrap_connected()
        consumer.bootstrap(timeout_ms=20_000, refresh=True)
        assert consumer.bootstrap_connected()
    finally:
        consumer.close()


@pytest.mark.parametrize("group_protocol", ENGINES)
def test_bootstrap_times_out_when_no_broker_answers(group_protocol):
    with closed_port() as port:
        consumer = KafkaConsumer(bootstrap_servers="127.0.0.1:{}".format(port), group_protocol=group_protocol,
                                 reconnect_backoff_max_ms=100)
        try:
            started = time.monotonic()
            with pytest.raises(errors.KafkaTimeoutError):
                consumer.bootstrap(timeout_ms=500)
            assert time.monotonic() - started < 20  # it gave up, it did not hang
            assert not consumer.bootstrap_connected()
        finally:
            consumer.close()


@pytest.mark.parametrize("group_protocol", ENGINES)
def test_partitions_for_a_topic_created_after_the_consumer_first_asked(broker, group_protocol):
    name = "later-{}-{}".format(group_protocol, time.monotonic_ns())
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol=group_protocol,
                             allow_auto_create_topics=False)
    try:
        assert consumer.partitions_for_topic(name) is None  # not there yet
        broker.create_topic(name, 3)
        # The topic is now "of interest" with no metadata: a new lookup must ask again.
        deadline = time.monotonic() + 20
        found = None
        while found is None and time.monotonic() < deadline:
            found = consumer.partitions_for_topic(name)
        assert found == {0, 1, 2}
    finally:
        consumer.close()
