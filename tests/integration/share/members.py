"""What the share-group tests have in common: a group name, a member, polling until done."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

from kproto import KafkaShareConsumer

DEADLINE_S = 60  # an upper bound for reads that must happen; never reached when all is well


def new_group() -> str:
    return "sg-" + uuid.uuid4().hex[:10]


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
