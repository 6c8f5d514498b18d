"""KafkaShareConsumer's configuration and API contract: bad settings and arguments fail at
once with kproto.errors; wakeup, metrics, unsubscribe/resubscribe on every broker with
share groups (librdkafka's mock, Apache Kafka 4.1+)."""

from __future__ import annotations

import threading
import time

import pytest

from kproto import KafkaShareConsumer
from kproto.consumer.share.share_consumer_config import ShareConsumerConfig, share_consumer_config
from kproto.errors import (ConcurrentModificationError, IllegalArgumentError, IllegalStateError,
                           KafkaConfigurationError, WakeupException)
from tests.integration.share.members import earliest_group, read_until
from tests.integration.share.members import new_group as group
from tests.threads import TestThread
from tests.wire_log import WireLog

share_groups = pytest.mark.needs("share_groups")


@pytest.mark.parametrize("bad", [
    {},                                                   # no group_id
    {"group_id": "g", "auto_offset_reset": "earliest"},   # a share group's reset is the broker's
    {"group_id": "g", "enable_auto_commit": True},
    {"group_id": "g", "isolation_level": "read_committed"},
    {"group_id": "g", "group_instance_id": "i"},
    {"group_id": "g", "share_acknowledgement_mode": "sometimes"},
    {"group_id": "g", "share_acquire_mode": "greedy"},
    {"group_id": "g", "max_poll_records": 0},             # KafkaConsumer's own checks apply
    {"group_id": "g", "no_such_setting": 1},
])
def test_bad_configuration_is_refused_at_construction(bad):
    with pytest.raises(KafkaConfigurationError):
        share_consumer_config(bad)


def test_share_settings_are_split_from_the_consumer_settings():
    config, share = share_consumer_config({"group_id": "g", "share_acknowledgement_mode": "EXPLICIT",
                                           "max_poll_records": 7, "fetch_max_wait_ms": 50})
    assert share == ShareConsumerConfig(share_acknowledgement_mode="explicit", share_acquire_mode="batch_optimized")
    assert (config["group_id"], config["max_poll_records"], config["fetch_max_wait_ms"]) == ("g", 7, 50)


@share_groups
def test_api_misuse_fails_fast(broker):
    consumer = KafkaShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group())
    try:
        with pytest.raises(IllegalStateError):
            consumer.poll(0)  # not subscribed
        with pytest.raises(IllegalArgumentError):
            consumer.subscribe(["ok", ""])
        with pytest.raises(IllegalArgumentError):
            consumer.poll(-1)
        with pytest.raises(IllegalStateError):
            consumer.acknowledge("not a record")
        assert consumer.subscription() == set()
        assert consumer.acquisition_lock_timeout_ms() is None  # nothing fetched yet
    finally:
        consumer.close()
    with pytest.raises(IllegalStateError):
        consumer.poll(0)  # closed
    consumer.close()  # twice is fine


@share_groups
def test_wakeup_interrupts_a_blocked_poll(broker):
    topic = broker.new_topic(partitions=1)
    with KafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group()) as consumer:
        timer = threading.Timer(0.3, consumer.wakeup)
        timer.start()
        started = time.monotonic()
        with pytest.raises(WakeupException):
            consumer.poll(60_000)
        timer.join()
        assert time.monotonic() - started < 60
        assert consumer.poll(0) == {}  # usable afterwards


@share_groups
def test_a_second_thread_gets_concurrent_modification_error(broker):
    topic = broker.new_topic(partitions=1)
    with KafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group()) as consumer:
        main_thread = threading.get_ident()
        seen: list = []

        def other_thread() -> None:
            # Only read the owner while waiting: a call here could make poll() the refused one.
            deadline = time.monotonic() + 30
            while consumer._confinement._owner != main_thread and time.monotonic() < deadline:
                time.sleep(0.01)
            try:
                consumer.subscription()
            except Exception as exc:  # asserted on the main thread
                seen.append(exc)
            finally:
                consumer.wakeup()

        thread = TestThread(target=other_thread)
        thread.start()
        with pytest.raises(WakeupException):
            consumer.poll(60_000)
        thread.join()
        assert len(seen) == 1 and isinstance(seen[0], ConcurrentModificationError)
        assert "KafkaShareConsumer is not safe for multi-threaded access" in str(seen[0])


@share_groups
def test_unsubscribe_then_subscribe_again_reads_on(broker):
    name, _ = earliest_group(broker)
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 10)
    seen = set()
    with KafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=name,
                            max_poll_records=4, fetch_max_wait_ms=100) as consumer:
        deadline = time.monotonic() + 60
        handed = 0
        while not seen:
            assert time.monotonic() < deadline
            batch = [r for rs in consumer.poll(200).values() for r in rs]
            handed += len(batch)
            seen.update(r.offset for r in batch)
        consumer.unsubscribe()  # accepts what the last poll returned
        assert consumer.subscription() == set()
        consumer.subscribe([topic])
        while len(seen) < len(written):
            assert time.monotonic() < deadline
            for r in (r for rs in consumer.poll(200).values() for r in rs):
                assert r.offset not in seen or r.delivery_count > 1
                seen.add(r.offset)
                handed += 1
        metrics = consumer.metrics()
    assert seen == {w.offset for w in written}
    assert metrics["consumer-metrics"]["request-total"] > 0
    fetch = metrics["consumer-share-fetch-manager-metrics"]
    assert fetch["records-consumed-total"] == handed
    assert fetch["fetch-total"] > 0 and fetch["bytes-consumed-total"] > 0
    assert fetch["acknowledgements-error-total"] == 0
    assert metrics["consumer-share-metrics"]["time-between-poll-max"] >= 0
    assert metrics["consumer-share-coordinator-metrics"]["heartbeat-total"] > 0


@share_groups
def test_commit_async_reports_through_the_callback_and_a_failing_callback_raises_from_poll(broker):
    name, _ = earliest_group(broker)
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 5)
    reported: dict = {}

    def callback(offsets, error):
        assert error is None
        for tip, done in offsets.items():
            assert tip.topic == topic and tip.topic_id is not None
            reported.setdefault(tip.partition, set()).update(done)
        raise RuntimeError("callback failed")

    with KafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=name,
                            share_acknowledgement_mode="explicit", fetch_max_wait_ms=100) as consumer:
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < len(written):
            assert time.monotonic() < deadline
            for r in (r for rs in consumer.poll(200).values() for r in rs):
                got.append(r)
                consumer.acknowledge(r)
        # The last poll's acknowledgements are not sent yet: commit_async sends them, the
        # callback set now gets their outcome, and its exception comes out of a later call.
        # If acknowledgements sent with an earlier poll were answered meanwhile, commit_async
        # itself hands them to the callback first (Java's commitAsync begins with
        # handleCompletedAcknowledgements) and raises its exception.
        consumer.set_acknowledgement_commit_callback(callback)
        with pytest.raises(RuntimeError, match="callback failed"):
            consumer.commit_async()
            while time.monotonic() < deadline:
                consumer.poll(100)
        consumer.set_acknowledgement_commit_callback(None)
    assert reported and reported[0] <= {w.offset for w in written}


@share_groups
def test_explicit_mode_errors_send_nothing(broker):
    name, _ = earliest_group(broker)
    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 3)
    other_name, _ = earliest_group(broker)
    with KafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=name, fetch_max_wait_ms=100,
                            share_acknowledgement_mode="explicit") as consumer, \
            KafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=other_name,
                               fetch_max_wait_ms=100) as implicit:
        got: list = []
        read_until(consumer, lambda: got, got.append)
        other: list = []
        read_until(implicit, lambda: other, other.append)
        with WireLog() as wire:
            with pytest.raises(IllegalStateError):
                consumer.poll(0)  # a delivered record was not acknowledged
            consumer.acknowledge(got[0])
            with pytest.raises(IllegalStateError):
                consumer.acknowledge(got[0])  # twice
            with pytest.raises(IllegalStateError):
                consumer.acknowledge(other[0])  # delivered to another consumer
            with pytest.raises(IllegalStateError):
                implicit.acknowledge(other[0])  # implicit mode
            sent = {e.api for e in wire.entries() if e.direction == ">>"}
        assert not sent & {"ShareAcknowledgeRequest", "ShareFetchRequest"}, sent
        for record in got[1:]:
            consumer.acknowledge(record)
        assert all(e is None for e in consumer.commit().values())

