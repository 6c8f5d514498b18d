"""kproto.aio's AIOKafkaShareConsumer on librdkafka's mock cluster (share groups, KIP-932)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

from kproto.aio import AcknowledgeType, AIOKafkaShareConsumer
from kproto.errors import IllegalStateError
from tests.support.aio_harness import DEADLINE_S, run


def _group() -> str:
    return "sg-" + uuid.uuid4().hex[:10]


def test_implicit_member_reads_every_record_once_and_accepts(mock_cluster) -> None:
    mock_cluster.set_sharegroup(auto_offset_reset="earliest")
    topic = mock_cluster.new_topic(partitions=2)
    written = mock_cluster.produce(topic, 40)
    group = _group()

    async def main() -> None:
        seen: Counter = Counter()
        async with AIOKafkaShareConsumer(topic, bootstrap_servers=mock_cluster.bootstrap_servers, group_id=group,
                                         max_poll_records=7) as consumer:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while len(seen) < len(written):
                assert loop.time() < deadline, "got {} of {}".format(len(seen), len(written))
                for records in (await consumer.poll(200)).values():
                    for r in records:
                        seen[(r.partition, r.offset)] += 1
                        assert r.delivery_count == 1
            results = await consumer.commit()
            assert results and all(e is None for e in results.values())
        assert set(seen) == {(w.partition, w.offset) for w in written} and set(seen.values()) == {1}
        # Accepted: a new member gets only what is written afterwards.
        later = mock_cluster.produce(topic, 1, partitions=[0], start_index=100)
        # Subscribed before start(), which joins (as aiokafka's consumers take subscribe()).
        consumer = AIOKafkaShareConsumer(bootstrap_servers=mock_cluster.bootstrap_servers, group_id=group)
        consumer.subscribe([topic])
        async with consumer:
            got: list = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while not got:
                assert loop.time() < deadline
                got = [r for rs in (await consumer.poll(200)).values() for r in rs]
            assert [(r.partition, r.offset) for r in got] == [(0, later[0].offset)]

    run(main)


def test_explicit_release_redelivers(mock_cluster) -> None:
    mock_cluster.set_sharegroup(auto_offset_reset="earliest")
    topic = mock_cluster.new_topic(partitions=1)
    mock_cluster.produce(topic, 3)

    async def main() -> None:
        async with AIOKafkaShareConsumer(topic, bootstrap_servers=mock_cluster.bootstrap_servers, group_id=_group(),
                                         share_acknowledgement_mode="explicit") as consumer:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            first: list = []
            while len(first) < 3:
                assert loop.time() < deadline
                batch = [r for rs in (await consumer.poll(200)).values() for r in rs]
                first.extend(batch)
                if len(first) < 3:
                    for r in batch:
                        consumer.acknowledge(r, AcknowledgeType.RELEASE)
                    first = []
            with_unacked = first[0]
            for r in first[1:]:
                consumer.acknowledge(r)
            try:
                await consumer.poll(0)
                raise AssertionError("poll with an unacknowledged record must fail")
            except IllegalStateError:
                pass
            consumer.acknowledge(with_unacked, AcknowledgeType.RELEASE)
            again: list = []
            while not again:
                assert loop.time() < deadline
                again = [r for rs in (await consumer.poll(200)).values() for r in rs]
            # One delivery later (a first poll that got fewer than three records released
            # them: with_unacked may be on its second delivery already).
            assert (again[0].offset, again[0].delivery_count) == (with_unacked.offset, with_unacked.delivery_count + 1)
            for r in again:
                consumer.acknowledge(r)
            await consumer.commit()

    run(main)
