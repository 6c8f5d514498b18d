"""kproto.aio in classic groups: a group shared with aiokafka members, every assignor, static
membership, and heartbeats that go on while the application awaits something else."""

from __future__ import annotations

import asyncio

import pytest

from kproto.aio import AIOKafkaConsumer
from kproto.consumer.classic.group_membership import MemberState
from kproto.errors import CommitFailedError, IllegalGenerationError, RebalanceInProgressError
from tests.support.aio_harness import DEADLINE_S, ListenerLog, drain, run

pytestmark = [pytest.mark.broker, pytest.mark.needs("classic_groups")]

# Kafka's group.min.session.timeout.ms is 6000: the shortest session every broker accepts.
SESSION_MS = 6000
HEARTBEAT_MS = 300
COMMIT_REFUSED = (CommitFailedError, RebalanceInProgressError, IllegalGenerationError)


def told(log: ListenerLog) -> set:
    """What a member's listener was told it owns (an assigned partition it already owned,
    or a revoked one it did not, fails the test)."""
    owned: set = set()
    for kind, partitions in log.events:
        if kind == "assigned":
            assert not (owned & set(partitions)), log.events
            owned |= set(partitions)
        else:
            assert set(partitions) <= owned, log.events
            owned -= set(partitions)
    return owned


def _aiokafka_consumer(broker, topic: str, group: str, log: ListenerLog) -> "AIOKafkaConsumer":
    aiokafka = pytest.importorskip("aiokafka")

    # aiokafka's subscribe() takes only its own listener class.
    class Listener(ListenerLog, aiokafka.ConsumerRebalanceListener):
        pass

    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                         auto_offset_reset="earliest", enable_auto_commit=False,
                                         session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
    listener = Listener()
    consumer.subscribe([topic], listener=listener)
    log.events = listener.events
    return consumer


# librdkafka's mock cluster aborts the process on one of aiokafka's requests.
@pytest.mark.broker_kinds("apache_kafka")
def test_a_group_of_kproto_aio_and_aiokafka_members(broker) -> None:
    """Both libraries' members in one classic group (roundrobin, aiokafka's assignor): the
    partitions are split, never owned by both at once, every record is read; when the
    aiokafka member stops, the kproto.aio member takes every partition and reads on."""
    topic = broker.new_topic(partitions=4, prefix="aio-mixed")
    group = "g-" + topic

    async def main() -> None:
        logs = (ListenerLog(), ListenerLog())
        ours = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
        ours.subscribe([topic], listener=logs[0])
        theirs = _aiokafka_consumer(broker, topic, group, logs[1])
        seen: dict = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S * 2

        async def step(consumer, name: str) -> None:
            for tp, records in (await consumer.getmany(timeout_ms=100)).items():
                for r in records:
                    seen.setdefault((tp.partition, r.offset), []).append(name)
                if records:
                    try:
                        await consumer.commit({tp: records[-1].offset + 1})
                    except COMMIT_REFUSED:
                        pass  # the group is rebalancing: the next owner reads from the last commit

        def disjoint() -> None:
            # Ownership as each member's listener was told it: aiokafka's assignment() keeps
            # the previous generation's partitions until its SyncGroup answer (its
            # Subscription only flags the reassignment in progress), though it has revoked
            # them before it rejoins, so it may show partitions already given to the other.
            mine, other = told(logs[0]), told(logs[1])
            assert not (mine & other), "owned by both: {}".format(sorted(mine & other))

        await ours.start()
        await theirs.start()
        try:
            while not (ours.assignment() and theirs.assignment()
                       and len(ours.assignment() | theirs.assignment()) == 4):
                assert loop.time() < deadline, "split {} / {}".format(ours.assignment(), theirs.assignment())
                await asyncio.gather(step(ours, "kproto"), step(theirs, "aiokafka"))
                disjoint()
            # Written once the partitions are split: the member that joined first may be alone
            # in the first generation (no initial rebalance delay), and records there before
            # the split could all be read and committed by it, leaving the other none.
            written = {(r.partition, r.offset) for r in broker.produce(topic, 40)}
            while not written <= set(seen):
                assert loop.time() < deadline, "read {} of {}".format(len(seen), len(written))
                await asyncio.gather(step(ours, "kproto"), step(theirs, "aiokafka"))
                disjoint()
            await theirs.stop()
            while len(ours.assignment()) < 4:
                assert loop.time() < deadline, "the kproto.aio member never got every partition"
                await step(ours, "kproto")
            more = {(r.partition, r.offset) for r in broker.produce(topic, 20, start_index=40)}
            while not more <= set(seen):
                assert loop.time() < deadline, "the later records were not read"
                await step(ours, "kproto")
        finally:
            await theirs.stop()
            await ours.stop()
        assert {"kproto", "aiokafka"} <= {n for names in seen.values() for n in names}

    run(main)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_two_members_share_the_partitions_with_every_assignor(broker, assignor: str) -> None:
    """A second member joins and a first one leaves: the partitions are split and then all
    go back, with the listener told of every change and no partition ever owned twice."""
    topic = broker.new_topic(partitions=4, prefix="aio-assignor")
    written = {(r.partition, r.offset) for r in broker.produce(topic, 40)}
    group = "g-" + topic
    config = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                  partition_assignment_strategy=assignor, session_timeout_ms=SESSION_MS,
                  heartbeat_interval_ms=HEARTBEAT_MS, enable_auto_commit=True, auto_commit_interval_ms=200)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S * 2
        logs = (ListenerLog(), ListenerLog())
        a, b = AIOKafkaConsumer(**config), AIOKafkaConsumer(**config)
        seen: set = set()

        async def step(consumer) -> None:
            for tp, records in (await consumer.getmany(timeout_ms=100)).items():
                seen.update((tp.partition, r.offset) for r in records)

        await a.start()
        await b.start()
        try:
            a.subscribe([topic], listener=logs[0])
            while len(a.assignment()) < 4:
                assert loop.time() < deadline, "member a never got every partition"
                await step(a)
            b.subscribe([topic], listener=logs[1])
            while not (a.assignment() and b.assignment() and len(a.assignment() | b.assignment()) == 4):
                assert loop.time() < deadline, "never split: {} / {}".format(a.assignment(), b.assignment())
                await asyncio.gather(step(a), step(b))
                assert not (a.assignment() & b.assignment())
            while not written <= seen:
                assert loop.time() < deadline, "read {} of {}".format(len(seen), len(written))
                await asyncio.gather(step(a), step(b))
            await a.stop()
            # The listener was told of every change: what it was told b owns is all of it.
            while len(b.assignment()) < 4 or told(logs[1]) != b.assignment():
                assert loop.time() < deadline, "member b never got every partition"
                await step(b)
        finally:
            await a.stop()
            await b.stop()

    run(main)


def test_heartbeats_go_on_while_the_application_awaits(broker) -> None:
    """The member sleeps longer than its session timeout and is still the same member of
    the same generation: the loop's heartbeat timer kept the session alive."""
    topic = broker.new_topic(partitions=2, prefix="aio-hb")
    written = broker.produce(topic, 10)

    async def main() -> None:
        log = ListenerLog()
        async with AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS) as consumer:
            consumer.subscribe([topic], listener=log)
            await drain(consumer, len(written))
            membership = consumer._membership.membership
            assert membership.state is MemberState.STABLE
            generation = membership.generation
            await asyncio.sleep(SESSION_MS * 1.5 / 1000)
            more = broker.produce(topic, 4, start_index=10)
            # Only the new records: a member that had lost its session would have lost its
            # partitions and, with nothing committed, read everything again.
            assert len(await drain(consumer, len(more))) == len(more)
            assert membership.generation == generation
            assert membership.state is MemberState.STABLE
            assert [e for e in log.events if e[0] != "assigned"] == []

    run(main)


# librdkafka's mock cluster rebalances when a static member rejoins (no KIP-345 there).
@pytest.mark.broker_kinds("apache_kafka")
def test_a_static_member_restarting_keeps_its_partitions_without_a_rebalance(broker) -> None:
    """A static member (group_instance_id) stops without LeaveGroup and comes back within its
    session: the other member's generation is untouched and each gets its partitions back."""
    topic = broker.new_topic(partitions=2, prefix="aio-static")
    broker.produce(topic, 10)
    group = "g-" + topic
    config = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                  session_timeout_ms=SESSION_MS * 3, heartbeat_interval_ms=HEARTBEAT_MS, enable_auto_commit=False)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S * 2
        a = AIOKafkaConsumer(topic, group_instance_id="a", **config)
        b = AIOKafkaConsumer(topic, group_instance_id="b", **config)
        await a.start()
        await b.start()
        try:
            while not (len(a.assignment()) == 1 and len(b.assignment()) == 1):
                assert loop.time() < deadline, "never split: {} / {}".format(a.assignment(), b.assignment())
                await asyncio.gather(a.getmany(timeout_ms=100), b.getmany(timeout_ms=100))
            owned_by_a = a.assignment()
            generation = b._membership.membership.generation
            await a.stop()
            a = AIOKafkaConsumer(topic, group_instance_id="a", **config)
            await a.start()
            while a.assignment() != owned_by_a:
                assert loop.time() < deadline, "the restarted static member did not get its partition back"
                await asyncio.gather(a.getmany(timeout_ms=100), b.getmany(timeout_ms=100))
            await b.getmany(timeout_ms=100)
            assert b._membership.membership.generation == generation
        finally:
            await a.stop()
            await b.stop()

    run(main)


def test_getmany_cancelled_again_and_again_through_rebalances_loses_nothing(broker) -> None:
    """Every getmany() of both members is cancelled after a varying delay while a second
    member joins and the first leaves (rebalance callbacks run in between): every record
    still reaches the application, because positions move only for records a completed
    getmany() returned."""
    topic = broker.new_topic(partitions=4, prefix="aio-cancel")
    written = {(r.partition, r.offset) for r in broker.produce(topic, 60)}
    config = dict(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic, auto_offset_reset="earliest",
                  session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS, enable_auto_commit=True,
                  auto_commit_interval_ms=100, max_poll_records=3)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S * 2
        seen: set = set()
        delays = iter([0.0, 0.001, 0.005, 0.02, 0.05, 0.1] * 10000)

        async def interrupted(consumer) -> None:
            task = loop.create_task(consumer.getmany(timeout_ms=200))
            await asyncio.sleep(next(delays))
            task.cancel()
            try:
                records = await task
            except asyncio.CancelledError:
                return
            for tp, batch in records.items():
                seen.update((tp.partition, r.offset) for r in batch)

        logs = (ListenerLog(), ListenerLog())
        a, b = AIOKafkaConsumer(**config), AIOKafkaConsumer(**config)
        await a.start()
        await b.start()
        try:
            a.subscribe([topic], listener=logs[0])
            while len(seen) < 10:
                assert loop.time() < deadline, "member a read nothing"
                await interrupted(a)
            b.subscribe([topic], listener=logs[1])
            while not (a.assignment() and b.assignment()):
                assert loop.time() < deadline, "never split: {} / {}".format(a.assignment(), b.assignment())
                await asyncio.gather(interrupted(a), interrupted(b))
            await a.stop()
            more = {(r.partition, r.offset) for r in broker.produce(topic, 20, start_index=60)}
            while not (written | more) <= seen:
                assert loop.time() < deadline, "missing {}".format(sorted((written | more) - seen)[:10])
                await interrupted(b)
        finally:
            await a.stop()
            await b.stop()

    run(main)
