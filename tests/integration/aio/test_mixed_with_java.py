"""A KIP-848 group of a kproto.aio member and Kafka 4.4's Java consumer (``java_peer``):
partitions split between them, the Java member leaves, the aio member takes everything;
no record is lost."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kproto.aio import AIOKafkaConsumer
from tests.support.aio_harness import run

pytestmark = [pytest.mark.broker_kinds("apache_kafka"), pytest.mark.needs("kip848")]

PARTITIONS = 4


def test_kip848_group_of_an_aio_and_a_java_member(broker, java_peer) -> None:
    topic = broker.new_topic(partitions=PARTITIONS, prefix="aio-java")
    want = {(w.topic, w.partition, w.offset) for w in broker.produce(topic, 80)}
    group = "aio-java-" + uuid.uuid4().hex[:8]
    java = java_peer.start("consumer", broker.bootstrap_servers, group, [topic], name="java", assignor="uniform")

    async def main() -> set:
        ours: set = set()
        async with AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                    group_protocol="consumer", group_remote_assignor="uniform", auto_offset_reset="earliest",
                                    enable_auto_commit=False) as consumer:
            loop = asyncio.get_running_loop()

            async def until(condition, what: str) -> None:
                deadline = loop.time() + 90
                while not condition():
                    assert loop.time() < deadline, what
                    for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                        ours.update((tp.topic, tp.partition, r.offset) for r in records)
                        if records:
                            await consumer.commit({tp: records[-1].offset + 1})

            def split() -> bool:
                mine = {(tp.topic, tp.partition) for tp in consumer.assignment()}
                theirs = set(java.assignment())
                return bool(mine) and bool(theirs) and not (mine & theirs) and \
                    len(mine | theirs) == PARTITIONS

            await until(split, "the partitions to be split between both members")
            await until(lambda: want <= ours | java.processed_set(), "every record to be processed")
            java.stop()  # the leave heartbeat: its partitions move to us
            await until(lambda: len(consumer.assignment()) == PARTITIONS, "every partition to be ours")
            more = {(w.topic, w.partition, w.offset) for w in broker.produce(topic, 20, start_index=80)}
            await until(lambda: more <= ours, "the later records to be processed")
        return ours

    try:
        ours = run(main)
    finally:
        if java.is_alive():
            java.stop()
    assert want <= ours | java.processed_set()
