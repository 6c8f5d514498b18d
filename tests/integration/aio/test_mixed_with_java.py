"""kproto.aio members in groups with Kafka 4.4's Java consumer (``java_peer``):

- KIP-848: partitions split between an aio and a Java member, the Java member leaves, the
  aio member takes everything; no record is lost;
- share groups (KIP-932): ``AIOKafkaShareConsumer`` members (implicit acknowledgement) and
  Java's ``KafkaShareConsumer`` (explicit, then implicit) joining and leaving: every record
  accepted exactly once by someone (the acknowledgement commit callbacks), a record
  delivered more than once only as a redelivery (what a member that left held is released).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any, Optional

import pytest

from kproto.aio import AIOKafkaConsumer, AIOKafkaShareConsumer
from tests.brokers.share_groups import configure_share_group
from tests.support.aio_harness import run
from tests.support.members import wait_for

pytestmark = pytest.mark.broker_kinds("apache_kafka")

PARTITIONS = 4


@pytest.mark.needs("kip848")
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


# --- share groups (KIP-932) ------------------------------------------------------------------


def _written(written: list) -> set[tuple[str, int, int]]:
    return {(w.topic, w.partition, w.offset) for w in written}


class AioShareMember:
    """An ``AIOKafkaShareConsumer`` (implicit acknowledgement) polling in its own task:
    records each delivery (``records``) and each acknowledgement the broker took, from the
    acknowledgement commit callback (``acks_committed``: (topic, partition, offset, error))."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str) -> None:
        self.member_name = name
        self.consumer = AIOKafkaShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                              fetch_max_wait_ms=100, max_poll_records=50)
        self.records: list[dict] = []
        self.acks_committed: list[tuple[str, int, int, Optional[str]]] = []
        self._stopping = False
        self._task: Optional["asyncio.Task[None]"] = None

    async def start(self) -> None:
        await self.consumer.start()
        self.consumer.set_acknowledgement_commit_callback(self._acknowledged)
        self._task = asyncio.get_running_loop().create_task(self._work())

    def _acknowledged(self, offsets: dict, error: Optional[BaseException]) -> None:
        self.acks_committed.extend((tip.topic, tip.partition, o, None if error is None else repr(error))
                                   for tip, done in offsets.items() for o in done)

    async def _work(self) -> None:
        while not self._stopping:
            for batch in (await self.consumer.poll(100)).values():
                self.records.extend({"topic": r.topic, "partition": r.partition, "offset": r.offset,
                                     "delivery_count": r.delivery_count} for r in batch)

    def raise_if_failed(self) -> None:
        if self._task is not None and self._task.done():
            self._task.result()

    async def stop(self) -> None:
        """Stop polling, then stop(): the last batch accepted, the rest released, leave."""
        self._stopping = True
        if self._task is not None:
            await self._task
        await self.consumer.stop()


def _accepted(members: list) -> Counter:
    """How many times each (topic, partition, offset) was acknowledged successfully."""
    counts: Counter = Counter()
    for m in members:
        m.raise_if_failed()
        lock: Any = getattr(m, "lock", None)
        if lock is not None:
            with lock:
                acks = list(m.acks_committed)
        else:
            acks = list(m.acks_committed)
        counts.update((t, p, o) for t, p, o, error in acks if error is None)
    return counts


@pytest.mark.needs("share_groups")
def test_share_group_of_aio_and_java_members_joining_and_leaving(broker, java_peer) -> None:
    topic = broker.new_topic(partitions=3, prefix="aio-java-share")
    group = "aio-java-share-" + uuid.uuid4().hex[:8]
    bootstrap = broker.bootstrap_servers
    configure_share_group(broker, group, auto_offset_reset="earliest")
    want = _written(broker.produce(topic, 50))
    java = java_peer.start("share", bootstrap, group, [topic], name="java", ack="explicit",
                           ack_type="accept", commit="sync")
    members: list = [java]
    # Java alone, acknowledging each record explicitly (commitSync after each poll).
    wait_for(lambda: want <= set(_accepted([java])), "Java to accept the first records", 90)

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def until(condition, what: str, limit_s: float = 90) -> None:
            deadline = loop.time() + limit_s
            while not condition():
                assert loop.time() < deadline, "{} (accepted {} of {})".format(
                    what, len(set(_accepted(members)) & want), len(want))
                await asyncio.sleep(0.1)

        async def joined(name: str) -> AioShareMember:
            member = AioShareMember(name, bootstrap, group, topic)
            members.append(member)
            await member.start()
            return member

        def produce(n: int, start: int) -> set:
            more = _written(broker.produce(topic, n, start_index=start))
            want.update(more)
            return more

        try:
            # An aio member joins Java: both share every partition.
            a = await joined("aio-a")
            produce(100, 50)
            await until(lambda: want <= set(_accepted(members)), "every record to be accepted")
            # A second aio member joins; Java leaves (what it acquired and did not
            # acknowledge is released).
            b = await joined("aio-b")
            java.stop()
            later = produce(100, 150)
            await until(lambda: later <= set(_accepted([a, b])), "the aio members to accept the next records")
            # A second Java member (implicit acknowledgement) joins; the first aio member leaves.
            java2 = java_peer.start("share", bootstrap, group, [topic], name="java-2")
            members.append(java2)
            await until(lambda: java2.started_event, "the second Java member to start", 120)
            await a.stop()
            produce(100, 250)
            await until(lambda: want <= set(_accepted(members)), "every record to be accepted")
            # The last aio member leaves: the second Java member alone.
            await b.stop()
            last = produce(50, 350)
            await until(lambda: last <= set(_accepted([java2])), "the second Java member to accept the last records")
        finally:
            for m in members:
                if isinstance(m, AioShareMember):
                    await m.stop()

    try:
        run(main)
    finally:
        for m in members:
            if not isinstance(m, AioShareMember) and m.is_alive():
                m.stop()
    counts = _accepted(members)
    assert set(counts) == want, "lost: {}".format(sorted(want - set(counts))[:10])
    twice = {k: n for k, n in counts.items() if n > 1}
    assert not twice, "records accepted more than once: {}".format(twice)
    # A record delivered more than once was redelivered: each delivery with its own count
    # (a member that left may have held deliveries it never handed over: counts may skip).
    deliveries: dict[tuple, list[int]] = {}
    for m in members:
        for r in m.records:
            deliveries.setdefault((r["topic"], r["partition"], r["offset"]), []).append(r["delivery_count"])
    assert set(deliveries) >= want
    for key, seen in deliveries.items():
        assert len(set(seen)) == len(seen) and min(seen) >= 1, (key, seen)
