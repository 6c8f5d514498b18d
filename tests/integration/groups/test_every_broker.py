"""Classic groups on every broker kind that has them (the `broker` fixture: mock, Tansu,
Apache Kafka when Docker is there): one member consumes and commits; where rebalances are
fast, two members split a topic and the survivor takes over after a LeaveGroup."""

from __future__ import annotations

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.support.members import GROUP_CONFIG, Member, processed_union, wait_for


def ends_of(written):
    ends = {}
    for w in written:
        ends[w.partition] = max(ends.get(w.partition, 0), w.offset + 1)
    return ends


@pytest.mark.needs("classic_groups")
def test_one_member_consumes_commits_and_leaves(broker):
    topic = broker.new_topic(partitions=3)
    written = broker.produce(topic, 30)
    cfg = dict(GROUP_CONFIG, session_timeout_ms=10000)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="one-" + topic, **cfg)
    got = set()
    try:
        c.subscribe([topic])

        def step():
            for records in c.poll(100).values():
                got.update((r.partition, r.offset) for r in records)
            return len(got) >= 30
        wait_for(step, "every record", limit_s=90, step_s=0)
        assert got == {(w.partition, w.offset) for w in written}
        c.commit()
        assert {p: c.committed(TopicPartition(topic, p)) for p in range(3)} == ends_of(written)
        assert c.group_metadata().member_id
    finally:
        c.close()


@pytest.mark.needs("classic_groups", "fast_classic_rebalance")
def test_two_members_split_a_topic_and_one_takes_over_after_the_other_leaves(broker):
    topic = broker.new_topic(partitions=4)
    group = "two-" + topic
    # At least Kafka's group.min.session.timeout.ms (6000): a shorter one fails JoinGroup.
    a = Member("a", broker.bootstrap_servers, group, [topic], session_timeout_ms=6000)
    b = Member("b", broker.bootstrap_servers, group, [topic], session_timeout_ms=6000)
    a.start()
    try:
        wait_for(lambda: len(a.assignment()) == 4, "the first member's assignment")
        b.start()
        wait_for(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, "a 2/2 split")
        b.stop()  # close: revoke, commit, LeaveGroup
        wait_for(lambda: len(a.assignment()) == 4, "the survivor to take everything")
        written = broker.produce(topic, 40)
        wait_for(lambda: {(w.topic, w.partition, w.offset) for w in written} <= processed_union([a]),
                 "the survivor to consume every partition")
    finally:
        for m in (b, a):
            if m.is_alive():
                m.stop()
