"""kproto.aio on the event loop: heartbeats while the application awaits something else,
cancelled commits, read_committed, and the loop's thread count (the harness)."""

from __future__ import annotations

import asyncio

import pytest

from kproto.aio import AIOKafkaConsumer, TopicPartition as TP
from kproto.consumer.background.member_state import MemberState
from tests.support.aio_harness import DEADLINE_S, ListenerLog, drain, run

pytestmark = [pytest.mark.broker]


@pytest.mark.needs("fault_injection", "kip848")
def test_heartbeats_go_on_while_the_application_awaits(broker) -> None:
    """Session timeout 1 s on the broker: the member sleeps through five of them and is
    still the same member (same epoch, nothing lost) because the loop kept heartbeating."""
    broker.set_group_consumer_session_timeout(1000)
    broker.set_group_consumer_heartbeat_interval(200)
    topic = broker.new_topic(partitions=2, prefix="aio")
    written = broker.produce(topic, 10)

    async def main() -> None:
        log = ListenerLog()
        async with AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    group_protocol="consumer") as consumer:
            consumer.subscribe([topic], listener=log)
            await drain(consumer, len(written))
            membership = consumer._membership
            # The records may come before the heartbeat acknowledging the assignment is
            # answered (ACKNOWLEDGING): the loop sends it while the application awaits.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while membership.state is not MemberState.STABLE:
                assert loop.time() < deadline, membership.state
                await asyncio.sleep(0.05)
            epoch, member_id = membership.member_epoch, membership.member_id
            await asyncio.sleep(5)
            more = broker.produce(topic, 4, start_index=10)
            # Only the new records: a fenced member would have lost its partitions and,
            # with nothing committed, read everything again.
            assert len(await drain(consumer, len(more))) == len(more)
            assert (membership.member_epoch, membership.member_id) == (epoch, member_id)
            assert membership.state is MemberState.STABLE
            assert [e for e in log.events if e[0] != "assigned"] == []

    run(main)


def test_cancelled_commits_lose_nothing_and_the_last_one_stands(broker, proto) -> None:
    topic = broker.new_topic(partitions=1, prefix="aio")
    broker.produce(topic, 30)
    tp = TP(topic, 0)

    async def main() -> None:
        async with AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                                    auto_offset_reset="earliest", enable_auto_commit=False, **proto) as consumer:
            consumer.assign([tp])
            await drain(consumer, 30)
            loop = asyncio.get_running_loop()
            delay = 0.0
            for offset in range(1, 25):
                task = loop.create_task(consumer.commit({tp: offset}))
                await asyncio.sleep(delay)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                delay = (delay + 0.002) % 0.02
            await consumer.commit({tp: 30})
            assert await consumer.committed(tp) == 30
            assert await consumer.position(tp) == 30

    run(main)


@pytest.mark.needs("aborted_transactions_in_fetch")
def test_read_committed_returns_only_committed_records(broker) -> None:
    """aiokafka's transactional-consume example: isolation_level="read_committed"."""
    topic = broker.new_topic(partitions=1, prefix="aio")
    txns = broker.produce_transactions(topic, committed=5, aborted=5)

    async def main() -> None:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                                    isolation_level="read_committed", auto_offset_reset="earliest")
        await consumer.start()
        try:
            seen = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while len(seen) < len(txns.committed):
                assert loop.time() < deadline
                async for msg in _batch(consumer):
                    seen.append(msg.value)
            assert seen == [r.value for r in txns.committed]
            tp = TP(topic, 0)
            assert consumer.last_stable_offset(tp) == consumer.highwater(tp)
            assert await consumer.getmany(timeout_ms=300) == {}
        finally:
            await consumer.stop()

    run(main)


async def _batch(consumer):
    for records in (await consumer.getmany(timeout_ms=500)).values():
        for r in records:
            yield r


def test_stop_mid_rebalance_with_a_stuck_listener_returns_within_the_close_timeout(broker, proto) -> None:
    """Member a's revocation callback never returns; its getmany() is cancelled, then
    stop(timeout_ms=2000) returns within the close timeout plus 1 s, and member b ends up
    with every partition."""
    topic = broker.new_topic(partitions=2, prefix="aio")
    broker.produce(topic, 10)
    group = "g-" + topic

    class Stuck:
        def __init__(self) -> None:
            self.revoking = asyncio.Event()

        async def on_partitions_revoked(self, revoked) -> None:
            if revoked:
                self.revoking.set()
                await asyncio.Event().wait()

        async def on_partitions_assigned(self, assigned) -> None:
            pass

    async def main() -> None:
        loop = asyncio.get_running_loop()
        config = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, **proto)
        a = AIOKafkaConsumer(**config)
        b = AIOKafkaConsumer(**config)
        await a.start()
        await b.start()
        try:
            stuck = Stuck()
            a.subscribe([topic], listener=stuck)
            await drain(a, 10)
            b.subscribe([topic])
            deadline = loop.time() + DEADLINE_S

            async def poll_a() -> None:
                while True:
                    await a.getmany(timeout_ms=100)

            polling = loop.create_task(poll_a())
            while not stuck.revoking.is_set():
                assert loop.time() < deadline, "member a was never asked to revoke"
                await b.getmany(timeout_ms=100)
            polling.cancel()
            with pytest.raises(asyncio.CancelledError):
                await polling
            await asyncio.wait_for(a.stop(timeout_ms=2000), 3.0)
            while len(b.assignment()) < 2:
                assert loop.time() < deadline, "member b never got every partition"
                await b.getmany(timeout_ms=100)
        finally:
            await a.stop()
            await b.stop()

    run(main)


def test_a_large_batch_is_checked_a_slice_per_turn_of_the_loop(broker, monkeypatch) -> None:
    """One batch of ~400 KB: its CRC is checked before any of its records is handed out,
    in slices of at most ``CrcPrecheck.SLICE_BYTES`` (each a turn of the loop), never in one
    call; every record arrives once, in order. The CRC function is wrapped only to see the
    sizes it is called with."""
    import kproto.records.batch_crcs as batch_crcs
    import kproto.records.default_batch as default_batch
    from kproto.consumer.fetch.completed_fetch import CrcPrecheck

    topic = broker.new_topic(partitions=1, prefix="aio-crc")
    written = broker.produce_batch(topic, 4000)
    sizes: list[int] = []
    for module in (batch_crcs, default_batch):
        original = module.crc32c

        def seen(data, crc=0, original=original):
            sizes.append(len(data))
            return original(data, crc)

        monkeypatch.setattr(module, "crc32c", seen)
    tp = TP(topic, 0)

    async def main() -> list:
        async with AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                    max_partition_fetch_bytes=1 << 20) as consumer:
            consumer.assign([tp])
            got: list = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while len(got) < len(written):
                assert loop.time() < deadline, "got {} of {}".format(len(got), len(written))
                got += (await consumer.getmany(timeout_ms=200)).get(tp, [])
            assert await consumer.getmany(timeout_ms=200) == {}
            return got

    records = run(main)
    assert [(r.offset, r.key, r.value) for r in records] == [(w.offset, w.key, w.value) for w in written]
    assert sum(sizes) > CrcPrecheck.SLICE_BYTES  # the whole batch was checked ...
    assert max(sizes) <= CrcPrecheck.SLICE_BYTES  # ... a slice at a time
