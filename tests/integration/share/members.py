"""What the share-group tests have in common: a group name, a member, polling until done,
reading beside a librdkafka share consumer, and the acknowledgements sent on the wire."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from typing import Any, Callable

from kproto import KafkaShareConsumer
from tests.brokers.share_groups import configure_share_group
from tests.threads import TestThread

DEADLINE_S = 60  # an upper bound for reads that must happen; never reached when all is well


def new_group() -> str:
    return "sg-" + uuid.uuid4().hex[:10]


def earliest_group(broker: Any, **settings: Any) -> tuple[str, dict]:
    """A new share group reading from the earliest offset, with ``settings``
    (:func:`~tests.brokers.share_groups.configure_share_group`); on Kafka, whose settings are
    per group, also heartbeats every 500 ms so members join quickly (the mock's heartbeat
    setting is cluster-wide: left alone). Returns (group, the settings in force)."""
    group = new_group()
    if broker.name != "mock":
        settings.setdefault("heartbeat_interval_ms", 500)
    return group, configure_share_group(broker, group, auto_offset_reset="earliest", **settings)


def share_consumer(broker: Any, group: str, topic: str, **configs: Any) -> KafkaShareConsumer:
    configs.setdefault("fetch_max_wait_ms", 100)
    return KafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group, **configs)


def records(polled: dict) -> list:
    return [r for batch in polled.values() for r in batch]


def read_until(consumer: KafkaShareConsumer, done: Callable[[], bool], on_record: Callable[[Any], Any] = lambda r: None,
               timeout_s: float = DEADLINE_S) -> None:
    """Poll ``consumer`` until ``done()``; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the share group did not deliver in time"
        for record in records(consumer.poll(200)):
            on_record(record)


def read_beside_confluent_member(confluent_kafka: Any, broker: Any, group: str, topic: str, count: int) -> Counter:
    """Read ``topic`` with a kproto member of share group ``group`` (5 records a poll) and
    a librdkafka ``ShareConsumer`` of it until together they saw ``count`` distinct records:
    ``{(partition, offset): times seen}``. Fails after ``DEADLINE_S``."""
    seen: Counter = Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def confluent_member() -> None:
        consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                for message in consumer.poll(0.2):
                    if message.error() is None:
                        with lock:
                            seen[(message.partition(), message.offset())] += 1
        finally:
            consumer.close()

    thread = TestThread(target=confluent_member)
    thread.start()
    try:
        with share_consumer(broker, group, topic, max_poll_records=5) as consumer:
            deadline = time.monotonic() + DEADLINE_S
            while True:
                thread.raise_if_failed()
                with lock:
                    if len(seen) == count:
                        break
                assert time.monotonic() < deadline, "records were lost"
                for r in records(consumer.poll(100)):
                    with lock:
                        seen[(r.partition, r.offset)] += 1
    finally:
        stop.set()
        thread.join(30)
    return seen


def acknowledged(wire: Any) -> Counter:
    """(offset, type) -> how often it was sent, in ShareFetch and ShareAcknowledge
    (``wire``: a :class:`tests.wire_log.WireLog`)."""
    sent: Counter = Counter()
    for api in ("ShareFetch", "ShareAcknowledge"):
        for e in wire.sent(api):
            for t in e.tree["topics"]:
                for p in t["partitions"]:
                    for b in p["acknowledgement_batches"]:
                        types = b["acknowledge_types"]
                        for i, offset in enumerate(range(b["first_offset"], b["last_offset"] + 1)):
                            sent[(offset, types[i] if len(types) > 1 else types[0])] += 1
    return sent
