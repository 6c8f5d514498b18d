"""Hostile Fetch data at the consumer level: a corrupt batch from a real broker.

A Tansu broker advertises the address of a small proxy (so every connection goes through
it; :mod:`tests.brokers.corrupting_proxy`); the proxy passes requests untouched and, in
responses, flips one byte of a marker value, as a failing disk or network would. The
batch holding the marker then fails its CRC-32C in every Fetch response. ``poll()`` must
return every record before it, then raise ``CorruptRecordError`` naming topic, partition
and offset (again on the next poll, nothing skipped silently); after ``seek()`` past it,
consumption goes on with no record lost or repeated. Without CRC checks the flipped value
is returned as it arrived.
"""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from kproto.tools.embedded import create_topic
from tests.brokers.corrupting_proxy import FLIPPED, MARKER, CorruptingProxy
from tests.brokers.tansu import tansu_behind


@pytest.fixture(scope="module")
def proxied_tansu():
    proxy = CorruptingProxy()
    try:
        with tansu_behind(proxy):
            yield proxy
    finally:
        proxy.close()


def produce_around_marker(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    """10 records, the marker record alone in its batch, 10 more; (offset, value) each."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "compression.type": "none",
                         "broker.address.family": "v4", "enable.idempotence": False})
    delivered: list[tuple[int, bytes]] = []

    def on_delivery(err, msg) -> None:
        assert err is None, err
        delivered.append((msg.offset(), msg.value()))

    values = [b"before-%d" % i for i in range(10)], [b"x" + MARKER], [b"after-%d" % i for i in range(10)]
    for group in values:
        for value in group:
            producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
        assert producer.flush(30) == 0  # one batch per group (the marker's is its own)
    return sorted(delivered)


def poll_until_error(consumer: KafkaConsumer, timeout_s: float = 30.0):
    records: list = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            batch = consumer.poll(timeout_ms=200)
        except errors.CorruptRecordError as exc:
            return records, exc
        records += [r for rs in batch.values() for r in rs]
    raise AssertionError("no CorruptRecordError within {} s; got {} records".format(timeout_s, len(records)))


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])  # both engines share the fetch core
def test_corrupt_batch_raises_then_seek_past_it_loses_nothing(proxied_tansu, group_protocol):
    topic = "corrupt-{}".format(time.monotonic_ns())
    create_topic(proxied_tansu.bootstrap_servers, topic, 1)
    written = produce_around_marker(proxied_tansu.bootstrap_servers, topic)
    marker_offset = next(o for o, v in written if MARKER in v)
    tp = TopicPartition(topic, 0)
    with KafkaConsumer(bootstrap_servers=proxied_tansu.bootstrap_servers, auto_offset_reset="earliest",
                       fetch_max_wait_ms=100, group_protocol=group_protocol) as consumer:
        consumer.assign([tp])
        before, error = poll_until_error(consumer)
        assert proxied_tansu.flipped > 0
        assert [(r.offset, r.value) for r in before] == [w for w in written if w[0] < marker_offset]
        assert (error.topic, error.partition, error.offset) == (topic, 0, marker_offset)
        assert "seek past" in str(error)
        assert consumer.position(tp) == marker_offset
        # Raised again on the next poll: nothing is skipped behind the caller's back.
        with pytest.raises(errors.CorruptRecordError):
            for _ in range(50):
                consumer.poll(timeout_ms=200)
        consumer.seek(tp, marker_offset + 1)
        after: list = []
        deadline = time.monotonic() + 30
        while len(after) < 10 and time.monotonic() < deadline:
            after += [r for rs in consumer.poll(timeout_ms=200).values() for r in rs]
        assert [(r.offset, r.value) for r in after] == [w for w in written if w[0] > marker_offset]
        assert consumer.poll(timeout_ms=300) == {}


def test_without_crc_checks_the_flipped_value_is_returned(proxied_tansu):
    topic = "corrupt-nocrc-{}".format(time.monotonic_ns())
    create_topic(proxied_tansu.bootstrap_servers, topic, 1)
    written = produce_around_marker(proxied_tansu.bootstrap_servers, topic)
    with KafkaConsumer(bootstrap_servers=proxied_tansu.bootstrap_servers, auto_offset_reset="earliest",
                       fetch_max_wait_ms=100, check_crcs=False) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        records: list = []
        deadline = time.monotonic() + 30
        while len(records) < len(written) and time.monotonic() < deadline:
            records += [r for rs in consumer.poll(timeout_ms=200).values() for r in rs]
    assert [(r.offset, r.value) for r in records] == [(o, v.replace(MARKER, FLIPPED)) for o, v in written]


def test_a_corrupt_batch_among_many_small_ones_is_found_exactly(proxied_tansu):
    """Eight partitions of small batches: a fetch's CRCs are checked in one pass
    (kproto.records.batch_crcs), which must fall back to finding the one corrupt batch:
    the error names its partition and offset, and every other record arrives exactly once."""
    from confluent_kafka import Producer

    topic = "corrupt-many-{}".format(time.monotonic_ns())
    partitions, bad_partition = 8, 5
    create_topic(proxied_tansu.bootstrap_servers, topic, partitions)
    producer = Producer({"bootstrap.servers": proxied_tansu.bootstrap_servers, "linger.ms": 0,
                         "compression.type": "none", "broker.address.family": "v4",
                         "enable.idempotence": False})
    written: list[tuple[int, int, bytes]] = []

    def on_delivery(err, msg) -> None:
        assert err is None, err
        written.append((msg.partition(), msg.offset(), msg.value()))

    for group in ("before", "middle", "after"):
        for p in range(partitions):
            values = [b"x" + MARKER] if (group, p) == ("middle", bad_partition) else \
                [b"%s-%d-%d" % (group.encode(), p, i) for i in range(4)]
            for value in values:
                producer.produce(topic, value=value, partition=p, on_delivery=on_delivery)
        assert producer.flush(30) == 0  # a small batch per partition and group
    marker = next((p, o) for p, o, v in written if MARKER in v)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with KafkaConsumer(bootstrap_servers=proxied_tansu.bootstrap_servers, auto_offset_reset="earliest",
                       fetch_max_wait_ms=100) as consumer:
        consumer.assign(tps)
        got, error = poll_until_error(consumer)
        assert (error.topic, error.partition, error.offset) == (topic, *marker)
        consumer.seek(TopicPartition(topic, marker[0]), marker[1] + 1)
        deadline = time.monotonic() + 30
        while len(got) < len(written) - 1 and time.monotonic() < deadline:
            got += [r for rs in consumer.poll(timeout_ms=200).values() for r in rs]
    assert sorted((r.partition, r.offset, r.value) for r in got) == sorted(w for w in written if MARKER not in w[2])


def test_kproto_aio_checks_crcs_ahead_in_slices_and_still_names_the_corrupt_batch(proxied_tansu):
    """kproto.aio checks a response's CRCs a slice per turn of the loop before it collects
    (``CrcPrecheck``); a failed combined check leaves the per-batch checks to name the
    batch: the records before it, then CorruptRecordError at its offset, again on the next
    call; after a seek past it, the rest exactly once."""
    import asyncio

    from kproto.aio import AIOKafkaConsumer
    from tests.support.aio_harness import run

    topic = "corrupt-aio-{}".format(time.monotonic_ns())
    create_topic(proxied_tansu.bootstrap_servers, topic, 1)
    written = produce_around_marker(proxied_tansu.bootstrap_servers, topic)
    marker_offset = next(o for o, v in written if MARKER in v)
    tp = TopicPartition(topic, 0)

    async def main() -> None:
        async with AIOKafkaConsumer(bootstrap_servers=proxied_tansu.bootstrap_servers,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=100) as consumer:
            consumer.assign([tp])
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            before: list = []
            error = None
            while error is None:
                assert loop.time() < deadline, "no CorruptRecordError; got {} records".format(len(before))
                try:
                    before += [r for rs in (await consumer.getmany(timeout_ms=200)).values() for r in rs]
                except errors.CorruptRecordError as exc:
                    error = exc
            assert [(r.offset, r.value) for r in before] == [w for w in written if w[0] < marker_offset]
            assert (error.topic, error.partition, error.offset) == (  # type: ignore[attr-defined]
                topic, 0, marker_offset)
            with pytest.raises(errors.CorruptRecordError):
                await consumer.getmany(timeout_ms=200)
            consumer.seek(tp, marker_offset + 1)
            after: list = []
            while len(after) < 10:
                assert loop.time() < deadline, "got {} records after the seek".format(len(after))
                after += [r for rs in (await consumer.getmany(timeout_ms=200)).values() for r in rs]
            assert [(r.offset, r.value) for r in after] == [w for w in written if w[0] > marker_offset]
            assert await consumer.getmany(timeout_ms=300) == {}

    run(main)
