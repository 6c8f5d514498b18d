"""Classic consumer groups of kproto members on librdkafka's mock cluster (fresh cluster per
test, initial rebalance delay lowered): sharing, joining and leaving, eviction, cooperative
moves, injected coordinator errors."""

from __future__ import annotations

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.test_group_support import Member, assert_disjoint_per_generation, processed_union, wait_for


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


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_share_records_while_members_join_and_leave(cluster, strategy):
    topic = cluster.new_topic(partitions=8)
    written = cluster.produce(topic, 1600)
    want = written_set(written)
    bootstrap = cluster.bootstrap_servers
    a = Member("a", bootstrap, "share", [topic], partition_assignment_strategy=strategy, per_record_s=0.002)
    b = Member("b", bootstrap, "share", [topic], partition_assignment_strategy=strategy, per_record_s=0.002)
    c = Member("c", bootstrap, "share", [topic], partition_assignment_strategy=strategy, per_record_s=0.002)
    everyone = [a, b, c]
    a.start()
    try:
        wait_for(lambda: len(a.processed_set()) >= 100, "a to consume")
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
