"""A librdkafka (confluent-kafka) group member in its own thread, beside kproto members."""

from __future__ import annotations

import threading

import pytest

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
