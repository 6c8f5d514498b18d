"""Classic engine against a cluster no broker of which can be reached (a closed local port).

Metadata refreshes then fail at once with ``NoBrokersAvailable``; the blocking calls must
still wait to their deadline, asking again every ``retry_backoff_ms`` (Java's
awaitMetadataUpdate), and ``wakeup()`` must end a blocking coordinator lookup.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from kproto.consumer.classic.classic_kafka_consumer import ClassicKafkaConsumer
from kproto.consumer.classic.metadata_wait import await_metadata_update
from kproto.consumer.config import ConsumerConfig
from kproto.net.client import NetworkClient
from tests.brokers._net import closed_port
from tests.threads import TestThread


@pytest.fixture
def dead_bootstrap() -> Iterator[str]:
    """127.0.0.1:<port> with nothing listening (kept bound, never listening, throughout
    the test: :func:`tests.brokers._net.closed_port`)."""
    with closed_port() as port:
        yield "127.0.0.1:{}".format(port)


def _delegate(bootstrap: str, **configs) -> ClassicKafkaConsumer:
    configs.setdefault("retry_backoff_ms", 100)
    configs.setdefault("reconnect_backoff_ms", 50)
    configs.setdefault("reconnect_backoff_max_ms", 100)
    return ClassicKafkaConsumer(ConsumerConfig(bootstrap_servers=bootstrap, **configs))


def _counting(client: NetworkClient) -> list[int]:
    calls = [0]
    original = client.request_metadata_update

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)
    client.request_metadata_update = counted
    return calls


def test_metadata_wait_asks_again_until_the_deadline(dead_bootstrap):
    client = NetworkClient(bootstrap_servers=dead_bootstrap, retry_backoff_ms=100, reconnect_backoff_ms=50,
                           reconnect_backoff_max_ms=100)
    try:
        calls = _counting(client)
        clock = lambda: time.monotonic() * 1000  # noqa: E731
        start = clock()
        assert await_metadata_update(client, start + 800, clock, 100) is False
        assert clock() >= start + 800
        # More than one refresh asked (the first fails at once), but spaced by the backoff.
        assert 2 <= calls[0] <= 800 // 100 + 2
    finally:
        client.close()


def test_partitions_for_topic_and_topics_wait_their_timeout(dead_bootstrap):
    consumer = _delegate(dead_bootstrap, default_api_timeout_ms=700)
    try:
        calls = _counting(consumer.client)
        start = time.monotonic()
        # The client's clock counts whole milliseconds (Java's Time.milliseconds()), so a
        # deadline can fall up to 1 ms before the float clock's.
        assert consumer.partitions_for_topic("t") is None
        assert time.monotonic() - start >= 0.7 - 0.001
        assert calls[0] >= 2
        start = time.monotonic()
        assert consumer.topics() == set()
        assert time.monotonic() - start >= 0.7 - 0.001
    finally:
        consumer.close(timeout_ms=0)


def test_offset_lookup_backs_off_between_failed_refreshes(dead_bootstrap):
    consumer = _delegate(dead_bootstrap)
    try:
        calls = _counting(consumer.client)
        with pytest.raises(errors.KafkaTimeoutError):
            consumer.beginning_offsets([TopicPartition("t", 0)], 800)
        # Not a spin: about one refresh per retry_backoff_ms.
        assert 2 <= calls[0] <= 800 // 100 + 3
    finally:
        consumer.close(timeout_ms=0)


def test_wakeup_ends_a_blocking_coordinator_lookup(dead_bootstrap):
    consumer = _delegate(dead_bootstrap, group_id="g-unreachable")
    try:
        consumer.subscribe(["t"])
        consumer.wakeup()
        deadline = consumer._time_ms() + 60000
        # The coordinator's lookup blocks (no partitions yet); the wakeup ends it.
        with pytest.raises(errors.WakeupException):
            consumer.update_assignment_metadata_if_needed(deadline)
        # Once only: the next short wait ends without it.
        assert consumer.update_assignment_metadata_if_needed(consumer._time_ms() + 50) is False
    finally:
        consumer.close(timeout_ms=0)


def test_wakeup_from_another_thread_ends_poll_of_an_unreachable_group(dead_bootstrap):
    import threading
    consumer = KafkaConsumer("t", bootstrap_servers=dead_bootstrap, group_id="g-unreachable-2",
                             retry_backoff_ms=100, reconnect_backoff_ms=50, reconnect_backoff_max_ms=100)
    try:
        started = threading.Event()
        raised = []

        def run():
            started.set()
            try:
                consumer.poll(timeout_ms=120000)
            except errors.WakeupException as exc:
                raised.append(exc)
        thread = TestThread(target=run, daemon=True)
        thread.start()
        started.wait()
        consumer.wakeup()
        thread.join()
        assert len(raised) == 1
    finally:
        consumer.close(timeout_ms=0)
