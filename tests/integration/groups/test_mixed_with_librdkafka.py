"""Mixed classic groups on the mock cluster: kproto and confluent-kafka (librdkafka) members
share a topic with range and cooperative-sticky, with either implementation as the leader
(the mock elects the first member that joined)."""

from __future__ import annotations

import threading

import pytest

from tests.integration.groups.members import Member, wait_for
from tests.threads import TestThread

confluent_kafka = pytest.importorskip("confluent_kafka")


class ConfluentMember(TestThread):
    """A librdkafka consumer in its own thread: polls, records, commits."""

    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        super().__init__(name="confluent-member", daemon=True)
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "partition.assignment.strategy": strategy,
            "session.timeout.ms": 3000, "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
        self.topic = topic
        self.lock = threading.Lock()
        self.processed: set = set()
        self.assigned: frozenset = frozenset()
        self._stop_event = threading.Event()

    def work(self) -> None:
        self.consumer.subscribe([self.topic])
        while not self._stop_event.is_set():
            msg = self.consumer.poll(0.1)
            with self.lock:
                self.assigned = frozenset((tp.topic, tp.partition) for tp in self.consumer.assignment())
            if msg is None or msg.error():
                continue
            with self.lock:
                self.processed.add((msg.topic(), msg.partition(), msg.offset()))
            try:
                self.consumer.commit(message=msg, asynchronous=False)
            except confluent_kafka.KafkaException:
                pass  # refused during a rebalance: redone by the next owner
        self.consumer.close()

    def assignment(self) -> frozenset:
        self.raise_if_failed()
        with self.lock:
            return self.assigned

    def processed_set(self) -> set:
        self.raise_if_failed()
        with self.lock:
            return set(self.processed)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)  # re-raises what the thread died of
        assert not self.is_alive()


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
