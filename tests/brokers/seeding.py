"""Deterministic test data written by an independent producer (confluent-kafka).

Owns the record recipe (:func:`record_for`), :func:`produce_records` (n records across
partitions with one codec, offsets taken from delivery reports),
:func:`produce_transactions` (a committed and an aborted transaction) and
:func:`produce_batch` (n records as exactly one batch, for tests that need a layout). Everything here
takes a bootstrap string, so a plain script (e.g. a golden-data generator) can use it
without pytest.

The recipe varies what a record reader must handle: null keys, null values (tombstones),
empty values, zero to two headers (one with a null value), multi-byte UTF-8, and values
long enough for the codecs to compress.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

log = logging.getLogger("kproto.tests.brokers")

#: The codecs a test can ask for, by the name confluent-kafka's compression.type uses.
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Kafka's codec ids (the attributes bits of a batch).
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

#: The lowest Produce version that may carry each codec (Kafka refuses zstd below v7 with
#: UNSUPPORTED_COMPRESSION_TYPE).
MIN_PRODUCE_VERSION = {"none": 0, "gzip": 0, "snappy": 0, "lz4": 0, "zstd": 7}
#: The last Produce version that names topics (v13 names them by id).
LAST_PRODUCE_VERSION_BY_NAME = 12


def now_ms() -> int:
    """The current wall-clock time in ms: the default timestamp base of every producer here.

    Records carry ``base + i`` (``i`` the recipe index). Current times, not a fixed date:
    a real broker deletes segments older than its retention (7 days by default) and rolls
    a new segment when a record (e.g. a transaction marker, stamped now) is far newer than
    the segment's first one, so fixed old timestamps split a short log across segments.
    """
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class WrittenRecord:
    """One record as the broker acknowledged it (what a consumer must read back)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int  # CreateTime, ms
    index: int  # position in the producer's sequence (the recipe's ``i``)


def record_for(i: int, *, tag: str = "r") -> tuple[bytes | None, bytes | None,
                                                  tuple[tuple[str, bytes | None], ...]]:
    """Key, value and headers of record ``i`` (pure function of ``i`` and ``tag``)."""
    key = None if i % 7 == 3 else "{}-key-{}".format(tag, i).encode()
    if i % 11 == 5:
        value: bytes | None = None
    elif i % 13 == 6:
        value = b""
    else:
        # Repetitive enough to compress, long enough to span a few hundred bytes.
        value = ("{}-value-{}-".format(tag, i) + "ünïcode-" * (i % 17 + 1)).encode()
    n_headers = i % 3
    headers: tuple[tuple[str, bytes | None], ...] = tuple(
        ("h{}".format(j), None if (i + j) % 5 == 4 else "hv-{}-{}".format(i, j).encode())
        for j in range(n_headers))
    return key, value, headers


def _producer(bootstrap_servers: str, codec: str, extra: dict | None = None):
    from confluent_kafka import Producer

    if codec not in CODECS:
        raise ValueError("codec must be one of {}".format(CODECS))
    conf = {
        "bootstrap.servers": bootstrap_servers,
        "compression.type": codec,
        # Several records per batch (so readers see multi-record batches) but bounded,
        # so a partition of a few hundred records still has several batches.
        "linger.ms": 5,
        "batch.num.messages": 25,
        "enable.idempotence": False,
        "acks": "all",
        "broker.address.family": "v4",
        "log_level": 3,
    }
    conf.update(extra or {})
    return Producer(conf)


def _await_topic_metadata(producer, topic: str, timeout: float) -> None:
    """Have the producer learn ``topic``'s partitions before the first record is queued.

    Records produced while librdkafka does not know the topic wait in its unassigned
    queue and are moved to their partition one at a time when the metadata arrives; with
    flush() already called, each move can go out alone, so the first records of a batch
    left in batches of their own ([1, 39], [28, 12] instead of [40]: 15 of 180 runs of
    40 records with linger.ms 200 under load; none of 180 after this wait).
    """
    producer.list_topics(topic, timeout=timeout)


def _send(producer, topic: str, partitions: Sequence[int], n: int, start_index: int,
          tag: str, timestamp_base: int, sink: list) -> None:
    def on_delivery(err, msg, i):
        if err is not None:
            sink.append(RuntimeError("delivery of record {} failed: {}".format(i, err)))
        else:
            sink.append((i, msg.partition(), msg.offset()))

    for i in range(start_index, start_index + n):
        key, value, headers = record_for(i, tag=tag)
        partition = partitions[(i - start_index) % len(partitions)]
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition,
                                 headers=list(headers), timestamp=timestamp_base + i,
                                 on_delivery=lambda err, msg, i=i: on_delivery(err, msg, i))
                break
            except BufferError:
                # librdkafka's queue is full (100k records by default): wait for deliveries.
                producer.poll(0.1)
        producer.poll(0)


def _collect(topic: str, sink: list, tag: str, timestamp_base: int) -> list[WrittenRecord]:
    errors = [e for e in sink if isinstance(e, Exception)]
    if errors:
        raise errors[0]
    out = []
    for i, partition, offset in sink:
        key, value, headers = record_for(i, tag=tag)
        out.append(WrittenRecord(topic, partition, offset, key, value, headers,
                                 timestamp_base + i, i))
    out.sort(key=lambda r: (r.partition, r.offset))
    return out


def produce_records(bootstrap_servers: str, topic: str, n: int, *,
                    partitions: Sequence[int] = (0,), codec: str = "none",
                    start_index: int = 0, tag: str = "r",
                    timestamp_base: int | None = None, timeout: float = 30.0,
                    producer_config: dict | None = None) -> list[WrittenRecord]:
    """Produce records ``start_index .. start_index+n-1`` of the recipe round-robin over
    ``partitions`` with compression ``codec``; return them sorted by (partition, offset).

    The topic must exist (create it first: the mock and Tansu auto-create with defaults
    you probably do not want). Raises if any delivery fails or does not finish in time.
    Record ``i`` carries timestamp ``timestamp_base + i`` (default base: :func:`now_ms`).
    """
    if timestamp_base is None:
        timestamp_base = now_ms()
    producer = _producer(bootstrap_servers, codec, producer_config)
    _await_topic_metadata(producer, topic, timeout)
    sink: list = []
    _send(producer, topic, list(partitions), n, start_index, tag, timestamp_base, sink)
    remaining = producer.flush(timeout)
    if remaining:
        raise TimeoutError("{} records to {} undelivered after {}s".format(
            remaining, topic, timeout))
    records = _collect(topic, sink, tag, timestamp_base)
    if len(records) != n:
        raise RuntimeError("expected {} delivery reports, got {}".format(n, len(records)))
    return records


@dataclass(frozen=True)
class Transactions:
    """What :func:`produce_transactions` wrote: the committed and the aborted records.

    Control batches (the commit/abort markers) take one offset each after every
    transaction's records in each partition it touched; they are not listed here.
    """

    committed: list[WrittenRecord]
    aborted: list[WrittenRecord]


def produce_transactions(bootstrap_servers: str, topic: str, *, committed: int = 10,
                         aborted: int = 10, partitions: Sequence[int] = (0,),
                         codec: str = "none", start_index: int = 0,
                         transactional_id: str | None = None,
                         timestamp_base: int | None = None,
                         timeout: float = 30.0) -> Transactions:
    """Write ``committed`` records in one committed transaction, then ``aborted`` records
    (indices following on) in an aborted one, with a transactional confluent-kafka
    producer. Records use tag "txc" (committed) and "txa" (aborted) in the recipe, and
    timestamps ``timestamp_base + i`` (default base: :func:`now_ms`). Returns once every
    marker is in the log (:func:`tests.brokers.raw.settled_log_end`).
    """
    if timestamp_base is None:
        timestamp_base = now_ms()
    txn_id = transactional_id or "kproto-seed-{}-{}".format(topic, time.monotonic_ns())
    producer = _producer(bootstrap_servers, codec, {
        "transactional.id": txn_id, "enable.idempotence": True,
        "transaction.timeout.ms": 60000})
    producer.init_transactions(timeout)
    _await_topic_metadata(producer, topic, timeout)
    results: list[list[WrittenRecord]] = []
    for tag, n, first, commit in (("txc", committed, start_index, True),
                                  ("txa", aborted, start_index + committed, False)):
        sink: list = []
        producer.begin_transaction()
        _send(producer, topic, list(partitions), n, first, tag, timestamp_base, sink)
        if producer.flush(timeout):
            raise TimeoutError("transactional records to {} undelivered".format(topic))
        if commit:
            producer.commit_transaction(timeout)
        else:
            producer.abort_transaction(timeout)
        results.append(_collect(topic, sink, tag, timestamp_base))
    # Kafka answers EndTxn before the markers are written: a test reading the log at once
    # could find the last transaction still open, and records it produced next could land
    # before the marker. Returned once no transaction is open where these wrote.
    from tests.brokers import raw

    for partition in sorted({r.partition for records in results for r in records}):
        raw.settled_log_end(bootstrap_servers, topic, partition, timeout)
    return Transactions(committed=results[0], aborted=results[1])


def produce_batch(bootstrap_servers: str, topic: str, n: int, *, partition: int = 0,
                  codec: str = "none", start_index: int = 0, tag: str = "r",
                  timestamp_base: int | None = None) -> list[WrittenRecord]:
    """Write records ``start_index .. start_index+n-1`` of the recipe to one partition as
    exactly one v2 batch (one raw Produce request), for a test that needs the layout.

    librdkafka's batch boundaries are never guaranteed (linger, batch.num.messages and
    load decide them), so the batch is built by kafka-python 3.x's
    ``DefaultRecordBatchBuilder`` (another independent implementation). The broker
    assigns the offsets; the returned records are sorted by offset. The Produce version is
    the highest both kproto and the broker speak, and at least the codec's
    :data:`MIN_PRODUCE_VERSION` (raises :class:`~tests.brokers.raw.RawProtocolError` if the
    broker has none). Timestamps ``timestamp_base + i`` (default base: :func:`now_ms`).
    """
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from kproto.messages import ProduceRequest
    from tests.brokers import raw

    if codec not in CODECS:
        raise ValueError("codec must be one of {}".format(CODECS))
    if n < 1:
        raise ValueError("a batch holds at least one record")
    if timestamp_base is None:
        timestamp_base = now_ms()
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=CODEC_IDS[codec],
                                        is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 24)
    recipe = []
    for delta, i in enumerate(range(start_index, start_index + n)):
        key, value, headers = record_for(i, tag=tag)
        recipe.append((i, key, value, headers))
        if builder.append(delta, timestamp=timestamp_base + i, key=key, value=value,
                          headers=list(headers)) is None:
            raise ValueError("{} records do not fit one batch".format(n))
    request = ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition,
                                                records=bytes(builder.build()))])])
    address = raw.partition_leader(bootstrap_servers, topic, partition)
    # v3 is the first Produce version that carries v2 batches.
    version = raw.negotiated_version(address, ProduceRequest,
                                     minimum=max(3, MIN_PRODUCE_VERSION[codec]))
    # Produce v13 (Kafka 4.x) names topics by id; this writer names them, as the raw
    # Fetch helpers do (Kafka 4.4 answers UNKNOWN_TOPIC_ID to a v13 request by name).
    version = min(version, LAST_PRODUCE_VERSION_BY_NAME)
    part = raw.roundtrip(address, request, version).responses[0].partition_responses[0]
    if part.error_code:
        raise raw.RawProtocolError("Produce v{} of one {}-record batch to {}-{}: error {}"
                                   .format(version, n, topic, partition, part.error_code))
    return [WrittenRecord(topic, partition, part.base_offset + delta, key, value, headers,
                          timestamp_base + i, i)
            for delta, (i, key, value, headers) in enumerate(recipe)]


#: Codecs a legacy (magic 0/1) message can carry (zstd came with magic 2).
LEGACY_CODECS = ("none", "gzip", "snappy", "lz4")


def produce_legacy(bootstrap_servers: str, topic: str, n: int, *, magic: int,
                   codec: str = "none", partition: int = 0, tag: str = "l",
                   timestamp_base: int | None = None) -> list[WrittenRecord]:
    """Write records ``0 .. n-1`` of the recipe as legacy messages (``magic`` 0 or 1).

    confluent-kafka writes only v2 batches to these brokers, so the messages are built by
    kafka-python 3.x's ``LegacyRecordBatchBuilder`` (another independent implementation)
    and sent with raw Produce v2 requests. One message per request: the librdkafka mock
    stores the bytes as given and rewrites only the first offset, so a multi-message set
    would keep the builder's offsets. With a codec, each message is a compressed wrapper
    around one inner message (v1: relative inner offset 0; v0: the absolute offset, which
    is why the partition must be empty at the start). Legacy messages carry no headers,
    and magic 0 no timestamp (the recipe's timestamps are returned as -1 then).
    The librdkafka mock stores uncompressed legacy messages and refuses compressed ones
    (UNSUPPORTED_VERSION, raised here); Tansu and Kafka 4 were not tried.
    """
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    from kproto.messages import ProduceRequest
    from tests.brokers import raw

    if magic not in (0, 1) or codec not in LEGACY_CODECS:
        raise ValueError("magic must be 0 or 1 and codec one of {}".format(LEGACY_CODECS))
    if timestamp_base is None:
        timestamp_base = now_ms()
    address = raw.partition_leader(bootstrap_servers, topic, partition)
    out = []
    for i in range(n):
        key, value, _ = record_for(i, tag=tag)
        timestamp = timestamp_base + i if magic == 1 else None
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODEC_IDS[codec],
                                           batch_size=1 << 20)
        builder.append(i if magic == 0 else 0, timestamp=timestamp, key=key, value=value)
        request = ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition,
                                                    records=bytes(builder.build()))])])
        resp = raw.roundtrip(address, request, 2)
        part = resp.responses[0].partition_responses[0]
        if part.error_code:
            raise raw.RawProtocolError("Produce of a magic {} message: error {}".format(
                magic, part.error_code))
        if part.base_offset != i:
            raise raw.RawProtocolError("expected offset {} (an empty partition), got {}".format(
                i, part.base_offset))
        out.append(WrittenRecord(topic, partition, i, key, value, (),
                                 timestamp if timestamp is not None else -1, i))
    return out
