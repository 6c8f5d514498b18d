"""The KIP-848 engine's application side: wakeup, poll(0), and misuse errors.

Wakeup tests need no broker (nothing answers on the bootstrap address, so the calls block);
the poll(0) test reads from the mock cluster.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from kproto.consumer.kafka_consumer import KafkaConsumer
from kproto.errors import IllegalStateError, KafkaError, WakeupException
from kproto.structs import TopicPartition as TP
from tests.threads import TestThread
from tests.integration.kip848.harness import drain

NOWHERE = "127.0.0.1:1"
CONSUMER_GROUP_HEARTBEAT = 68  # API key


def _wake_when_blocked(consumer: KafkaConsumer, blocked) -> threading.Thread:
    def run() -> None:
        deadline = time.monotonic() + 30
        while not blocked() and time.monotonic() < deadline:
            time.sleep(0.01)
        consumer.wakeup()

    thread = TestThread(target=run, name="waker", daemon=True)
    thread.start()
    return thread


def test_wakeup_interrupts_a_blocking_call() -> None:
    consumer = KafkaConsumer(bootstrap_servers=NOWHERE, group_id="g", group_protocol="consumer")
    try:
        waker = _wake_when_blocked(consumer, lambda: consumer._delegate._wakeup_trigger.active_task() is not None)
        with pytest.raises(WakeupException):
            consumer.committed(TP("t", 0), timeout_ms=60_000)
        waker.join()
    finally:
        consumer.close(timeout_ms=0)


def test_wakeup_interrupts_poll() -> None:
    consumer = KafkaConsumer(bootstrap_servers=NOWHERE, group_id="g", group_protocol="consumer")
    try:
        consumer.assign([TP("t", 0)])
        waker = _wake_when_blocked(consumer, lambda: consumer._delegate._inflight.event is not None)
        with pytest.raises(WakeupException):
            consumer.poll(timeout_ms=60_000)
        waker.join()
    finally:
        consumer.close(timeout_ms=0)


def test_poll_without_subscription_and_commit_without_group_are_refused() -> None:
    consumer = KafkaConsumer(bootstrap_servers=NOWHERE, group_protocol="consumer")
    try:
        with pytest.raises(IllegalStateError, match="not subscribed"):
            consumer.poll(timeout_ms=0)
        with pytest.raises(KafkaError, match="group_id"):
            consumer.commit()
        with pytest.raises(KafkaError, match="group_id"):
            consumer.subscribe(["t"])
    finally:
        consumer.close(timeout_ms=0)


@pytest.mark.needs("kip848")
def test_poll_zero_returns_buffered_records_without_spinning(broker) -> None:
    topic = broker.new_topic(partitions=2, prefix="k848")
    written = broker.produce(topic, 40)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                             group_protocol="consumer", auto_offset_reset="earliest", enable_auto_commit=False,
                             fetch_max_wait_ms=100, max_poll_records=3)
    try:
        consumer.subscribe([topic])
        seen = set()
        deadline = time.monotonic() + 60
        while len(seen) < len(written):
            assert time.monotonic() < deadline, "poll(0) made no progress: {} records".format(len(seen))
            for tp, records in consumer.poll(timeout_ms=0).items():
                assert len(records) <= 3
                seen.update((tp.partition, r.offset) for r in records)
            time.sleep(0.005)  # an application doing other work between polls
        assert seen == {(r.partition, r.offset) for r in written}
    finally:
        consumer.close()


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_the_first_poll_returns_when_records_arrive_not_at_its_timeout(broker, group_protocol: str) -> None:
    """Freshly assigned partitions have no position: the first poll round looks them up
    and fetches nothing. The poll must start the round that fetches once the positions
    arrive (Java's pollForFetches waits at most retry.backoff.ms while positions are
    missing), not wait out its own timeout with no fetch in flight (the KIP-848 engine
    did: each first poll took its whole timeout)."""
    topic = broker.new_topic(partitions=4, prefix="k848")
    written = broker.produce(topic, 20)
    timeout_s = 20
    for _ in range(2):  # a new consumer each time: the second on a warm broker
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol=group_protocol,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            consumer.assign([TP(topic, p) for p in range(4)])
            started = time.monotonic()
            got = consumer.poll(timeout_ms=timeout_s * 1000)
            elapsed = time.monotonic() - started
            assert got, "no records in {:.1f} s".format(elapsed)
            assert elapsed < timeout_s, "the first poll returned its records only at its timeout"
            assert {(tp.partition, r.offset) for tp, rs in got.items() for r in rs} <= \
                {(r.partition, r.offset) for r in written}
        finally:
            consumer.close()


@pytest.mark.needs("kip848")
def test_unsubscribe_leaves_and_subscribe_rejoins(broker) -> None:
    topic = broker.new_topic(partitions=2, prefix="k848")
    first = broker.produce(topic, 10)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                             group_protocol="consumer", auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumer.subscribe([topic])
        assert drain(consumer, 10) == {(r.partition, r.offset) for r in first}
        consumer.commit()
        consumer.unsubscribe()
        assert consumer.assignment() == set() and consumer.subscription() is None
        second = broker.produce(topic, 6, start_index=10)
        consumer.subscribe([topic])
        assert drain(consumer, 6) == {(r.partition, r.offset) for r in second}  # resumed at the commit
    finally:
        consumer.close()


def test_subscribe_while_the_leave_is_in_flight_rejoins(mock_cluster_factory, caplog) -> None:
    """unsubscribe() returns once the leave heartbeat is sent, so a subscribe() right after it
    rejoins while the leave is still in flight (the mock answers it 1 s late): its answer
    (epoch -1) must not become the rejoining member's epoch. Taken as the member's, the next
    heartbeat leaves again (the mock then fences the member, which rejoins a second time)."""
    cluster = mock_cluster_factory(1)  # one broker: it is the coordinator
    topic = cluster.new_topic(partitions=2, prefix="k848")
    written = cluster.produce(topic, 12)
    everything = {(r.partition, r.offset) for r in written}
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g-" + topic,
                             group_protocol="consumer", auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumer.subscribe([topic])
        assert drain(consumer, len(written)) == everything
        caplog.set_level(logging.DEBUG, logger="kproto.events")  # the member's transitions from here
        cluster.push_broker_request_error_rtts(1, CONSUMER_GROUP_HEARTBEAT, [(0, 1000)])  # the leave's answer
        consumer.unsubscribe()
        consumer.subscribe([topic])
        assert drain(consumer, len(written)) == everything  # nothing committed: read from the start
        assert cluster.broker_error_stack_count(1, CONSUMER_GROUP_HEARTBEAT) == 0  # the delay was used
        events = [r.kproto_event for r in caplog.records if hasattr(r, "kproto_event")]  # close() leaves again
    finally:
        consumer.close()
    rejoined = next(i for i, e in enumerate(events) if e["event"] == "member_state" and e["state"] == "JOINING")
    after = events[rejoined:]
    assert not [e for e in after if e["event"] == "member_epoch" and e["epoch"] < 0], after
    assert "FENCED" not in {e["state"] for e in after if e["event"] == "member_state"}, after


@pytest.mark.needs("kip848")
def test_a_pending_wakeup_does_not_cut_close_short(broker) -> None:
    """close() disables wakeups (Java's): one left pending does not fail the final auto-commit."""
    topic = broker.new_topic(partitions=1, prefix="k848")
    written = broker.produce(topic, 5)
    group = "g-" + topic
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, group_protocol="consumer",
                             auto_offset_reset="earliest", enable_auto_commit=True, auto_commit_interval_ms=600_000)
    try:
        consumer.subscribe([topic])
        assert drain(consumer, len(written)) == {(r.partition, r.offset) for r in written}
        consumer.wakeup()  # nothing blocks: it stays pending
    finally:
        consumer.close()
    check = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, group_protocol="consumer")
    try:
        assert check.committed(TP(topic, 0)) == len(written)  # the close's auto-commit went out
    finally:
        check.close()


@pytest.mark.needs("kip848")
def test_manual_assignment_commits_seeks_and_looks_up_offsets(broker) -> None:
    topic = broker.new_topic(partitions=2, prefix="k848")
    written = broker.produce(topic, 12)
    tp0, tp1 = TP(topic, 0), TP(topic, 1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                             group_protocol="consumer", auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        assert consumer.partitions_for_topic(topic) == {0, 1}  # fetched on demand
        consumer.assign([tp0, tp1])
        everything = {(r.partition, r.offset) for r in written}
        assert drain(consumer, len(written)) == everything
        consumer.commit()
        end = max(r.offset for r in written if r.partition == 0) + 1
        assert consumer.committed(tp0) == end == consumer.position(tp0)
        assert consumer.end_offsets([tp0]) == {tp0: end}
        assert consumer.beginning_offsets([tp0]) == {tp0: 0}
        in_p0 = sorted((r for r in written if r.partition == 0), key=lambda r: r.offset)
        target = in_p0[len(in_p0) // 2].timestamp
        expected = min(r.offset for r in in_p0 if r.timestamp >= target)
        found = consumer.offsets_for_times({tp0: target, tp1: 2**62})
        assert set(found) == {tp0, tp1} and found[tp1] is None
        if broker.name == "apache_kafka":  # the mock does not search by timestamp (answers -1)
            assert found[tp0].offset == expected
        consumer.seek_to_beginning()
        assert drain(consumer, len(written)) == everything
    finally:
        consumer.close()


def test_poll_without_updating_offsets_leaves_positions_to_the_caller(broker) -> None:
    topic = broker.new_topic(partitions=1, prefix="k848")
    written = broker.produce(topic, 12)
    tp = TP(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                             group_protocol="consumer", auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumer.assign([tp])
        deadline = time.monotonic() + 30
        first: list = []
        while not first:
            assert time.monotonic() < deadline
            first = consumer.poll(timeout_ms=200, max_records=3, update_offsets=False).get(tp, [])
        # librdkafka may write the first record in a batch of its own and the mock answers
        # one batch per partition per fetch, so the first poll can hold fewer than three.
        taken = len(first)
        assert [r.offset for r in first] == list(range(taken)) and 1 <= taken <= 3
        assert consumer.position(tp) == 0  # not moved: the caller decides
        again: list = []
        while not again:
            assert time.monotonic() < deadline
            again = consumer.poll(timeout_ms=200, max_records=3, update_offsets=False).get(tp, [])
        assert [r.offset for r in again] == [r.offset for r in first]
        assert consumer.position(tp) == 0
        consumer.seek(tp, taken)  # the caller moves on itself
        assert drain(consumer, len(written) - taken) == {(0, r.offset) for r in written[taken:]}
    finally:
        consumer.close()
