"""What the KIP-848 engine's integration tests share: a consumer on the new protocol, driving
it until a condition holds, its membership manager, and draining records."""

from __future__ import annotations

import time

from kproto.consumer.kafka_consumer import KafkaConsumer


DEADLINE_S = 60


def make_consumer(broker, group: str, **overrides) -> KafkaConsumer:
    config = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, group_protocol="consumer",
                  auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100)
    config.update(overrides)
    return KafkaConsumer(**config)


def drive(consumers, until, seen: dict, timeout_s: float = DEADLINE_S) -> None:
    """Poll every consumer in turn until ``until()`` holds; records go into ``seen``."""
    deadline = time.monotonic() + timeout_s
    while not until():
        assert time.monotonic() < deadline, "condition not reached; seen {} records".format(
            sum(len(v) for v in seen.values()))
        for consumer in consumers:
            for tp, records in consumer.poll(timeout_ms=100).items():
                for record in records:
                    seen.setdefault((tp.partition, record.offset), []).append(consumer)


def membership(consumer: KafkaConsumer):
    return consumer._delegate.membership


def drain(consumer: KafkaConsumer, n: int) -> set:
    """Poll until ``n`` distinct (partition, offset) pairs arrived (a bound turns a hang into a failure)."""
    seen: set = set()
    deadline = time.monotonic() + 60
    while len(seen) < n:
        assert time.monotonic() < deadline, "got {} of {}".format(len(seen), n)
        for tp, records in consumer.poll(timeout_ms=200).items():
            seen.update((tp.partition, r.offset) for r in records)
    return seen
