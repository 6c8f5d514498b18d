"""Classic groups on Tansu (a real broker with its own group coordinator; rebalances of two
members take ~15 s there, so this is one combined scenario): an eager rebalance with a
commit inside the revoke callback, then a static member's restart without a rebalance."""

from __future__ import annotations

from kproto import KafkaConsumer, TopicPartition
from tests.support.members import Member, wait_for

STATIC = dict(session_timeout_ms=10000, heartbeat_interval_ms=300, max_poll_interval_ms=60000)


def test_eager_revoke_commit_and_static_member_restart_without_rebalance(tansu_broker):
    broker = tansu_broker
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 20)
    ends = {}
    for w in written:
        ends[w.partition] = max(ends.get(w.partition, 0), w.offset + 1)
    group = "tansu-static"
    revoke_commits = []

    def commit_on_revoke(member, kind, partitions):
        if kind == "revoked" and partitions:
            member.consumer.commit()  # inside the callback, while the group prepares to rebalance
            revoke_commits.append(frozenset(partitions))

    a = Member("a", broker.bootstrap_servers, group, [topic], commit="none", group_instance_id="a",
               listener_hook=commit_on_revoke, **STATIC)
    b = Member("b", broker.bootstrap_servers, group, [topic], group_instance_id="b", **STATIC)
    a2 = None
    a.start()
    try:
        wait_for(lambda: len(a.processed_set()) == 20, "the first member to consume everything", limit_s=90)
        b.start()
        wait_for(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1, "a 1/1 split", limit_s=90)
        assert revoke_commits and revoke_commits[0] == frozenset(TopicPartition(topic, p) for p in (0, 1))
        check = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, enable_auto_commit=False)
        try:
            assert {p: check.committed(TopicPartition(topic, p)) for p in (0, 1)} == ends
        finally:
            check.close()

        generation, a_parts = a.generation(), a.assignment()
        with b.lock:
            b_events = len(b.events)
        a.stop(close=True)  # static: no LeaveGroup, the coordinator keeps a's place
        a2 = Member("a2", broker.bootstrap_servers, group, [topic], group_instance_id="a", **STATIC)
        a2.start()
        wait_for(lambda: a2.assignment(), "the restarted static member's assignment", limit_s=90)
        assert a2.assignment() == a_parts and a2.generation() == generation
        with b.lock:
            assert len(b.events) == b_events  # b saw no rebalance
        assert b.generation() == generation
    finally:
        for m in (a2, b, a):
            if m is not None and m.is_alive():
                m.stop()
