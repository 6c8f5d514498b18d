"""kproto.aio's AIOKafkaConsumer with assigned partitions, on every broker."""

from __future__ import annotations

import asyncio

import pytest

from kproto.aio import AIOKafkaConsumer, TopicPartition as TP
from kproto.errors import ConsumerStoppedError, IllegalOperation, IllegalStateError
from tests.support.aio_harness import drain, run

pytestmark = [pytest.mark.broker]


def test_assigned_partitions_every_record_once_seek_and_offsets(broker) -> None:
    topic = broker.new_topic(partitions=2, prefix="aio")
    written = broker.produce(topic, 40)
    ends = {}
    for r in written:
        ends[r.partition] = max(ends.get(r.partition, -1), r.offset + 1)

    async def main() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                    fetch_max_wait_ms=100)
        async with consumer:
            tps = [TP(topic, p) for p in sorted(ends)]
            consumer.assign(tps)
            assert consumer.assignment() == set(tps)
            assert topic in await consumer.topics()
            answered = await consumer.end_offsets(tps)
            if "list_offsets_latest_is_log_end" in broker.capabilities:
                assert answered == {tp: ends[tp.partition] for tp in tps}
            else:  # Tansu: the last batch's base offset + 1 (tests.brokers docstring)
                assert all(0 < answered[tp] <= ends[tp.partition] for tp in tps), answered
            assert set((await consumer.beginning_offsets(tps)).values()) == {0}
            seen = await drain(consumer, len(written))
            assert sorted(seen) == sorted((r.partition, r.offset) for r in written)
            for r in written:
                got = seen[(r.partition, r.offset)]
                assert (got.key, got.value) == (r.key, r.value)
            for tp in tps:
                assert await consumer.position(tp) == ends[tp.partition]
                assert consumer.highwater(tp) == ends[tp.partition]
                assert consumer.last_poll_timestamp(tp) is not None
            # seek, then batches of one partition only (the two records may lie in two
            # producer batches, and the mock answers one batch per Fetch)
            consumer.seek(tps[0], ends[0] - 2)
            again: list = []
            while len(again) < 2:
                batches = await consumer.getmany(tps[0], timeout_ms=10_000)
                assert set(batches) == {tps[0]}, batches
                again += batches[tps[0]]
            assert [r.offset for r in again] == [ends[0] - 2, ends[0] - 1]
            await consumer.seek_to_beginning(tps[1])
            assert await consumer.position(tps[1]) == 0
            await consumer.seek_to_end()
            assert await consumer.position(tps[0]) == ends[0]
            assert await consumer.getmany(timeout_ms=300) == {}
            with pytest.raises(IllegalOperation):
                await consumer.commit()
            metrics = consumer.metrics()
            assert metrics and any("records-consumed-total" in names for names in metrics.values())
        with pytest.raises(ConsumerStoppedError):
            await consumer.getmany()

    run(main)


def test_assign_before_start_is_applied_by_start(broker) -> None:
    """aiokafka takes assign()/subscribe() before start(); the last one given is what
    start() applies, and a consumer stopped without starting refuses them."""
    topic = broker.new_topic(partitions=2, prefix="aio")
    written = broker.produce(topic, 10)
    tp1 = TP(topic, 1)

    async def main() -> None:
        consumer = AIOKafkaConsumer("some-other-topic", bootstrap_servers=broker.bootstrap_servers,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=100, group_id="g-" + topic,
                                    enable_auto_commit=False)
        consumer.subscribe([topic])
        assert consumer.subscription() == {topic}
        consumer.assign([tp1])
        assert consumer.assignment() == set() and consumer.subscription() == set()
        async with consumer:
            assert consumer.assignment() == {tp1} and consumer.subscription() == set()
            n1 = sum(1 for r in written if r.partition == 1)
            got = await drain(consumer, n1)
            assert sorted(got) == sorted((r.partition, r.offset) for r in written if r.partition == 1)
        unstarted = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
        await unstarted.stop()
        with pytest.raises(ConsumerStoppedError):
            unstarted.assign([tp1])

    run(main)


def test_the_first_getmany_returns_when_records_arrive_not_at_its_timeout(broker) -> None:
    """The first poll round after assign() finds no positions and fetches nothing; once
    the lookups are answered getmany() must start the round that fetches, not wait out
    its timeout with no fetch in flight."""
    topic = broker.new_topic(partitions=4, prefix="aio")
    written = {(r.partition, r.offset) for r in broker.produce(topic, 20)}
    timeout_s = 20

    async def main() -> None:
        for _ in range(2):  # the second on a warm broker
            async with AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                                        auto_offset_reset="earliest") as consumer:
                consumer.assign([TP(topic, p) for p in range(4)])
                loop = asyncio.get_running_loop()
                started = loop.time()
                got = await consumer.getmany(timeout_ms=timeout_s * 1000)
                elapsed = loop.time() - started
                assert got, "no records in {:.1f} s".format(elapsed)
                assert elapsed < timeout_s, "the first getmany() returned its records only at its timeout"
                assert {(tp.partition, r.offset) for tp, rs in got.items() for r in rs} <= written

    run(main)


def test_pause_resume_and_getone(broker) -> None:
    topic = broker.new_topic(partitions=2, prefix="aio")
    written = broker.produce(topic, 10)

    async def main() -> None:
        async with AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                    fetch_max_wait_ms=100) as consumer:
            tp0, tp1 = TP(topic, 0), TP(topic, 1)
            consumer.assign([tp0, tp1])
            consumer.pause(tp1)
            assert consumer.paused() == {tp1}
            n0 = sum(1 for r in written if r.partition == 0)
            got = await drain(consumer, n0)
            assert {p for p, _ in got} == {0}
            assert await consumer.getmany(timeout_ms=300) == {}
            consumer.resume(tp1)
            record = await consumer.getone()
            assert (record.partition, record.offset) == (1, 0)
            with pytest.raises(IllegalStateError):
                await consumer.getmany(TP(topic, 7))

    run(main)


def test_cancelled_getmany_loses_and_duplicates_nothing(broker) -> None:
    """Tasks cancelled at every point of getmany(): each record is returned exactly once."""
    topic = broker.new_topic(partitions=3, prefix="aio")
    written = broker.produce(topic, 300)

    async def main() -> None:
        async with AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                    fetch_max_wait_ms=100, max_poll_records=7) as consumer:
            consumer.assign([TP(topic, p) for p in range(3)])
            seen: list = []
            delay = 0.0
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while len(seen) < len(written):
                assert loop.time() < deadline, "got {} of {}".format(len(seen), len(written))
                task = loop.create_task(consumer.getmany(timeout_ms=1000))
                await asyncio.sleep(delay)
                task.cancel()
                try:
                    batch = await task
                except asyncio.CancelledError:
                    batch = {}
                seen.extend((tp.partition, r.offset) for tp, rs in batch.items() for r in rs)
                delay = (delay + 0.0007) % 0.01
            assert sorted(seen) == sorted((r.partition, r.offset) for r in written)

    run(main)


def test_stop_is_prompt_and_start_fails_on_no_broker() -> None:
    from kproto.errors import KafkaError

    async def main() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", request_timeout_ms=1000,
                                    fetch_max_wait_ms=100, connections_max_idle_ms=5000)
        with pytest.raises(KafkaError):
            await consumer.start()

    run(main)


@pytest.mark.needs("fault_injection")
def test_a_broker_down_and_back_loses_and_duplicates_nothing(broker) -> None:
    """Assigned partitions over three brokers; one broker goes down mid-read and comes back:
    the other partitions go on, and in the end every record was returned exactly once."""
    topic = broker.new_topic(partitions=3, prefix="aio")
    written = broker.produce(topic, 90)

    async def main() -> None:
        async with AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                    fetch_max_wait_ms=100, max_poll_records=5, reconnect_backoff_max_ms=500,
                                    request_timeout_ms=3000) as consumer:
            consumer.assign([TP(topic, p) for p in range(3)])
            seen: list = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while len(seen) < 20:
                assert loop.time() < deadline
                seen.extend((tp.partition, r.offset) for tp, rs in (await consumer.getmany(timeout_ms=200)).items()
                            for r in rs)
            broker.broker_down(1)
            try:
                for _ in range(10):
                    seen.extend((tp.partition, r.offset)
                                for tp, rs in (await consumer.getmany(timeout_ms=200)).items() for r in rs)
            finally:
                broker.broker_up(1)
            while len(seen) < len(written):
                assert loop.time() < deadline, "got {} of {}".format(len(seen), len(written))
                seen.extend((tp.partition, r.offset) for tp, rs in (await consumer.getmany(timeout_ms=200)).items()
                            for r in rs)
            assert sorted(seen) == sorted((r.partition, r.offset) for r in written)

    run(main)
