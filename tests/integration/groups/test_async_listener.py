"""Rebalance listeners with ``async def`` callbacks (kafka-python's
``AsyncConsumerRebalanceListener``) on the blocking ``KafkaConsumer``, both engines: each
callback runs to completion inside ``poll()``/``close()`` before the rebalance goes on, on
one event loop for the consumer's life; inside a running event loop, a clear error."""

from __future__ import annotations

import asyncio
import time

import pytest

from kproto import AsyncConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition, errors
from tests.support.group_protocols import GROUP_PROTOCOLS

pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka")
ENGINES = pytest.mark.parametrize("group_protocol", GROUP_PROTOCOLS)
CONFIG = dict(auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100)


def group_config(group_protocol: str) -> dict:
    # (KIP-848 groups take their timeouts from the broker: Java refuses them client-side.)
    if group_protocol == "classic":
        return dict(CONFIG, session_timeout_ms=10_000, heartbeat_interval_ms=500)
    return dict(CONFIG)


def group_name(group_protocol: str) -> str:
    return "async-listener-{}-{}".format(group_protocol, time.monotonic_ns())


class CommitOnRevoke(AsyncConsumerRebalanceListener):
    """Commits the consumer's positions of the revoked partitions (Java's documented use of
    onPartitionsRevoked), after awaiting: what an unawaited coroutine would silently skip."""

    def __init__(self) -> None:
        self.consumer: KafkaConsumer | None = None
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []
        self.loops: set[int] = set()

    async def on_partitions_assigned(self, assigned):
        await asyncio.sleep(0.01)
        self.loops.add(id(asyncio.get_running_loop()))
        self.events.append(("assigned", frozenset(assigned)))

    async def on_partitions_revoked(self, revoked):
        await asyncio.sleep(0.01)
        self.loops.add(id(asyncio.get_running_loop()))
        assert self.consumer is not None
        positions = {tp: self.consumer.position(tp) for tp in revoked}
        self.consumer.commit({tp: OffsetAndMetadata(offset) for tp, offset in positions.items()})
        self.events.append(("revoked", frozenset(revoked)))



@ENGINES
def test_async_callbacks_run_to_completion_and_the_revoke_commit_lands(broker, group_protocol):
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 20)
    group = group_name(group_protocol)
    listener = CommitOnRevoke()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             group_protocol=group_protocol, **group_config(group_protocol))
    listener.consumer = consumer
    try:
        consumer.subscribe([topic], listener=listener)
        got = []
        deadline = time.monotonic() + 60
        while len(got) < len(written):
            assert time.monotonic() < deadline, "read {} of {} records".format(len(got), len(written))
            for records in consumer.poll(200).values():
                got.extend(records)
        partitions = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        assert ("assigned", frozenset(partitions)) in listener.events
    finally:
        consumer.close()  # revokes everything: the listener commits
    assert listener.events[-1] == ("revoked", frozenset(partitions))
    assert len(listener.loops) == 1  # one loop for the consumer's life
    # Only the listener committed (no auto-commit): a fresh consumer of the group sees it.
    ends = {}
    for record in written:
        tp = TopicPartition(record.topic, record.partition)
        ends[tp] = max(ends.get(tp, 0), record.offset + 1)
    checker = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                            group_protocol=group_protocol, enable_auto_commit=False)
    try:
        assert {tp: checker.committed(tp) for tp in partitions} == ends
    finally:
        checker.close()


@ENGINES
def test_async_listener_polled_inside_a_running_loop_is_a_clear_error(broker, group_protocol):
    topic = broker.new_topic(partitions=1)
    listener = CommitOnRevoke()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group_name(group_protocol),
                             group_protocol=group_protocol, **group_config(group_protocol))
    listener.consumer = consumer

    async def poll_until_assigned() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            consumer.poll(200)  # blocking, inside the loop: the assignment's callback cannot run
        raise AssertionError("no assignment within 60 s")

    try:
        consumer.subscribe([topic], listener=listener)
        with pytest.raises(errors.KafkaError, match="kproto.aio"):
            asyncio.run(poll_until_assigned())
        assert not listener.events
    finally:
        consumer.close()
