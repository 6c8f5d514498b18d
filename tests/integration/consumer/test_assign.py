"""KafkaConsumer (classic engine) with assign() against real brokers (mock cluster, Tansu).

Records are written by confluent-kafka's producer (tests.brokers.seeding) and compared
field by field with what kproto returns.
"""

from __future__ import annotations

import threading
import time

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from tests.brokers.seeding import CODECS
from tests.threads import TestThread
from tests.support.reading import assert_same, consume

pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka")


def consumer_for(broker, **configs) -> KafkaConsumer:
    configs.setdefault("auto_offset_reset", "earliest")
    configs.setdefault("fetch_max_wait_ms", 100)
    return KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, **configs)


def assign_all(consumer: KafkaConsumer, topic: str, partitions: int = 4) -> list[TopicPartition]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    return tps


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_consumed_field_by_field(broker, codec):
    topic = broker.new_topic(partitions=4)
    written = broker.produce(topic, 400, codec=codec)
    with consumer_for(broker) as consumer:
        tps = assign_all(consumer, topic)
        assert_same(consume(consumer, len(written)), written)
        # Nothing more arrives, and the positions sit at the end of each partition.
        assert consumer.poll(timeout_ms=300) == {}
        for tp in tps:
            expected = max((w.offset for w in written if w.partition == tp.partition), default=-1) + 1
            assert consumer.position(tp) == expected
            assert consumer.highwater(tp) == expected


def test_max_poll_records_and_pipelining(broker):
    topic = broker.new_topic(partitions=4)
    written = broker.produce(topic, 600)
    with consumer_for(broker, max_poll_records=37) as consumer:
        assign_all(consumer, topic)
        records: list = []
        deadline = time.monotonic() + 30
        while len(records) < len(written) and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=200)
            n = sum(len(v) for v in batch.values())
            assert n <= 37
            records.extend(r for v in batch.values() for r in v)
        # The per-call argument is lower still.
        assert_same(records, written)
    with consumer_for(broker, max_poll_records=37) as consumer:
        assign_all(consumer, topic)
        assert sum(len(v) for v in _first_batch(consumer, max_records=5).values()) <= 5


def _first_batch(consumer, **kw):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=200, **kw)
        if batch:
            return batch
    raise AssertionError("no records within 20 s")


def test_seek_pause_resume(broker):
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 200)
    by_partition = {p: [w for w in written if w.partition == p] for p in (0, 1)}
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with consumer_for(broker) as consumer:
        consumer.assign([tp0, tp1])
        assigned = consumer.assignment()
        consumer.pause(tp1)
        assert consumer.paused() == {tp1}
        # Snapshots: the same object until the assignment changes, which callers cannot change.
        assert consumer.assignment() is assigned and assigned == {tp0, tp1}
        with pytest.raises(AttributeError):
            assigned.add(TopicPartition(topic, 5))  # type: ignore[attr-defined]
        with pytest.raises(AttributeError):
            consumer.paused().clear()  # type: ignore[attr-defined]
        got = consume(consumer, len(by_partition[0]))
        assert_same(got, by_partition[0])
        assert consumer.poll(timeout_ms=300) == {}  # tp1 stays paused
        consumer.resume(tp1)
        assert consumer.paused() == set()
        assert_same(consume(consumer, len(by_partition[1])), by_partition[1])

        # seek back into the middle: exactly the tail again.
        middle = by_partition[0][40].offset
        consumer.seek(tp0, middle)
        assert consumer.position(tp0) == middle
        assert_same(consume(consumer, len(by_partition[0]) - 40), by_partition[0][40:])

        consumer.seek_to_beginning(tp1)
        assert consumer.position(tp1, timeout_ms=10000) == 0
        assert_same(consume(consumer, len(by_partition[1])), by_partition[1])

        consumer.seek_to_end()
        end = by_partition[0][-1].offset + 1
        if "list_offsets_latest_is_log_end" in broker.capabilities:
            assert consumer.position(tp0, timeout_ms=10000) == end
            assert consumer.poll(timeout_ms=300) == {}
        else:  # Tansu: the last batch's base offset + 1 (tests.brokers docstring)
            position = consumer.position(tp0, timeout_ms=10000)
            assert 0 < position <= end
            rest = [r for r in consume(consumer, end - position) if r.partition == 0]
            assert_same(rest, [w for w in by_partition[0] if w.offset >= position])
        consumer.assign([tp1])
        assert consumer.assignment() == {tp1} and assigned == {tp0, tp1}


def test_latest_reset_sees_only_new_records(broker):
    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 30)
    tp = TopicPartition(topic, 0)
    with consumer_for(broker, auto_offset_reset="latest") as consumer:
        consumer.assign([tp])
        assert consumer.position(tp, timeout_ms=10000) == 30 or broker.name == "tansu"
        if broker.name == "tansu":
            # Tansu's ListOffsets(LATEST) is the last batch's base offset + 1 (see
            # tests.brokers); the Fetch high watermark is right: skip to it.
            consumer.poll(timeout_ms=300)
            consumer.seek(tp, consumer.highwater(tp) or 30)
        new = broker.produce(tp.topic, 10, start_index=30, tag="new")
        assert_same(consume(consumer, 10), new)


# Tansu answers a Fetch past the log end with error 0 and old batches (measured), never
# OFFSET_OUT_OF_RANGE, so only the mock can show the reset.
@pytest.mark.broker_kinds("mock")
def test_offset_out_of_range_resets_per_policy(broker):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 50)
    tp = TopicPartition(topic, 0)
    with consumer_for(broker, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 10_000)
        assert_same(consume(consumer, 50), written)
    with consumer_for(broker, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        with pytest.raises(errors.NoOffsetForPartitionError):
            consumer.poll(timeout_ms=2000)  # no committed offset, no policy
        consumer.seek(tp, 10_000)
        with pytest.raises(errors.OffsetOutOfRangeError):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=200)


def test_offsets_lookups(broker):
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 40)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    with consumer_for(broker) as consumer:
        assert consumer.partitions_for_topic(topic) == {0, 1}
        assert topic in consumer.topics()
        assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        if "list_offsets_latest_is_log_end" in broker.capabilities:
            assert consumer.end_offsets(tps) == {tp: 20 for tp in tps}
        # Neither local broker searches by timestamp (the mock answers -1, Tansu offset 0
        # with its own clock, measured): only the answer's shape is checked here.
        tp = TopicPartition(topic, written[-1].partition)
        found = consumer.offsets_for_times({tp: written[-1].timestamp})
        assert set(found) == {tp}
        assert found[tp] is None or 0 <= found[tp].offset <= written[-1].offset


def test_wakeup_from_another_thread_interrupts_poll(broker):
    topic = broker.new_topic(partitions=1)
    with consumer_for(broker) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.poll(timeout_ms=100)
        timer = threading.Timer(0.3, consumer.wakeup)
        timer.start()
        started = time.monotonic()
        with pytest.raises(errors.WakeupException):
            consumer.poll(timeout_ms=60_000)
        timer.join()
        assert time.monotonic() - started < 30  # long before the poll timeout
        # One wakeup, one exception: the consumer keeps working.
        assert consumer.poll(timeout_ms=100) == {}


def test_second_thread_gets_concurrent_modification_error(broker):
    topic = broker.new_topic(partitions=1)
    with consumer_for(broker) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        seen: list = []
        main_thread = threading.get_ident()

        def other_thread():
            # Wait until the main thread holds the consumer inside poll() (a fixed sleep
            # raced with a slow start of poll() on a loaded machine: the call then succeeded
            # and the early wakeup() ended the poll with nothing seen). Only reading the
            # owner: calling the consumer here could itself make poll() the refused call.
            deadline = time.monotonic() + 30
            while consumer._confinement._owner != main_thread and time.monotonic() < deadline:
                time.sleep(0.01)
            try:
                consumer.assignment()
            except Exception as exc:  # the assertion happens on the main thread
                seen.append(exc)
            finally:
                consumer.wakeup()

        t = TestThread(target=other_thread)
        t.start()
        with pytest.raises(errors.WakeupException):
            consumer.poll(timeout_ms=60_000)
        t.join()
        assert len(seen) == 1 and isinstance(seen[0], errors.ConcurrentModificationError)


def test_deserializers(broker):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 50)
    with consumer_for(broker, key_deserializer=lambda b: None if b is None else b[::-1],
                      value_deserializer=lambda b: ("v", b)) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got = sorted(consume(consumer, 50), key=lambda r: r.offset)
        assert [r.key for r in got] == [None if w.key is None else w.key[::-1] for w in written]
        assert [r.value for r in got] == [("v", w.value) for w in written]


def _await_positions(consumer: KafkaConsumer) -> None:
    """Block until every assigned partition has a position (metadata, connections and the
    offset reset done), so that consumer_timeout_ms measures only the gaps between
    records, not a start-up that a loaded machine makes slow."""
    for tp in consumer.assignment():
        consumer.position(tp, timeout_ms=30_000)


def test_iteration_stops_after_consumer_timeout(broker):
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 60)
    with consumer_for(broker, consumer_timeout_ms=1500) as consumer:
        assign_all(consumer, topic, 2)
        _await_positions(consumer)
        assert_same(list(consumer), written)


def test_check_crcs_off_still_reads(broker):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 50, codec="gzip")
    with consumer_for(broker, check_crcs=False) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert_same(consume(consumer, 50), written)


@pytest.mark.slow
@pytest.mark.broker_kinds("tansu")  # the mock drops old data past ~5 MiB per partition
@pytest.mark.parametrize("codec", CODECS)
def test_hundred_thousand_records_over_four_partitions(broker, codec):
    topic = broker.new_topic(partitions=4)
    written = broker.produce(topic, 100_000, codec=codec)
    with consumer_for(broker, max_poll_records=2000) as consumer:
        assign_all(consumer, topic)
        assert_same(consume(consumer, len(written), timeout_s=60), written)
        assert consumer.poll(timeout_ms=300) == {}


def test_iteration_restarts_after_seek_and_stops_when_closed(broker):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 30)
    tp = TopicPartition(topic, 0)
    consumer = consumer_for(broker, consumer_timeout_ms=1500)
    consumer.assign([tp])
    _await_positions(consumer)
    first = [next(consumer) for _ in range(3)]
    assert [r.offset for r in first] == [0, 1, 2]
    consumer.seek(tp, 20)
    assert_same(list(consumer), written[20:])
    consumer.close()
    assert list(consumer) == []


def test_first_records_wait_for_no_retry_backoff(broker):
    """At startup the offset reset waits for the metadata answer and for the leader's
    connection, not for retry_backoff_ms: with a backoff far longer than the poll, the
    first poll still returns records."""
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 20)
    with consumer_for(broker, retry_backoff_ms=120_000) as consumer:
        assign_all(consumer, topic, partitions=2)
        records = [r for batch in consumer.poll(timeout_ms=20_000).values() for r in batch]
        assert records, "the first poll waited out retry_backoff_ms"
        assert {(r.partition, r.offset) for r in records} <= {(w.partition, w.offset) for w in written}
    with consumer_for(broker, retry_backoff_ms=120_000) as consumer:
        tps = [TopicPartition(topic, p) for p in range(2)]
        assert consumer.beginning_offsets(tps, timeout_ms=20_000) == {tp: 0 for tp in tps}


def test_poll_without_update_offsets_leaves_positions_to_the_caller(broker):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 50)
    tp = TopicPartition(topic, 0)
    with consumer_for(broker, max_poll_records=10) as consumer:
        consumer.assign([tp])
        # One poll returns one partition's fetched data, and librdkafka's batches are not
        # fixed (the mock answers one batch per Fetch): up to 10 records from offset 0.
        first = _first_batch(consumer, update_offsets=False)[tp]
        taken = len(first)
        assert 1 <= taken <= 10
        assert [r.offset for r in first] == [w.offset for w in written[:taken]]
        assert consumer.position(tp) == 0
        # Not moved: the same records again.
        assert [r.offset for r in _first_batch(consumer, update_offsets=False)[tp]] == [r.offset for r in first]
        # Moved by the caller (kafka-python's iterator does this per record): the rest follows.
        consumer.seek(tp, taken)
        rest = _first_batch(consumer, update_offsets=False)[tp]
        assert 1 <= len(rest) <= 10
        assert [r.offset for r in rest] == [w.offset for w in written[taken:taken + len(rest)]]
        assert consumer.position(tp) == taken
        # A normal poll moves the position again.
        consumer.seek(tp, 45)
        assert_same(consume(consumer, 5), written[45:])
        assert consumer.position(tp) == 50
