"""kproto.aio in a classic group when its coordinator's node dies (the three-node Kafka 4.4
cluster, ``apache_kafka_cluster``): the member finds the new coordinator, keeps its
generation or rejoins, and every record is read; committed offsets survive the move."""

from __future__ import annotations

import asyncio

from kproto.aio import AIOKafkaConsumer, TopicPartition
from kproto.errors import CommitFailedError, RebalanceInProgressError
from tests.support.aio_harness import DEADLINE_S, run


def test_the_coordinators_node_is_killed_and_nothing_is_lost(apache_kafka_cluster) -> None:
    cluster = apache_kafka_cluster
    topic = cluster.new_topic(partitions=3, prefix="aio-move")
    written = {(r.partition, r.offset) for r in cluster.produce(topic, 30)}
    group = "g-" + topic
    killed = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S * 3
        seen: set = set()
        async with AIOKafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=6000, heartbeat_interval_ms=300) as consumer:
            async def step() -> None:
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    seen.update((tp.partition, r.offset) for r in records)
                    if records:
                        try:
                            await consumer.commit({tp: records[-1].offset + 1})
                        except (CommitFailedError, RebalanceInProgressError):
                            pass  # the member rejoins after the move: the final commit covers it
            while not written <= seen:
                assert loop.time() < deadline, "read {} of {}".format(len(seen), len(written))
                await step()
            coordinators = consumer._membership._coordinator
            before = coordinators.coordinator.broker_id
            killed.append(before)
            cluster.kill(before)
            more = {(r.partition, r.offset) for r in cluster.produce(topic, 30, start_index=30)}
            while not more <= seen or coordinators.coordinator is None \
                    or coordinators.coordinator.broker_id == before:
                assert loop.time() < deadline, "read {} of {} after the kill".format(
                    len(seen & more), len(more))
                await step()
            await consumer.commit()
            for partition in range(3):
                ends = [o for p, o in seen if p == partition]
                assert await consumer.committed(TopicPartition(topic, partition)) == max(ends) + 1

    try:
        run(main)
    finally:
        for node_id in killed:
            cluster.restart(node_id)
