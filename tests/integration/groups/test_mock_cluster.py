"""Classic consumer groups of kproto members on librdkafka's mock cluster (fresh cluster per
test, initial rebalance delay lowered): sharing, joining and leaving, eviction, cooperative
moves, injected coordinator errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.support.members import (LingerInFirstEmptyAssignment, Member, UnhurriedCooperativeSticky,
                                      assert_disjoint_per_generation, assert_no_committed_work_redone,
                                      processed_after_revocation, processed_union, wait_for)


@pytest.fixture
def cluster(mock_cluster_factory):
    c = mock_cluster_factory(3)
    c.group_initial_rebalance_delay(50)
    return c


def written_set(written):
    return {(w.topic, w.partition, w.offset) for w in written}


def committed_offsets(bootstrap, group, topic, partitions):
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: c.committed(TopicPartition(topic, p)) for p in partitions}
    finally:
        c.close()


def end_offsets(written):
    ends = {}
    for w in written:
        ends[w.partition] = max(ends.get(w.partition, 0), w.offset + 1)
    return ends


# 20k records on 8 partitions (the 100k scale is test_assign's; here it only lengthened
# the processing): processing is slowed per batch (~200 batches of 100) so that members
# still join and leave while most records wait (a alone would finish first).
SHARE_RECORDS = 20_000


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_share_records_while_members_join_and_leave(cluster, strategy):
    topic = cluster.new_topic(partitions=8)
    written = cluster.produce(topic, SHARE_RECORDS)
    want = written_set(written)
    bootstrap = cluster.bootstrap_servers
    config = dict(partition_assignment_strategy=strategy, per_batch_s=0.03, max_poll_records=100)
    a = Member("a", bootstrap, "share", [topic], **config)
    b = Member("b", bootstrap, "share", [topic], **config)
    c = Member("c", bootstrap, "share", [topic], **config)
    everyone = [a, b, c]
    a.start()
    try:
        wait_for(lambda: len(a.processed_set()) >= 1000, "a to consume")
        b.start()
        wait_for(lambda: b.assignment(), "b to get partitions")
        c.start()
        wait_for(lambda: c.assignment(), "c to get partitions")
        a.stop(close=True)  # leaves midway: its partitions move to b and c
        wait_for(lambda: len(b.assignment()) + len(c.assignment()) == 8, "b and c to take a's partitions")
        wait_for(lambda: want <= processed_union(everyone), "every record to be processed")
        # Commits refused during rebalances are made good by the next owner's commits.
        wait_for(lambda: committed_offsets(bootstrap, "share", topic, range(8)) == end_offsets(written),
                 "the group's committed offsets to reach the end of every partition")
    finally:
        for m in everyone:
            if m.is_alive():
                m.stop()
    assert want <= processed_union(everyone)
    assert_disjoint_per_generation(everyone)
    assert_no_committed_work_redone(everyone)
    # Midway: b and c joined while records were left, and took part.
    assert b.processed and c.processed and len(a.processed) < SHARE_RECORDS


KILLED_MEMBER = """
import sys, time
from kproto import KafkaConsumer
c = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2], session_timeout_ms=2000,
                  heartbeat_interval_ms=200, auto_offset_reset="earliest", enable_auto_commit=False)
c.subscribe([sys.argv[3]])
while True:
    c.poll(100)
    if c.assignment():
        print("assigned", len(c.assignment()), flush=True)
"""


def test_member_killed_without_leave_group_is_evicted_after_session_timeout(cluster, tmp_path):
    topic = cluster.new_topic(partitions=4)
    script = tmp_path / "member.py"
    script.write_text(KILLED_MEMBER)
    repo = str(Path(__file__).resolve().parents[3])  # kproto importable in the child
    child = subprocess.Popen([sys.executable, str(script), cluster.bootstrap_servers, "evict", topic],
                             stdout=subprocess.PIPE, text=True, cwd=str(tmp_path),
                             env={**os.environ, "PYTHONPATH": repo})
    survivor = None
    try:
        assert child.stdout.readline().startswith("assigned")
        survivor = Member("survivor", cluster.bootstrap_servers, "evict", [topic])
        survivor.start()
        wait_for(lambda: 0 < len(survivor.assignment()) < 4, "the survivor to share the partitions")
        child.kill()  # no LeaveGroup, no more heartbeats
        child.wait(10)
        wait_for(lambda: len(survivor.assignment()) == 4, "the dead member's partitions to move after its session")
        written = cluster.produce(topic, 40)
        wait_for(lambda: written_set(written) <= survivor.processed_set(), "the survivor to consume all partitions")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if survivor is not None:
            survivor.stop()


def test_cooperative_sticky_join_moves_only_the_partitions_the_newcomer_takes(cluster):
    topic = cluster.new_topic(partitions=6)
    bootstrap = cluster.bootstrap_servers
    # Enough records, processed slowly enough, that the old member is still busy throughout.
    backlog = cluster.produce(topic, 6000)
    old = Member("old", bootstrap, "coop", [topic], partition_assignment_strategy=[UnhurriedCooperativeSticky()],
                 per_batch_s=0.03)
    # The newcomer lingers in its first (empty) assignment callback, so the second round
    # cannot complete for a while after the old member's revocation, and fresh records land
    # on every partition meanwhile: a window in which the old member must keep fetching and
    # processing what it kept (left to timing, the window was ~0 ms at times). The window
    # stays open until the old member was seen processing a kept partition after revoking.
    linger = LingerInFirstEmptyAssignment(lambda: cluster.produce(topic, 60, start_index=len(backlog)),
                                          until=lambda: processed_after_revocation(old))
    new = Member("new", bootstrap, "coop", [topic], partition_assignment_strategy=[UnhurriedCooperativeSticky()],
                 per_batch_s=0.03, listener_hook=linger)
    old.start()
    try:
        # Every partition fetching (positions validated) before the rebalance starts: as in
        # Java, positions are not validated while a rebalance is in progress.
        wait_for(lambda: len(old.assignment()) == 6 and len({p for _t, p, _o in old.processed}) == 6,
                 "the first member to own and fetch everything")
        new.start()
        wait_for(lambda: len(new.assignment()) == 3 and len(old.assignment()) == 3, "a 3/3 split")
        written = cluster.produce(topic, 60, start_index=len(backlog) + 60)
        wait_for(lambda: written_set(written + linger.during_window + backlog) <= processed_union([old, new]),
                 "both to consume")
        with old.lock:
            old_events = list(old.events)
            old_stamps = list(old.event_stamps)
            old_processed = list(old.stamped)
        with new.lock:
            new_events = list(new.events)
            new_stamps = list(new.event_stamps)
    finally:
        new.stop()
        old.stop()
    taken = frozenset().union(*[p for k, _g, p in new_events if k == "assigned"])
    assert len(taken) == 3
    assert linger.lingered.is_set()
    # Through the rebalance: between its revocation and the end of the newcomer's linger
    # (the second round cannot complete before), the old member kept processing the
    # partitions it keeps.
    revoked_at = next(s for (kind, _g, parts), s in zip(old_events, old_stamps) if kind == "revoked")
    handed_at = next(s for (kind, _g, parts), s in zip(new_events, new_stamps) if kind == "assigned" and parts)
    assert linger.window_closed < handed_at
    kept = {(tp.topic, tp.partition) for tp in frozenset().union(*[p for k, _g, p in old_events]) - taken}
    assert any(revoked_at < s < linger.window_closed and (t, p) in kept for s, t, p, _off in old_processed)
    # The old member: everything assigned once, then exactly the newcomer's partitions
    # revoked (the partitions it keeps are never revoked), and nothing added afterwards.
    kinds = [(kind, parts) for kind, _gen, parts in old_events]
    assert kinds[0][0] == "assigned" and len(kinds[0][1]) == 6
    revocations = [parts for kind, parts in kinds if kind == "revoked"]
    assert revocations == [taken]
    assert all(not parts for kind, parts in kinds[1:] if kind == "assigned")
    assert_disjoint_per_generation([old, new])


def test_group_requests_have_their_own_connection_so_a_parked_join_does_not_stall_fetches(cluster):
    """As Java (coordinator node id Integer.MAX_VALUE - broker id), group requests travel on a
    connection of their own: a broker answers one connection's requests in order, so a
    JoinGroup parked until every member rejoins would otherwise hold up the fetches of the
    partitions a cooperative member keeps when they live on the coordinator's broker."""
    topic = cluster.new_topic(partitions=2)
    group = "own-connection"
    cluster.set_coordinator("group", group, 1)
    for partition in (0, 1):
        cluster.set_partition_leader(topic, partition, 1)
    backlog = cluster.produce(topic, 20)
    old = Member("old", cluster.bootstrap_servers, group, [topic],
                 partition_assignment_strategy=[UnhurriedCooperativeSticky()])
    # In its first (empty) assignment the newcomer holds the second round open: the old
    # member has revoked one partition and its JoinGroup waits for the newcomer; it stays
    # there until the old member processed a fresh record of the partition it kept.
    linger = LingerInFirstEmptyAssignment(
        lambda: cluster.produce(topic, 20, start_index=len(backlog)),
        until=lambda: processed_after_revocation(old, written_set(linger.during_window)))
    new = Member("new", cluster.bootstrap_servers, group, [topic],
                 partition_assignment_strategy=[UnhurriedCooperativeSticky()], listener_hook=linger)
    old.start()
    try:
        wait_for(lambda: written_set(backlog) <= processed_union([old]), "the first member to read everything")
        new.start()
        wait_for(lambda: len(new.assignment()) == 1 and len(old.assignment()) == 1, "a 1/1 split")
        wait_for(lambda: written_set(linger.during_window) <= processed_union([old, new]), "the records of the window")
        with old.lock:
            old_events, old_stamps, old_processed = list(old.events), list(old.event_stamps), list(old.stamped)
        with new.lock:
            new_events = list(new.events)
    finally:
        new.stop()
        old.stop()
    assert linger.lingered.is_set()
    revoked_at = next(s for (kind, _g, _p), s in zip(old_events, old_stamps) if kind == "revoked")
    taken = {tp.partition for kind, _g, parts in new_events if kind == "assigned" for tp in parts}
    (kept,) = {0, 1} - taken
    fresh = {(w.partition, w.offset) for w in linger.during_window if w.partition == kept}
    # The kept partition's fresh records arrived while the second round was still waiting
    # for the newcomer (on a shared connection they would wait behind the JoinGroup).
    assert fresh and any(revoked_at < s < linger.window_closed for s, _t, p, off in old_processed if (p, off) in fresh)


def test_leader_assigns_topics_only_other_members_subscribe_to(cluster):
    shared = cluster.new_topic(partitions=2)
    only_b = cluster.new_topic(partitions=2)
    a = Member("a", cluster.bootstrap_servers, "diff", [shared])
    b = Member("b", cluster.bootstrap_servers, "diff", [shared, only_b])
    a.start()  # the first to join leads, and has never seen only_b
    try:
        wait_for(lambda: len(a.assignment()) == 2, "the leader's assignment")
        b.start()
        wait_for(lambda: {tp.topic for tp in b.assignment()} >= {only_b}, "the other member's own topic")
        wait_for(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 3, "range over both topics")
        assert {tp.topic for tp in a.assignment()} == {shared}
        assert_disjoint_per_generation([a, b])
    finally:
        b.stop()
        a.stop()


def _chosen_protocol(member: Member):
    # The protocol the group chose in the member's current generation.
    return member.consumer._delegate.coordinator.membership.generation.protocol_name


def test_eager_to_cooperative_migration_with_both_assignors_listed(cluster):
    """The rolling upgrade Java documents: members list cooperative-sticky and range (the
    group rebalances eagerly with cooperative-sticky's assignment), then restart one by one
    with cooperative-sticky alone. Nothing is lost, no partition has two owners in one
    generation, and the group ends on cooperative-sticky."""
    topic = cluster.new_topic(partitions=6)
    written = cluster.produce(topic, 6000)
    want = written_set(written)
    bootstrap = cluster.bootstrap_servers
    both = dict(partition_assignment_strategy="cooperative-sticky,range", per_batch_s=0.02, max_poll_records=100)
    upgraded = dict(partition_assignment_strategy="cooperative-sticky", per_batch_s=0.02, max_poll_records=100)
    a = Member("a", bootstrap, "migrate", [topic], **both)
    b = Member("b", bootstrap, "migrate", [topic], **both)
    everyone = [a, b]
    a.start()
    try:
        wait_for(lambda: a.assignment(), "a to get partitions")
        b.start()
        wait_for(lambda: b.assignment() and len(a.assignment()) + len(b.assignment()) == 6, "a and b to share")
        assert _chosen_protocol(a) == "cooperative-sticky"  # first in both lists
        assert all(kind != "lost" for kind, _, _ in a.events)
        # Rolling restart, one member at a time, with cooperative-sticky only.
        b.stop(close=True)
        b2 = Member("b2", bootstrap, "migrate", [topic], **upgraded)
        everyone.append(b2)
        b2.start()
        wait_for(lambda: b2.assignment() and len(a.assignment()) + len(b2.assignment()) == 6, "a and b2 to share")
        a.stop(close=True)
        a2 = Member("a2", bootstrap, "migrate", [topic], **upgraded)
        everyone.append(a2)
        a2.start()
        wait_for(lambda: a2.assignment() and len(a2.assignment()) + len(b2.assignment()) == 6, "a2 and b2 to share")
        assert _chosen_protocol(a2) == _chosen_protocol(b2) == "cooperative-sticky"
        wait_for(lambda: want <= processed_union(everyone), "every record to be processed")
        # Cooperative from b2's first generation on: it never had to give up all six
        # partitions at once (eager revokes everything it owns at each rebalance).
        assert all(len(parts) < 6 for kind, _, parts in b2.events if kind == "revoked")
    finally:
        for m in everyone:
            if m.is_alive():
                m.stop()
    assert want <= processed_union(everyone)
    assert_disjoint_per_generation(everyone)
    assert_no_committed_work_redone(everyone)


class _EverythingToFirst:
    """A custom assignor through the documented interface (kafka-python's shape: a name,
    ``assign``, ``metadata``, ``on_assignment``); every partition to the smallest member id."""

    name = "everything-to-first"

    def __init__(self):
        self.generations = []

    def metadata(self, topics):
        from kproto.consumer.classic.consumer_protocol import Subscription
        return Subscription(sorted(topics))

    def assign(self, cluster, members):
        from kproto.consumer.classic.consumer_protocol import Assignment
        first = min(m.member_id for m in members)
        parts = sorted({TopicPartition(t, p) for m in members for t in m.metadata.topics
                        for p in cluster.partitions_for_topic(t)})
        return {m.member_id: Assignment(parts if m.member_id == first else []) for m in members}

    def on_assignment(self, assignment, generation):
        self.generations.append(generation)


def test_custom_assignor_instance_and_kafka_python_assignor_class_run_a_real_group(cluster):
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as KafkaPythonRoundRobin

    topic = cluster.new_topic(partitions=4)
    bootstrap = cluster.bootstrap_servers
    custom_a, custom_b = _EverythingToFirst(), _EverythingToFirst()
    a = Member("a", bootstrap, "custom", [topic], partition_assignment_strategy=[custom_a])
    b = Member("b", bootstrap, "custom", [topic], partition_assignment_strategy=[custom_b])
    everyone = [a, b]
    try:
        a.start()
        b.start()
        # The member left empty has an empty assignment before its SyncGroup completes too, so
        # the wait includes on_assignment having run on both (it once passed too early here).
        wait_for(lambda: {len(a.assignment()), len(b.assignment())} == {0, 4} and a.generation() == b.generation()
                 and a.generation() > 0 and custom_a.generations and custom_b.generations,
                 "one member to own all four partitions, on_assignment run on both")
        for m in everyone:
            m.stop()
        # An application's own kafka-python assignor class (kafka-python's own ones become
        # kproto's of the same name), run as it is, as the group's protocol.
        class OwnRoundRobin(KafkaPythonRoundRobin):
            name = "roundrobin-kafka-python"

        c = Member("c", bootstrap, "custom-kp", [topic], partition_assignment_strategy=[OwnRoundRobin])
        d = Member("d", bootstrap, "custom-kp", [topic], partition_assignment_strategy=[OwnRoundRobin])
        everyone += [c, d]
        c.start()
        d.start()
        wait_for(lambda: len(c.assignment()) == 2 and len(d.assignment()) == 2 and c.generation() == d.generation(),
                 "kafka-python's roundrobin to split the partitions")
    finally:
        for m in everyone:
            if m.is_alive():
                m.stop()
    # Generations are per group.
    assert_disjoint_per_generation(everyone[:2])
    assert_disjoint_per_generation(everyone[2:])
