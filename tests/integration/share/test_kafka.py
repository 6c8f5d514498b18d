"""KafkaShareConsumer (KIP-932) on Apache Kafka's own share coordinator (the test ground's
Kafka 4.4, or the ``apache_kafka`` of one's choice).

Each test gives its share group what it needs with group configs (IncrementalAlterConfigs:
offset reset earliest, heartbeats every 500 ms, short locks and delivery limits where the
test is about them; :mod:`tests.brokers.share_groups`) and asserts what was sent and what
came back on the wire (:class:`tests.wire_log.WireLog`, kproto's own trace) besides what
the members got: who got which record, how often (``delivery_count``), and that none was
lost. Records are written by confluent-kafka.

Measured on Kafka 4.4 (and what the tests rely on):
- the share assignor gives every member of the group the one partition a topic has: the
  members share it, each record acquired by one member at a time;
- ShareGroupHeartbeat v1, ShareFetch v2 and ShareAcknowledge v2; the fetch and acknowledge
  responses carry the group's lock duration (``acquisition_lock_timeout_ms``);
- ``batch_optimized`` acquires whole batches (a fetch may acquire more than
  ``max_records``), ``record_limit`` acquires at most ``max_records``;
- RENEW with ``share.renew.acknowledge.enable=false`` is refused per partition with
  INVALID_RECORD_STATE ("Renewing acquisition locks is not enabled for the group.");
- a member killed (SIGKILL) while holding records: the broker hands them to the other
  members again with delivery_count + 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any, Iterator

import pytest

from kproto import AcknowledgeType
from kproto.errors import InvalidRecordStateError
from kproto.messages import ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupHeartbeatRequest
from tests.brokers import raw
from tests.integration.share.members import (DEADLINE_S, acknowledged, earliest_group, read_beside_confluent_member,
                                             read_until, records, share_consumer)
from tests.wire_log import WireLog

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture
def kafka(apache_kafka):
    if "share_groups" not in apache_kafka.capabilities:
        pytest.skip("apache_kafka lacks share_groups (ShareGroupHeartbeat v1: Kafka 4.1+)")
    return apache_kafka


def acquired(wire: WireLog) -> list[tuple[int, int, int]]:
    """Every (first_offset, last_offset, delivery_count) the ShareFetch answers acquired."""
    return [(a["first_offset"], a["last_offset"], a["delivery_count"])
            for e in wire.received("ShareFetch") for t in e.tree["responses"] for p in t["partitions"]
            for a in p["acquired_records"]]


def partition_errors(wire: WireLog) -> list:
    """Every non-zero error code in the share answers (top level, partition, acknowledgement)."""
    errors = []
    for api in ("ShareFetch", "ShareAcknowledge"):
        for e in wire.received(api):
            errors += [e.tree["error_code"]] if e.tree["error_code"] else []
            for t in e.tree["responses"]:
                for p in t["partitions"]:
                    errors += [p[k] for k in ("error_code", "acknowledge_error_code") if p.get(k)]
    return errors


def assigned_members(wire: WireLog) -> set[str]:
    """The member ids whose ShareGroupHeartbeat answer assigned them some partition."""
    return {e.tree["member_id"] for e in wire.received("ShareGroupHeartbeat")
            if e.tree["error_code"] == 0 and e.tree["assignment"] and e.tree["assignment"]["topic_partitions"]}


def wait_until_assigned(wire: WireLog, count: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while len(assigned_members(wire)) < count:
        assert time.monotonic() < deadline, "the members were not all assigned a partition"
        time.sleep(0.05)


@contextlib.contextmanager
def holder_and_other(kafka, group: str, topic: str, wire: WireLog) -> Iterator[tuple[Any, Any, list]]:
    """Two explicit-mode members of ``group`` on ``topic``, both assigned, the holder's first
    poll done: ``(holder, other, held)``, ``held`` the records it holds; closes both."""
    # record_limit: the holder acquires no more than its poll hands out (nothing buffered).
    holder = share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit", max_poll_records=4,
                            share_acquire_mode="record_limit")
    other = share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit")
    try:
        wait_until_assigned(wire, 2)
        held: list = []
        read_until(holder, lambda: held, held.append)
        yield holder, other, held
    finally:
        holder.close()
        other.close()


def test_share_apis_go_out_at_the_newest_versions_kafka_serves(kafka):
    topic = kafka.new_topic(partitions=2)
    written = kafka.produce(topic, 30)
    group, _ = earliest_group(kafka)
    served = raw.api_versions(kafka.addresses[0])
    got: dict = {}
    with WireLog() as wire, share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit",
                                           max_poll_records=7) as consumer:
        def take(r):
            got[(r.partition, r.offset)] = r
            consumer.acknowledge(r)
        read_until(consumer, lambda: len(got) == len(written), take)
        results = consumer.commit()
    for api_key, name, ours in ((SHARE_GROUP_HEARTBEAT, "ShareGroupHeartbeat", ShareGroupHeartbeatRequest),
                                (SHARE_FETCH, "ShareFetch", ShareFetchRequest),
                                (SHARE_ACKNOWLEDGE, "ShareAcknowledge", ShareAcknowledgeRequest)):
        assert wire.versions(name) == {min(ours.max_version, served[api_key][1])}, name
    # Kafka 4.4 serves every share API at kproto's newest version: v1, v2, v2.
    assert (ShareGroupHeartbeatRequest.max_version, ShareFetchRequest.max_version,
            ShareAcknowledgeRequest.max_version) == (1, 2, 2)
    for w in written:
        r = got[(w.partition, w.offset)]
        assert (r.key, r.value, r.headers, r.delivery_count) == (w.key, w.value, tuple(w.headers), 1)
    assert results and all(e is None for e in results.values())
    assert partition_errors(wire) == []
    # Every record acquired once (delivery_count 1) and accepted once.
    assert sum(last - first + 1 for first, last, _ in acquired(wire)) == len(written)
    assert {count for _, _, count in acquired(wire)} == {1}
    sent = acknowledged(wire)
    assert {t for _, t in sent} == {ACCEPT} and sum(sent.values()) == len(written)
    fetches = wire.sent("ShareFetch")
    assert fetches[0].tree["share_session_epoch"] == 0 and fetches[0].tree["share_acquire_mode"] == 0
    assert wire.sent("ShareAcknowledge")[-1].tree["share_session_epoch"] == -1  # closed on close()
    heartbeats = wire.sent("ShareGroupHeartbeat")
    assert heartbeats[0].tree["member_epoch"] == 0 and heartbeats[0].tree["subscribed_topic_names"] == [topic]
    assert heartbeats[-1].tree["member_epoch"] == -1  # left the group


def test_several_members_share_one_partition(kafka):
    topic = kafka.new_topic(partitions=1)
    written = kafka.produce(topic, 60, producer_config={"batch.num.messages": 5})
    group, _ = earliest_group(kafka)
    with WireLog() as wire:
        members = [share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit", max_poll_records=5)
                   for _ in range(3)]
        try:
            # Kafka's share assignor gives the one partition to every member.
            wait_until_assigned(wire, 3)
            delivered: Counter = Counter()
            by_member: Counter = Counter()
            held: dict[int, int] = {}  # offset -> the member holding it
            pending: list[list] = [[] for _ in members]

            def hold(i: int, record) -> None:
                assert record.offset not in held, "{} held by {} and {}".format(record.offset, held[record.offset], i)
                held[record.offset] = i
                delivered[record.offset] += 1
                by_member[i] += 1
                pending[i].append(record)
            # First every member takes records and holds them: three members hold records
            # of the one partition at the same time.
            for i, member in enumerate(members):
                read_until(member, lambda: pending[i], lambda r: hold(i, r))
            assert len({i for i in held.values()}) == 3
            deadline = time.monotonic() + DEADLINE_S
            while len(delivered) < len(written):
                assert time.monotonic() < deadline, "not every record was processed"
                for i, member in enumerate(members):
                    for record in pending[i]:
                        member.acknowledge(record)
                        del held[record.offset]
                    pending[i] = []
                    for record in records(member.poll(100)):
                        hold(i, record)
            for i, member in enumerate(members):
                for record in pending[i]:
                    member.acknowledge(record)
                assert all(e is None for e in member.commit().values())
        finally:
            for member in members:
                member.close()
    assert set(delivered) == {w.offset for w in written}
    assert set(delivered.values()) == {1}  # no lock expired, nobody failed: each record once
    assert partition_errors(wire) == []
    assert {count for _, _, count in acquired(wire)} == {1}
    assert acknowledged(wire) == Counter({(w.offset, ACCEPT): 1 for w in written})


def test_release_redelivers_until_the_delivery_count_limit_archives(kafka):
    group, in_force = earliest_group(kafka, delivery_count_limit=2)
    limit = in_force["delivery_count_limit"]
    topic = kafka.new_topic(partitions=1)
    written = kafka.produce(topic, 5)
    counts: dict[int, list[int]] = {w.offset: [] for w in written}
    with WireLog() as wire, share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit") as consumer:
        def release(r):
            counts[r.offset].append(r.delivery_count)
            consumer.acknowledge(r, AcknowledgeType.RELEASE)
        read_until(consumer, lambda: all(len(c) == limit for c in counts.values()), release)
        assert all(e is None for e in consumer.commit().values())
        # Released at the limit: archived. A record written afterwards comes; they never again.
        sentinel = kafka.produce(topic, 1, start_index=50)[0]
        after: list = []

        def take(r):
            after.append(r)
            consumer.acknowledge(r)
        read_until(consumer, lambda: any(r.offset == sentinel.offset for r in after), take)
    assert all(c == list(range(1, limit + 1)) for c in counts.values()), counts
    assert [(r.offset, r.delivery_count) for r in after] == [(sentinel.offset, 1)]
    sent = acknowledged(wire)
    assert {o: n for (o, t), n in sent.items() if t == RELEASE} == {w.offset: limit for w in written}
    assert sent[(sentinel.offset, ACCEPT)] == 1
    # Acquired on the wire: every record once per delivery, with that delivery's count.
    per_count: Counter = Counter()
    for first, last, count in acquired(wire):
        per_count[count] += last - first + 1
    assert per_count == Counter({c: len(written) for c in range(1, limit + 1)}) + Counter({1: 1})


def test_reject_is_never_redelivered_and_the_rest_is_accepted(kafka):
    group, _ = earliest_group(kafka)
    topic = kafka.new_topic(partitions=1)
    written = kafka.produce(topic, 6)
    rejected = {written[0].offset, written[3].offset}
    seen: list = []
    with WireLog() as wire, share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit") as consumer:
        def judge(r):
            seen.append((r.offset, r.delivery_count))
            consumer.acknowledge(r, AcknowledgeType.REJECT if r.offset in rejected else AcknowledgeType.ACCEPT)
        read_until(consumer, lambda: len(seen) >= len(written), judge)
        assert all(e is None for e in consumer.commit().values())
        sentinel = kafka.produce(topic, 1, start_index=9)[0]
        read_until(consumer, lambda: any(o == sentinel.offset for o, _ in seen), judge)
    assert Counter(o for o, _ in seen) == Counter({w.offset: 1 for w in written} | {sentinel.offset: 1})
    assert {n for _, n in seen} == {1}
    assert acknowledged(wire) == Counter({(w.offset, REJECT if w.offset in rejected else ACCEPT): 1
                                          for w in written + [sentinel]})
    assert partition_errors(wire) == []


def test_a_held_lock_expires_and_another_member_gets_the_records(kafka):
    group, in_force = earliest_group(kafka, record_lock_duration_ms=1500)
    topic = kafka.new_topic(partitions=1)
    written = kafka.produce_batch(topic, 10)
    with WireLog() as wire:
        with holder_and_other(kafka, group, topic, wire) as (holder, other, held):
            held_offsets = {r.offset for r in held}
            lock_timeout_ms = holder.acquisition_lock_timeout_ms()
            # The holder keeps heartbeating but never acknowledges: its locks expire and the
            # other member acquires the records (it accepts the rest as they come).
            taken: list = []
            deadline = time.monotonic() + DEADLINE_S
            while not held_offsets & {r.offset for r in taken}:
                assert time.monotonic() < deadline, "the held records never came back"
                polled = records(other.poll(200))
                taken += polled
                for record in polled:
                    if record.offset not in held_offsets:
                        other.acknowledge(record)
            # Too late: the other member owns it now, the broker refuses the holder's acknowledgement.
            first = min(held_offsets & {r.offset for r in taken})
            holder.acknowledge(next(r for r in held if r.offset == first))
            refused = holder.commit()
            for record in taken:
                if record.offset in held_offsets:
                    other.acknowledge(record)
            read_until(other, lambda: {w.offset for w in written} <= {r.offset for r in taken},
                       lambda r: (taken.append(r), other.acknowledge(r)))
            assert all(e is None for e in other.commit().values())
            # Once every record is accepted (the share-partition start offset moved past them),
            # Kafka 4.4 answers an acknowledgement of them without error: nothing is applied.
            for record in held:
                if record.offset != first:
                    holder.acknowledge(record)
            ignored = holder.commit()
    assert len(held) == 4
    assert {r.offset: r.delivery_count for r in taken if r.offset in held_offsets} == dict.fromkeys(held_offsets, 2)
    assert {r.delivery_count for r in taken if r.offset not in held_offsets} == {1}
    assert Counter(r.offset for r in taken) == Counter(w.offset for w in written)
    assert [type(e) for e in refused.values()] == [InvalidRecordStateError]
    assert "not the owner" in str(list(refused.values())[0])
    assert list(ignored.values()) == [None]
    # The answers name the group's lock duration; the consumer says it.
    timeouts = {e.tree["acquisition_lock_timeout_ms"] for e in wire.received("ShareFetch")}
    assert timeouts == {in_force["record_lock_duration_ms"]} == {lock_timeout_ms}


def test_locks_expiring_up_to_the_delivery_count_limit_archive_the_records(kafka):
    group, in_force = earliest_group(kafka, record_lock_duration_ms=1000, delivery_count_limit=2)
    limit = in_force["delivery_count_limit"]
    topic = kafka.new_topic(partitions=1)
    written = kafka.produce_batch(topic, 3)
    offsets = {w.offset for w in written}
    with WireLog() as wire:
        # One member per delivery, each holding what it got until its locks expire.
        deliveries: list[list] = []
        members = []
        try:
            for _ in range(limit):
                member = share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit")
                members.append(member)
                got: list = []
                read_until(member, lambda: offsets <= {r.offset for r in got}, got.append)
                deliveries.append(sorted((r.offset, r.delivery_count) for r in got))
            # The last lock expires at the limit: archived. A new record comes, they never again.
            sentinel = kafka.produce(topic, 1, start_index=50)[0]
            reader = share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit")
            members.append(reader)
            after: list = []
            read_until(reader, lambda: any(r.offset == sentinel.offset for r in after),
                       lambda r: (after.append(r), reader.acknowledge(r)))
        finally:
            for member in members:
                member.close()
    assert deliveries == [sorted((o, n) for o in offsets) for n in range(1, limit + 1)]
    assert [(r.offset, r.delivery_count) for r in after] == [(sentinel.offset, 1)]
    assert not {o for (o, _) in acknowledged(wire)} & offsets  # nobody acknowledged them


def test_a_member_that_closes_releases_its_records_at_once(kafka):
    group, _ = earliest_group(kafka)  # Kafka's default 30 s locks: only the release frees them in time
    topic = kafka.new_topic(partitions=1)
    kafka.produce(topic, 10)
    with WireLog() as wire:
        with holder_and_other(kafka, group, topic, wire) as (holder, other, held):
            holder.close()
            taken: list = []

            def take(r):
                taken.append(r)
                other.acknowledge(r)
            held_offsets = {r.offset for r in held}
            read_until(other, lambda: held_offsets <= {r.offset for r in taken}, take, timeout_s=20)
    assert {r.offset: r.delivery_count for r in taken if r.offset in held_offsets} == dict.fromkeys(held_offsets, 2)
    closing = [e for e in wire.sent("ShareAcknowledge") if e.tree["share_session_epoch"] == -1]
    assert closing, "the holder did not close its share session"


def test_renew_keeps_the_lock_past_its_duration(kafka):
    group, in_force = earliest_group(kafka, record_lock_duration_ms=3000, renew_acknowledge_enable=True)
    lock_s = in_force["record_lock_duration_ms"] / 1000
    topic = kafka.new_topic(partitions=1)
    written = kafka.produce(topic, 10)
    with WireLog() as wire:
        with holder_and_other(kafka, group, topic, wire) as (holder, other, held):
            acquired_at = time.monotonic()
            taken: list = []
            renewals = 0
            handed_again: list = []
            # Work on the held records for twice the lock duration, renewing the lock every
            # quarter of it (as Java: RENEW, then poll() hands the records out again; every
            # other time through commit()), while the other member reads everything else.
            while time.monotonic() - acquired_at < 2 * lock_s:
                for record in held:
                    holder.acknowledge(record, AcknowledgeType.RENEW)
                if renewals % 2:
                    assert all(e is None for e in holder.commit().values())
                again: list = []
                read_until(holder, lambda: again, again.append)
                handed_again.append(sorted((r.offset, r.delivery_count) for r in again))
                renewals += 1
                until = time.monotonic() + lock_s / 4
                while time.monotonic() < until:
                    for record in records(other.poll(100)):
                        taken.append(record)
                        other.acknowledge(record)
            for record in held:
                holder.acknowledge(record)
            accepted = holder.commit()
            rest = {w.offset for w in written} - {r.offset for r in held}
            read_until(other, lambda: rest <= {r.offset for r in taken}, lambda r: (taken.append(r),
                                                                                     other.acknowledge(r)))
            assert all(e is None for e in other.commit().values())
    assert all(e is None for e in accepted.values())
    held_offsets = {r.offset for r in held}
    assert handed_again == [sorted((r.offset, 1) for r in held)] * renewals
    assert not held_offsets & {r.offset for r in taken}, "a renewed record went to the other member"
    assert sorted(r.offset for r in taken) == sorted(rest)
    renews = [e for e in wire.sent("ShareAcknowledge") if e.tree["is_renew_ack"]]
    assert len(renews) == renewals
    sent = acknowledged(wire)
    assert {o for (o, t) in sent if t == RENEW} == held_offsets
    assert all(sent[(o, RENEW)] == renewals for o in held_offsets)
    assert sent[(min(held_offsets), ACCEPT)] == 1 and partition_errors(wire) == []


def test_renew_on_a_group_without_it_is_refused(kafka):
    group, _ = earliest_group(kafka, renew_acknowledge_enable=False, record_lock_duration_ms=1500)
    topic = kafka.new_topic(partitions=1)
    kafka.produce(topic, 3)
    with WireLog() as wire, share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit") as consumer:
        held: list = []
        read_until(consumer, lambda: held, held.append)
        for record in held:
            consumer.acknowledge(record, AcknowledgeType.RENEW)
        refused = consumer.commit()
        # Not renewed: not handed out again; the broker delivers them anew when the lock expires.
        again: list = []
        read_until(consumer, lambda: again, again.append)
        for record in again:
            consumer.acknowledge(record)
        accepted = consumer.commit()
    assert [type(e) for e in refused.values()] == [InvalidRecordStateError]
    assert "not enabled" in str(list(refused.values())[0])
    assert sorted((r.offset, r.delivery_count) for r in again) == sorted((r.offset, 2) for r in held)
    assert all(e is None for e in accepted.values())
    assert [e.tree["is_renew_ack"] for e in wire.sent("ShareAcknowledge")[:2]] == [True, False]


@pytest.mark.parametrize("mode", ["batch_optimized", "record_limit"])
def test_share_acquire_mode(kafka, mode):
    group, _ = earliest_group(kafka)
    topic = kafka.new_topic(partitions=1)
    written = kafka.produce_batch(topic, 12)  # one batch of 12 records
    max_records = 5
    got: list = []
    with WireLog() as wire, share_consumer(kafka, group, topic, max_poll_records=max_records,
                                           share_acquire_mode=mode) as consumer:
        polls: list[int] = []

        def take(r):
            got.append(r)
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < len(written):
            assert time.monotonic() < deadline
            batch = records(consumer.poll(200))
            polls.append(len(batch))
            got.extend(batch)
    assert sorted(r.offset for r in got) == [w.offset for w in written]
    assert max(polls) <= max_records
    fetches = wire.sent("ShareFetch")
    assert {e.tree["share_acquire_mode"] for e in fetches} == {0 if mode == "batch_optimized" else 1}
    assert {e.tree["max_records"] for e in fetches} == {max_records}
    sizes = [last - first + 1 for first, last, _ in acquired(wire)]
    if mode == "record_limit":
        assert max(sizes) <= max_records and sum(sizes) == len(written)
    else:
        assert sizes[0] == len(written)  # the whole batch, more than max_records


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_a_member_killed_mid_batch_loses_nothing(kafka, how):
    """SIGKILL: the process dies and its connection closes (Kafka 4.4 releases what the
    member's share session held at once). SIGSTOP: it hangs with its connection open (no
    heartbeats, no acknowledgements): the locks expire. Either way the survivors get the
    records it held, each again with delivery_count 2."""
    group, in_force = earliest_group(kafka, record_lock_duration_ms=2000, session_timeout_ms=6000)
    topic = kafka.new_topic(partitions=2)
    written = kafka.produce(topic, 40, producer_config={"batch.num.messages": 5})
    child = subprocess.Popen([sys.executable, "-m", "tests.integration.share.share_member",
                              kafka.bootstrap_servers, topic, group], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line, "the member in the child process died"
        held = {(p, o): n for p, o, n in json.loads(line)["held"]}
        assert held and set(held.values()) == {1}
        os.kill(child.pid, getattr(signal, how))  # mid-batch: it never acknowledges
        accepted: Counter = Counter()
        deliveries: dict[tuple, list[int]] = {}
        survivors = [share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit", max_poll_records=5)
                     for _ in range(2)]
        try:
            deadline = time.monotonic() + DEADLINE_S
            while len(accepted) < len(written):
                assert time.monotonic() < deadline, "records were lost: {}".format(
                    sorted({(w.partition, w.offset) for w in written} - set(accepted)))
                for member in survivors:
                    for record in records(member.poll(100)):
                        key = (record.partition, record.offset)
                        deliveries.setdefault(key, []).append(record.delivery_count)
                        member.acknowledge(record)
                        accepted[key] += 1
            for member in survivors:
                assert all(e is None for e in member.commit().values())
        finally:
            for member in survivors:
                member.close()
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    # Every record processed and accepted exactly once by the survivors. Those the killed
    # member held came again with delivery_count 2; so did any it had acquired and not yet
    # handed to its application (buffered): no survivor saw their first delivery.
    assert set(accepted) == {(w.partition, w.offset) for w in written}
    assert set(accepted.values()) == {1}
    assert {k: v for k, v in deliveries.items() if k in held} == {k: [2] for k in held}
    assert {tuple(v) for v in deliveries.values()} <= {(1,), (2,)}


def latest_assignment(wire: WireLog, member_id: str) -> set[tuple[Any, int]]:
    """The (topic id, partition) pairs the last ShareGroupHeartbeat answer naming an
    assignment gave ``member_id`` (an answer without one leaves it as it was)."""
    partitions: set[tuple[Any, int]] = set()
    for e in wire.received("ShareGroupHeartbeat"):
        if e.tree["member_id"] == member_id and e.tree["error_code"] == 0 and e.tree["assignment"] is not None:
            partitions = {(t["topic_id"], p) for t in e.tree["assignment"]["topic_partitions"] for p in t["partitions"]}
    return partitions


def test_records_acquired_before_a_partition_is_given_up_are_handed_out(kafka):
    """As Java 4.4's share consumer, whose fetch buffer keeps every fetch until its records
    are handed out (the assignment never prunes it): records a member acquired of a
    partition it then gives up (here: it subscribes to another topic) are still handed out
    and acknowledged by it. Dropped instead, they would stay locked to it on Kafka until the
    lock expires (30 s by default) and then come again to another member (delivery_count 2)."""
    group, _ = earliest_group(kafka)  # Kafka's default 30 s locks
    topic = kafka.new_topic(partitions=1)
    elsewhere = kafka.new_topic(partitions=1)
    # Two batches of exactly 20 records (librdkafka's batching depends on timing).
    written = kafka.produce_batch(topic, 20) + kafka.produce_batch(topic, 20, start_index=20)
    seen: Counter = Counter()
    counts: set[int] = set()
    late: list = []
    with WireLog() as wire:
        # batch_optimized (the default) acquires whole batches: a poll of 5 leaves 15 buffered.
        holder = share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit", max_poll_records=5)
        members = [holder]
        try:
            wait_until_assigned(wire, 1)
            (holder_id,) = assigned_members(wire)
            (given_up,) = latest_assignment(wire, holder_id)

            def take(member, record):
                seen[(record.partition, record.offset)] += 1
                counts.add(record.delivery_count)
                member.acknowledge(record)
            first: list = []
            read_until(holder, lambda: first, lambda r: (first.append(r), take(holder, r)))
            acquired_offsets = {o for first_offset, last_offset, _ in acquired(wire)
                                for o in range(first_offset, last_offset + 1)}
            assert len(acquired_offsets) > len(first), "the first ShareFetch left nothing buffered"
            holder.subscribe([elsewhere])
            deadline = time.monotonic() + DEADLINE_S
            while given_up in latest_assignment(wire, holder_id):
                assert time.monotonic() < deadline, "the holder kept the partition"
                time.sleep(0.05)
            # The partition is given up: what the holder acquired of it still comes out, to
            # an application that takes its time over each poll's records (the background
            # thread completes the reconciliation meanwhile). Well within the 30 s lock.
            handed_out = time.monotonic() + 10
            while len(late) < len(acquired_offsets) - len(first):
                assert time.monotonic() < handed_out, "the holder handed out {} of {} buffered records".format(
                    len(late), len(acquired_offsets) - len(first))
                for record in records(holder.poll(50)):
                    late.append(record)
                    take(holder, record)
                time.sleep(0.2)
            assert all(e is None for e in holder.commit().values())
            other = share_consumer(kafka, group, topic, share_acknowledgement_mode="explicit")
            members.append(other)
            read_until(other, lambda: len(seen) == len(written), lambda r: take(other, r))
            assert all(e is None for e in other.commit().values())
        finally:
            for member in members:
                member.close()
    assert seen == Counter({(w.partition, w.offset): 1 for w in written})
    assert counts == {1}  # no lock expired: each record delivered once
    assert {r.offset for r in late} == acquired_offsets - {r.offset for r in first}
    assert partition_errors(wire) == []


def test_implicit_mode_accepts_what_the_last_poll_returned(kafka):
    group, _ = earliest_group(kafka)
    topic = kafka.new_topic(partitions=2)
    written = kafka.produce(topic, 30)
    seen: Counter = Counter()
    reported: set = set()

    def callback(offsets, error):
        assert error is None
        for tip, done in offsets.items():
            reported.update((tip.partition, o) for o in done)
    with WireLog() as wire, share_consumer(kafka, group, topic, max_poll_records=4) as consumer:
        consumer.set_acknowledgement_commit_callback(callback)
        read_until(consumer, lambda: len(seen) == len(written),
                   lambda r: seen.update([(r.partition, r.offset)]))
        assert all(e is None for e in consumer.commit().values())
    everything = {(w.partition, w.offset) for w in written}
    assert set(seen) == everything and set(seen.values()) == {1}
    assert reported == everything
    assert {t for _, t in acknowledged(wire)} == {ACCEPT} and partition_errors(wire) == []


def test_read_committed_share_group_never_delivers_aborted_records(kafka):
    group, _ = earliest_group(kafka, isolation_level="read_committed")
    topic = kafka.new_topic(partitions=1)
    txns = kafka.produce_transactions(topic, committed=8, aborted=8)
    sentinel = kafka.produce(topic, 1, start_index=500)[0]
    seen: list = []
    with WireLog() as wire, share_consumer(kafka, group, topic) as consumer:
        read_until(consumer, lambda: any(r.offset == sentinel.offset for r in seen), seen.append)
    assert Counter(r.offset for r in seen) == Counter([w.offset for w in txns.committed] + [sentinel.offset])
    assert {r.offset: r.value for r in seen if r.offset != sentinel.offset} == {
        w.offset: w.value for w in txns.committed}
    # What Kafka acquired for this member skips the aborted records; the markers and any
    # offset acquired without a record went back as GAP acknowledgements (type 0).
    acquired_offsets = {o for first, last, _ in acquired(wire) for o in range(first, last + 1)}
    assert not acquired_offsets & {w.offset for w in txns.aborted}
    assert {t for _, t in acknowledged(wire)} <= {0, ACCEPT}


def test_mixed_group_with_confluent_share_consumers_loses_nothing(kafka):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    group, _ = earliest_group(kafka)
    topic = kafka.new_topic(partitions=2)
    written = kafka.produce(topic, 60, producer_config={"batch.num.messages": 5})
    seen = read_beside_confluent_member(confluent_kafka, kafka, group, topic, len(written))
    assert set(seen) == {(w.partition, w.offset) for w in written}
