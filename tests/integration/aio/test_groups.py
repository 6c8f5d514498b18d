"""kproto.aio in consumer groups, classic (the default, as aiokafka's) and KIP-848, written
as aiokafka's documented examples with only the import changed (plus the broker address,
earliest reset for seeded data, and ``group_protocol="consumer"`` for the KIP-848 runs)."""

from __future__ import annotations

import asyncio

import pytest

from kproto.errors import CommitFailedError, RebalanceInProgressError, StaleMemberEpochError
from kproto.aio import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from tests.brokers.mock_cluster import MockCluster
from tests.support.aio_harness import DEADLINE_S, run

pytestmark = [pytest.mark.broker]


def test_basic_consumer_async_for(broker, proto) -> None:
    topic = broker.new_topic(partitions=2, prefix="aio")
    written = broker.produce(topic, 20)

    async def consume() -> list:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                                    auto_offset_reset="earliest", **proto)
        await consumer.start()
        got = []
        try:
            async for msg in consumer:
                got.append((msg.partition, msg.offset, msg.key, msg.value))
                if len(got) == len(written):
                    break
        finally:
            await consumer.stop()
        return got

    got = run(lambda: asyncio.wait_for(consume(), DEADLINE_S))
    assert sorted(got) == sorted((r.partition, r.offset, r.key, r.value) for r in written)


def test_manual_commit_batches_and_a_successor_resumes(broker, proto) -> None:
    topic = broker.new_topic(partitions=3, prefix="aio")
    written = broker.produce(topic, 60)
    group = "g-" + topic

    async def consume(expected: int) -> set:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest", **proto)
        await consumer.start()
        seen: set = set()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while len(seen) < expected:
                assert loop.time() < deadline, "got {} of {}".format(len(seen), expected)
                result = await consumer.getmany(timeout_ms=1000)
                for tp, messages in result.items():
                    if messages:
                        seen.update((tp.partition, m.offset) for m in messages)
                        await consumer.commit({tp: messages[-1].offset + 1})
            for tp in consumer.assignment():
                ends = [o for p, o in seen if p == tp.partition]
                assert await consumer.committed(tp) == (max(ends) + 1 if ends else None)
        finally:
            await consumer.stop()
        return seen

    first = run(lambda: consume(len(written)))
    assert first == {(r.partition, r.offset) for r in written}
    more = broker.produce(topic, 6, start_index=60)
    second = run(lambda: consume(len(more)))
    assert second == {(r.partition, r.offset) for r in more}


class RebalanceListener(ConsumerRebalanceListener):
    """aiokafka's documented listener: commit what was processed before losing partitions."""

    def __init__(self, consumer: AIOKafkaConsumer, processed: dict, log: list) -> None:
        self.consumer = consumer
        self.processed = processed
        self.log = log

    async def on_partitions_revoked(self, revoked) -> None:
        self.log.append(("revoked", sorted(revoked)))
        offsets = {tp: self.processed[tp] for tp in revoked if tp in self.processed}
        if offsets:
            await self.consumer.commit(offsets)
        for tp in revoked:
            self.processed.pop(tp, None)

    async def on_partitions_assigned(self, assigned) -> None:
        self.log.append(("assigned", sorted(assigned)))


def test_two_members_with_rebalance_listener_process_everything_once(broker, proto) -> None:
    if "group_protocol" not in proto and isinstance(broker, MockCluster):
        pytest.skip("librdkafka's mock refuses a classic group's commits while it rebalances (REBALANCE_IN_PROGRESS; "
                    "Kafka accepts the current generation's), so the listener cannot commit before revocation")
    topic = broker.new_topic(partitions=4, prefix="aio")
    written = broker.produce(topic, 80)
    group = "g-" + topic

    async def main() -> dict:
        owners: dict = {}
        logs: list = []

        async def member(name: str, stop: asyncio.Event) -> None:
            consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                        enable_auto_commit=False, auto_offset_reset="earliest",
                                        max_poll_records=5, **proto)
            await consumer.start()
            processed: dict = {}
            log: list = []
            logs.append((name, log))
            consumer.subscribe([topic], listener=RebalanceListener(consumer, processed, log))
            try:
                while not stop.is_set():
                    for tp, messages in (await consumer.getmany(timeout_ms=200)).items():
                        for m in messages:
                            owners.setdefault((tp.partition, m.offset), []).append(name)
                        processed[tp] = messages[-1].offset + 1
                    if processed:
                        try:
                            await consumer.commit(dict(processed))
                        except (StaleMemberEpochError, CommitFailedError, RebalanceInProgressError):
                            pass  # the group moved on (a new epoch or generation): the listener commits

            finally:
                await consumer.stop()

        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        a = asyncio.get_running_loop().create_task(member("a", stop_a))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while len(owners) < 20:
            assert loop.time() < deadline
            await asyncio.sleep(0.05)
        b = loop.create_task(member("b", stop_b))
        while len(owners) < len(written) or not any(n == "b" and any(e[0] == "assigned" and e[1] for e in l)
                                                    for n, l in logs):
            assert loop.time() < deadline, "got {} of {}".format(len(owners), len(written))
            assert not a.done() and not b.done()
            await asyncio.sleep(0.05)
        stop_a.set()
        stop_b.set()
        await asyncio.gather(a, b)
        return owners

    owners = run(main)
    assert sorted(owners) == sorted((r.partition, r.offset) for r in written)
    # A record seen twice was read by both members: its partition moved after a commit
    # that did not cover it (a commit may meet a newer member epoch).
    assert all(len(set(v)) == len(v) for v in owners.values())


def test_pattern_subscription_and_seek_to_committed(broker, proto) -> None:
    prefix = "aiop"
    topic = broker.new_topic(partitions=1, prefix=prefix)
    written = broker.produce(topic, 5)

    async def main() -> None:
        async with AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                                    enable_auto_commit=False, auto_offset_reset="earliest", **proto) as consumer:
            consumer.subscribe(pattern="^" + topic + "$")
            seen: list = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while len(seen) < len(written):
                assert loop.time() < deadline
                for tp, ms in (await consumer.getmany(timeout_ms=500)).items():
                    seen.extend(m.offset for m in ms)
            tp = TopicPartition(topic, 0)
            await consumer.commit({tp: 2})
            assert await consumer.seek_to_committed(tp) == {tp: 2}
            assert await consumer.position(tp) == 2
            assert consumer.subscription() == {topic}

    run(main)
