"""aiokafka's assignor classes in kproto.aio, as aiokafka's users pass them
(``partition_assignment_strategy=(RoundRobinPartitionAssignor,)``), in a classic group with
aiokafka members passing the same class: aiokafka's own assignors run as kproto's of the same
name, an application's own aiokafka assignor runs as it is; whichever member leads, the
split is the same."""

from __future__ import annotations

import asyncio

import pytest

from kproto.aio import AIOKafkaConsumer
from tests.support.aio_harness import DEADLINE_S, run

aiokafka = pytest.importorskip("aiokafka")

# librdkafka's mock cluster aborts the process on one of aiokafka's requests.
pytestmark = [pytest.mark.broker, pytest.mark.needs("classic_groups"), pytest.mark.broker_kinds("apache_kafka")]

SESSION_MS = 6000
HEARTBEAT_MS = 300
PARTITIONS = 4


def _strategy(kind: str):
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    from tests.support.aiokafka_assignors import Mirror

    return {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor, "own": Mirror}[kind]


#: The split of 4 partitions between 2 members, as sets of partition numbers (None: any 2 + 2).
SPLITS = {"range": {frozenset({0, 1}), frozenset({2, 3})}, "roundrobin": {frozenset({0, 2}), frozenset({1, 3})},
          "sticky": None, "own": {frozenset({0, 3}), frozenset({1, 2})}}


@pytest.mark.parametrize("kind", sorted(SPLITS))
def test_a_group_of_kproto_aio_and_aiokafka_members_with_aiokafkas_assignor_class(broker, kind: str) -> None:
    """kproto.aio leads first (it joined first and owns everything), then aiokafka (the
    kproto.aio member left and a new one joined): both leaders give the assignor's split;
    every record is read."""
    topic = broker.new_topic(partitions=PARTITIONS, prefix="aio-assignor-class")
    written = {(r.partition, r.offset) for r in broker.produce(topic, 40)}
    group = "g-" + topic
    strategy = (_strategy(kind),)
    config = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                  partition_assignment_strategy=strategy)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S * 2
        seen: set = set()
        running: list = []

        async def step(*consumers) -> None:
            for batches in await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers)):
                for tp, records in batches.items():
                    seen.update((tp.partition, r.offset) for r in records)

        def parts(consumer) -> frozenset:
            return frozenset(tp.partition for tp in consumer.assignment())

        async def split(a, b, what: str) -> None:
            # (aiokafka's assignment() keeps the last generation's partitions until its own
            # SyncGroup answer: the views may overlap for a moment while a rebalance ends.)
            while not (len(parts(a)) == len(parts(b)) == PARTITIONS // 2 and not (parts(a) & parts(b))):
                assert loop.time() < deadline, "{}: never split: {} / {}".format(what, parts(a), parts(b))
                await step(a, b)
            if SPLITS[kind] is not None:
                assert {parts(a), parts(b)} == SPLITS[kind], what

        async def alone(consumer, what: str) -> None:
            while len(parts(consumer)) < PARTITIONS:
                assert loop.time() < deadline, "{}: {}".format(what, parts(consumer))
                await step(consumer)

        async def started(consumer):
            running.append(consumer)
            await consumer.start()
            return consumer

        try:
            ours = await started(AIOKafkaConsumer(topic, **config))
            await alone(ours, "the first kproto.aio member never owned every partition")
            theirs = await started(aiokafka.AIOKafkaConsumer(topic, **config))
            await split(ours, theirs, "kproto.aio leading")
            while not written <= seen:
                assert loop.time() < deadline, "read {} of {}".format(len(seen), len(written))
                await step(ours, theirs)
            await ours.stop()
            await alone(theirs, "the aiokafka member never owned every partition")
            ours = await started(AIOKafkaConsumer(topic, **config))
            await split(ours, theirs, "aiokafka leading")
        finally:
            for consumer in running:
                await consumer.stop()

    run(main)
