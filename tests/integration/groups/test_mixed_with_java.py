"""Mixed groups of kproto and Kafka 4.4's Java consumer on Apache Kafka 4.4: the Java peer
(``java_peer`` fixture, :mod:`tests.brokers.java_peer`) beside kproto members in each kind
of group, members joining and leaving.

- classic (range, cooperative-sticky), either implementation the leader (the first to
  join: Kafka keeps the leader while it stays): no record lost, no partition owned by two
  members at once; with range the assignment equals Java's RangeAssignor over the sorted
  member ids whoever computed it;
- KIP-848 (the broker's uniform and range assignors): the same, and each member's view
  equals the group's target assignment as the broker describes it (ConsumerGroupDescribe,
  by librdkafka's admin client);
- share groups (KIP-932): kproto's and Java's ``KafkaShareConsumer`` in one share group,
  Java acknowledging explicitly, kproto implicitly: every record accepted exactly once (by
  the acknowledgement commit callbacks), a record delivered twice only as a redelivery.

Session timeouts: 6000 ms for classic members (Kafka's ``group.min.session.timeout.ms``);
the KIP-848 and share timeouts are the broker's (45 s), so members here leave by closing
(a kill would wait out the session) except in the classic test, which kills one.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any, Optional

import pytest

from kproto import KafkaShareConsumer
from tests.support.members import Member, assert_never_owned_twice, processed_union, wait_for
from tests.threads import TestThread

pytestmark = pytest.mark.broker_kinds("apache_kafka")

PARTITIONS = 6
CLASSIC = dict(session_timeout_ms=6000, heartbeat_interval_ms=500)


def new_group(prefix: str) -> str:
    return "{}-{}".format(prefix, uuid.uuid4().hex[:8])


def written_set(written: list) -> set[tuple[str, int, int]]:
    return {(w.topic, w.partition, w.offset) for w in written}


def views(members: list) -> dict[str, frozenset]:
    return {m.member_name: frozenset((tp[0], tp[1]) for tp in m.assignment()) for m in members}


def settled(members: list, topic: str) -> bool:
    """Every partition owned by exactly one member, shares within one of each other."""
    owned = views(members)
    counts = Counter(tp for parts in owned.values() for tp in parts)
    sizes = [len(parts) for parts in owned.values()]
    return (set(counts) == {(topic, p) for p in range(PARTITIONS)} and max(counts.values()) == 1
            and max(sizes) - min(sizes) <= 1)


def range_split(member_ids: list[str], topic: str) -> dict[str, frozenset]:
    """Java's RangeAssignor for one topic: members sorted by member id, consecutive runs
    of partitions, the first ``partitions % members`` one longer."""
    ordered = sorted(member_ids)
    per, extra = divmod(PARTITIONS, len(ordered))
    result, start = {}, 0
    for i, member_id in enumerate(ordered):
        length = per + (1 if i < extra else 0)
        result[member_id] = frozenset((topic, p) for p in range(start, start + length))
        start += length
    return result


def stop_all(members: list) -> None:
    for m in members:
        if m.is_alive():
            m.stop()


# --- classic ---------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
@pytest.mark.parametrize("leader", ["kproto", "java"])
def test_classic_group_of_kproto_and_java_members(broker, java_peer, strategy, leader):
    topic = broker.new_topic(partitions=PARTITIONS)
    want = written_set(broker.produce(topic, 120))
    group = new_group("mixed-classic")
    bootstrap = broker.bootstrap_servers

    def member(kind: str, name: str) -> Any:
        if kind == "kproto":
            m = Member(name, bootstrap, group, [topic], partition_assignment_strategy=strategy, **CLASSIC)
            m.start()
            return m
        return java_peer.start("classic", bootstrap, group, [topic], name=name, assignor=strategy,
                               **CLASSIC)

    other = "java" if leader == "kproto" else "kproto"
    first = member(leader, "a-" + leader)  # names sort as they join: client ids lead member ids
    members = [first]
    try:
        wait_for(lambda: len(first.assignment()) == PARTITIONS, "the first member to own every partition")
        second = member(other, "b-" + other)
        members.append(second)
        check_settled(members, topic, strategy)
        want |= written_set(broker.produce(topic, 60, start_index=120))
        third = member(leader, "c-" + leader)
        members.append(third)
        check_settled(members, topic, strategy)
        third.stop()  # leaves cleanly: its partitions move at once
        check_settled([first, second], topic, strategy)
        want |= written_set(broker.produce(topic, 60, start_index=180))
        wait_for(lambda: want <= processed_union(members), "every record to be consumed", 90)
        # A crash: the Java member killed (the leader, or not); the kproto member takes
        # everything once the session times out.
        java, survivor = (first, second) if leader == "java" else (second, first)
        java.kill()
        wait_for(lambda: len(survivor.assignment()) == PARTITIONS, "the survivor to own every partition", 90)
        want |= written_set(broker.produce(topic, 60, start_index=240))
        wait_for(lambda: want <= processed_union(members), "every record to be consumed", 90)
    finally:
        stop_all(members)
    assert want <= processed_union(members)
    assert_never_owned_twice(members)


def check_settled(members: list, topic: str, strategy: str) -> None:
    """Wait until the group settles (one generation, every partition owned once); with
    range, the split is Java's RangeAssignor's over the members' ids."""
    def stable() -> bool:
        generations = {m.generation() for m in members}
        return len(generations) == 1 and settled(members, topic) and all(m.member_id for m in members)

    wait_for(stable, "the group to settle: {}".format(views(members)), 90)
    if strategy == "range":
        expected = range_split([m.member_id for m in members], topic)
        assert views(members) == {m.member_name: expected[m.member_id] for m in members}


# --- consumer (KIP-848) ----------------------------------------------------------------------


def described_assignment(bootstrap: str, group: str) -> dict[str, frozenset]:
    """The broker's target assignment of a consumer group: member id -> partitions."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(30)
    return {m.member_id: frozenset((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
            for m in description.members}


@pytest.mark.needs("kip848")
@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_consumer_protocol_group_of_kproto_and_java_members(broker, java_peer, assignor):
    topic = broker.new_topic(partitions=PARTITIONS)
    want = written_set(broker.produce(topic, 120))
    group = new_group("mixed-848")
    bootstrap = broker.bootstrap_servers
    java = java_peer.start("consumer", bootstrap, group, [topic], name="java", assignor=assignor)
    members: list = [java]
    try:
        ours = Member("kproto", bootstrap, group, [topic], group_protocol="consumer",
                      group_remote_assignor=assignor)
        ours.start()
        members.append(ours)
        agree_with_broker(members, bootstrap, group, topic)
        later = Member("kproto-2", bootstrap, group, [topic], group_protocol="consumer",
                       group_remote_assignor=assignor)
        later.start()
        members.append(later)
        want |= written_set(broker.produce(topic, 60, start_index=120))
        agree_with_broker(members, bootstrap, group, topic)
        java.stop()  # the leave heartbeat (epoch -1): its partitions move at once
        agree_with_broker([ours, later], bootstrap, group, topic)
        want |= written_set(broker.produce(topic, 60, start_index=180))
        wait_for(lambda: want <= processed_union(members), "every record to be consumed", 90)
    finally:
        stop_all(members)
    assert want <= processed_union(members)
    assert_never_owned_twice(members)


def agree_with_broker(members: list, bootstrap: str, group: str, topic: str) -> None:
    """Wait until every partition is owned once and the members' views are the broker's
    target assignment (a member's view lags while it revokes or waits for its next
    heartbeat; the target is final once all reconciled)."""
    def agreed() -> bool:
        if not settled(members, topic) or not all(m.member_id for m in members):
            return False
        described = described_assignment(bootstrap, group)
        return {m.member_name: described.get(m.member_id) for m in members} == views(members)

    wait_for(agreed, "the members' views to equal the broker's assignment: {}".format(views(members)),
             90, step_s=0.5)


# --- share groups (KIP-932) ------------------------------------------------------------------


def set_group_config(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs on a GROUP resource (KIP-932 share-group settings)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]).values():
        future.result(30)


class ShareMember(TestThread):
    """A kproto KafkaShareConsumer in its own thread (implicit acknowledgement): records
    each delivery and, from the acknowledgement commit callback, each acknowledgement the
    broker took (``acks_committed``: (topic, partition, offset, error or None))."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(name="share-" + name, daemon=True)
        self.member_name = name
        self.consumer = KafkaShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                           fetch_max_wait_ms=100, max_poll_records=50)
        self.consumer.set_acknowledgement_commit_callback(self._acknowledged)
        self.lock = threading.Lock()
        self.records: list[dict] = []
        self.acks_committed: list[tuple[str, int, int, Optional[str]]] = []
        self._stop_event = threading.Event()

    def _acknowledged(self, offsets: dict, error: Optional[BaseException]) -> None:
        with self.lock:
            self.acks_committed.extend((tip.topic, tip.partition, o, None if error is None else repr(error))
                                       for tip, done in offsets.items() for o in done)

    def work(self) -> None:
        while not self._stop_event.is_set():
            for batch in self.consumer.poll(100).values():
                with self.lock:
                    self.records.extend({"topic": r.topic, "partition": r.partition, "offset": r.offset,
                                         "delivery_count": r.delivery_count} for r in batch)
        self.consumer.close()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(60)
        assert not self.is_alive()


def accepted(members: list) -> Counter:
    """How many times each (topic, partition, offset) was acknowledged successfully."""
    counts: Counter = Counter()
    for m in members:
        m.raise_if_failed()
        with m.lock:
            counts.update((t, p, o) for t, p, o, error in m.acks_committed if error is None)
    return counts


def test_share_group_of_kproto_and_java_consumers(broker, java_peer):
    topic = broker.new_topic(partitions=3)
    group = new_group("mixed-share")
    bootstrap = broker.bootstrap_servers
    set_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    phase = written_set(broker.produce(topic, 50))
    java = java_peer.start("share", bootstrap, group, [topic], name="java", ack="explicit",
                           ack_type="accept", commit="sync")
    members: list = [java]
    try:
        # Java alone, acknowledging each record explicitly (commitSync after each poll).
        wait_for(lambda: phase <= set(accepted([java])), "Java to accept the first records", 90)
        want = set(phase)
        # kproto joins (implicit acknowledgement): both members share every partition.
        ours = ShareMember("kproto", bootstrap, group, topic)
        ours.start()
        members.append(ours)
        want |= written_set(broker.produce(topic, 100, start_index=50))
        wait_for(lambda: want <= set(accepted(members)), "every record to be accepted", 90)
        java.stop()  # close(): what it acquired and did not acknowledge is released
        # kproto alone.
        phase = written_set(broker.produce(topic, 100, start_index=150))
        wait_for(lambda: phase <= set(accepted([ours])), "kproto to accept the next records", 90)
        want |= phase
        # A second Java member (implicit acknowledgement) joins; kproto leaves.
        later = java_peer.start("share", bootstrap, group, [topic], name="java-2")
        members.append(later)
        later.wait_started()
        ours.stop()
        phase = written_set(broker.produce(topic, 100, start_index=250))
        wait_for(lambda: phase <= set(accepted([later])), "the second Java member to accept the last records", 90)
        want |= phase
    finally:
        stop_all(members)
    counts = accepted(members)
    assert set(counts) == want
    twice = {k: n for k, n in counts.items() if n > 1}
    assert not twice, "records accepted more than once: {}".format(twice)
    # A record delivered more than once was redelivered (released, or its lock expired).
    deliveries: dict[tuple, list[int]] = {}
    for m in members:
        with m.lock:
            for r in m.records:
                deliveries.setdefault((r["topic"], r["partition"], r["offset"]), []).append(r["delivery_count"])
    assert set(deliveries) >= want
    for key, counts_seen in deliveries.items():
        assert sorted(counts_seen) == list(range(1, len(counts_seen) + 1)), (key, counts_seen)


def test_java_peer_assign_mode_reads_partitions_with_checksum(broker, java_peer):
    """The benchmark's reader: given partitions from the beginning, count and checksum."""
    import zlib

    topic = broker.new_topic(partitions=3)
    written = broker.produce(topic, 200)
    peer = java_peer.start("assign", broker.bootstrap_servers, partitions=[(topic, 0), (topic, 2)])
    done = peer.wait_done()
    peer.stop()
    mine = [w for w in written if w.partition in (0, 2)]
    assert done["records"] == len(mine)
    assert int(done["checksum"]) == sum(zlib.crc32(w.key or b"") + zlib.crc32(w.value or b"")
                                        for w in mine) % 2 ** 64
    assert done["bytes"] == sum(len(w.key or b"") + len(w.value or b"") for w in mine)
    assert peer.started_event["jvm_ms"] >= 0 and done["read_ms"] >= 0
