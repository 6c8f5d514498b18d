"""``KafkaConsumer.group_metadata()`` in both engines: kafka-python 3's
``ConsumerGroupMetadata`` (attributes, its field order, ``state``) through a group's life."""

from __future__ import annotations

import time

import pytest

from kproto import ConsumerGroupMetadata, KafkaConsumer, structs
from tests.support.group_protocols import GROUP_PROTOCOLS

pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka")


@pytest.mark.parametrize("group_protocol", GROUP_PROTOCOLS)
def test_group_metadata_through_join_and_leave(broker, group_protocol):
    kafka_structs = pytest.importorskip("kafka.structs")
    topic = broker.new_topic(partitions=1)
    group = "metadata-{}-{}".format(group_protocol, time.monotonic_ns())
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             group_protocol=group_protocol, enable_auto_commit=False)
    try:
        before = consumer.group_metadata()
        assert before == ConsumerGroupMetadata(group, -1, "", None, structs.UNJOINED)
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        # Stable with the partition: a classic leader whose metadata did not list the new
        # topic yet assigns nothing (as Java's), and the group rebalances once it does.
        while consumer.group_metadata().state != structs.STABLE or not consumer.assignment():
            assert time.monotonic() < deadline, "not stable with the partition: {} {}".format(
                consumer.group_metadata(), consumer.assignment())
            consumer.poll(100)
        joined = consumer.group_metadata()
        assert joined.group_id == group and joined.member_id and joined.generation_id >= 1
        # kafka-python's producer takes its own class: the fields convert in order.
        theirs = kafka_structs.ConsumerGroupMetadata(*joined)
        assert (theirs.group_id, theirs.generation_id, theirs.member_id, theirs.state) == (
            group, joined.generation_id, joined.member_id, kafka_structs.MemberState.STABLE)
        consumer.unsubscribe()
        deadline = time.monotonic() + 30
        while consumer.group_metadata().state != structs.UNJOINED:
            assert time.monotonic() < deadline, "still in the group: {}".format(consumer.group_metadata())
            consumer.poll(100)
    finally:
        consumer.close()
