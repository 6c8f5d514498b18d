"""Mixed classic groups on the mock cluster: kproto and confluent-kafka (librdkafka) members
share a topic with range and cooperative-sticky, with either implementation as the leader
(the mock elects the first member that joined)."""

from __future__ import annotations


import pytest

from tests.support.members import Member, wait_for
from tests.support.confluent_member import ConfluentMember


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
@pytest.mark.parametrize("leader", ["kproto", "confluent"])
def test_kproto_and_librdkafka_members_share_a_topic(mock_cluster_factory, strategy, leader):
    cluster = mock_cluster_factory(3)
    cluster.group_initial_rebalance_delay(50)
    topic = cluster.new_topic(partitions=6)
    written = cluster.produce(topic, 120)
    want = {(w.topic, w.partition, w.offset) for w in written}
    group = "mixed-{}-{}".format(strategy, leader)
    ours = Member("kproto", cluster.bootstrap_servers, group, [topic], partition_assignment_strategy=strategy)
    theirs = ConfluentMember(cluster.bootstrap_servers, group, topic, strategy)
    first, second = (ours, theirs) if leader == "kproto" else (theirs, ours)
    first.start()
    try:
        wait_for(lambda: len(first.assignment()) == 6, "the first member to own every partition")
        second.start()

        def split():
            a = {(tp[0], tp[1]) for tp in ours.assignment()}
            b = set(theirs.assignment())
            return len(a) == 3 and len(b) == 3 and not a & b

        wait_for(split, "a 3/3 split between kproto and librdkafka")
        more = cluster.produce(topic, 60, start_index=120)
        want |= {(w.topic, w.partition, w.offset) for w in more}
        wait_for(lambda: want <= ours.processed_set() | theirs.processed_set(), "every record to be consumed")
        # The records after the split were consumed by the partition's owner.
        mine = {(tp[0], tp[1]) for tp in ours.assignment()}
        for w in more:
            consumer = ours if (w.topic, w.partition) in mine else theirs
            assert (w.topic, w.partition, w.offset) in consumer.processed_set()
    finally:
        for m in (second, first):
            if m.is_alive():
                m.stop()
