"""One task's read: exactly the records of one offset range, as PyArrow record batches.

Owns the executor side of the data source: :func:`read_range` borrows an assign-mode
``KafkaConsumer`` (no group, no commits, ``auto_offset_reset='none'``) of the range's
partition from the worker's pool (:mod:`kproto.spark.consumer_pool`, Spark's consumer
cache), positions it at the range's first offset unless it is there already, polls no
more records than the range has left (so what was fetched past its end stays buffered for
the partition's next task), stops once the consumer's position reaches the end
(transaction markers and compacted gaps count as read) and returns the consumer; and
:func:`arrow_schema` / :func:`to_record_batch`, the columns of Spark's Kafka source in
Arrow form. PyArrow is imported on first use.

Data loss while reading (the range's first offsets deleted after planning, or the log now
ending below the range) follows ``failOnDataLoss``; a partition that makes no progress for
``kafkaConsumer.pollTimeoutMs`` raises ``KafkaTimeoutError`` instead of hanging.
"""

from __future__ import annotations

import logging
import time
from operator import itemgetter
from typing import Any, Hashable, Iterator, Sequence

from kproto.consumer.kafka_consumer import KafkaConsumer
from kproto.errors import KafkaTimeoutError, OffsetOutOfRangeError
from kproto.spark.consumer_pool import POOL
from kproto.spark.planning import OffsetRange
from kproto.spark.resolver import data_loss
from kproto.spark.options import SourceOptions
from kproto.structs import ConsumerRecord, TopicPartition

log = logging.getLogger("kproto.spark")

# Rows per Arrow batch handed to Spark: large enough to amortise the per-batch cost,
# small enough to keep a task's memory flat; and about BATCH_BYTES at most (10,000 rows
# of 10 KB values made 100 MB batches, each built in freshly faulted-in memory).
BATCH_ROWS = 10_000
BATCH_BYTES = 8 << 20
_POLL_RECORDS = 5_000


def arrow_schema(include_headers: bool) -> Any:
    """The Arrow form of Spark's Kafka schema (what PySpark expects for it, exactly)."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(pa.field("element", _header_type()))))
    return pa.schema(fields)


def _header_type() -> Any:
    import pyarrow as pa

    return pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])


# ConsumerRecord's fields that become columns, each taken from all records by one C-level
# map (a comprehension per field costs about as much; zip(*records) transposing all 13
# fields cost more than the five taken together).
_OFFSET, _TIMESTAMP, _TIMESTAMP_TYPE, _KEY, _VALUE, _HEADERS = (
    itemgetter(ConsumerRecord._fields.index(name))
    for name in ("offset", "timestamp", "timestamp_type", "key", "value", "headers"))


def to_record_batch(records: Sequence[ConsumerRecord], topic: str, partition: int,
                    include_headers: bool) -> Any:
    """Records of one partition -> one ``pyarrow.RecordBatch`` in :func:`arrow_schema`."""
    import pyarrow as pa

    n = len(records)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=arrow_schema(include_headers))
    # topic and partition are one value repeated; so is the timestamp type nearly always.
    types = list(map(_TIMESTAMP_TYPE, records))
    columns = [
        pa.array(list(map(_KEY, records)), pa.binary()),
        pa.array(list(map(_VALUE, records)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(list(map(_OFFSET, records)), pa.int64()),
        # Kafka timestamps are milliseconds, Spark's microseconds: converted by Arrow's cast.
        pa.array(list(map(_TIMESTAMP, records)), pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
        .cast(pa.timestamp("us", tz="UTC")),
        (pa.repeat(pa.scalar(types[0], pa.int32()), n) if types.count(types[0]) == n
         else pa.array(types, pa.int32())),
    ]
    if include_headers:
        columns.append(_headers_column(list(map(_HEADERS, records))))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _headers_column(all_headers: Sequence[tuple[tuple[str, Any], ...]]) -> Any:
    import pyarrow as pa

    # As Spark: a record without headers has a null list, not an empty one.
    offsets, keys, values, valid = [0], [], [], []
    for headers in all_headers:
        for key, value in headers or ():
            keys.append(key)
            values.append(value)
        offsets.append(len(keys))
        valid.append(bool(headers))
    entries = pa.StructArray.from_arrays([pa.array(keys, pa.string()), pa.array(values, pa.binary())],
                                         fields=list(_header_type()))
    mask = pa.array([not v for v in valid], pa.bool_())
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries,
                                    type=pa.list_(pa.field("element", _header_type())), mask=mask)


def task_consumer_config(options: SourceOptions) -> dict[Any, Any]:
    """KafkaConsumer kwargs of a task: the user's ``kafka.*`` settings, never a reset."""
    config = dict(options.client_config)
    config["auto_offset_reset"] = "none"
    config.setdefault("max_poll_records", _POLL_RECORDS)
    return config


def _pool_key(config: dict[Any, Any], tp: TopicPartition) -> Hashable:
    # The settings by their repr: values are the parsed options (strings, numbers, bools).
    return (tuple(sorted((key, repr(value)) for key, value in config.items())), tp)


def read_range(options: SourceOptions, r: OffsetRange, *, batch_rows: int = BATCH_ROWS) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch``es holding exactly the records of ``r`` (in offset order)."""
    if r.size == 0:
        return
    tp = r.topic_partition
    config = task_consumer_config(options)
    key = _pool_key(config, tp)

    def new_consumer() -> KafkaConsumer:
        consumer = KafkaConsumer(**config)
        consumer.assign([tp])
        consumer.seek(tp, r.from_offset)
        return consumer

    consumer = POOL.borrow(key, new_consumer)
    try:
        yield from _read(consumer, options, r, batch_rows, config["max_poll_records"])
    except GeneratorExit:  # Spark stopped reading early (a LIMIT): the consumer is fine
        POOL.release(key, consumer)
        raise
    except BaseException:
        POOL.invalidate(key, consumer)
        raise
    else:
        POOL.release(key, consumer)


def _read(consumer: KafkaConsumer, options: SourceOptions, r: OffsetRange, batch_rows: int,
          max_poll_records: int) -> Iterator[Any]:
    tp = r.topic_partition
    # A pooled consumer that read the range before this one is there already, with
    # what it fetched past that range still buffered: seeking would drop it.
    if consumer.position(tp, timeout_ms=0) != r.from_offset:
        consumer.seek(tp, r.from_offset)
    pending: list[ConsumerRecord] = []
    rows = batch_rows
    position = r.from_offset
    last_progress = time.monotonic()
    while position < r.until_offset:
        try:
            # Never past the range's end (offsets left >= records left): the rest
            # stays buffered for the partition's next task.
            polled = consumer.poll(timeout_ms=200,
                                   max_records=max(1, min(max_poll_records, r.until_offset - position)))
        except OffsetOutOfRangeError:
            position = _skip_lost(consumer, options, r, position)
            last_progress = time.monotonic()
            continue
        records = polled.get(tp)
        if records:
            # The batch size in rows for records about this big (one record sampled a poll).
            sample = records[0]
            size = len(sample.key or b"") + len(sample.value or b"") + 64
            rows = max(1, min(batch_rows, BATCH_BYTES // size))
            # In offset order, from the range's start: a poll holds records past the end
            # only when offsets are missing before it (compaction, transaction markers),
            # which max_records cannot foresee; the others are taken whole.
            if records[0].offset >= r.from_offset and records[-1].offset < r.until_offset:
                pending.extend(records)
            else:
                pending.extend(record for record in records
                               if r.from_offset <= record.offset < r.until_offset)
        new_position = consumer.position(tp)
        if new_position is not None and new_position > position:
            position = new_position
            last_progress = time.monotonic()
        elif time.monotonic() - last_progress > options.poll_timeout_ms / 1000.0:
            if _log_ends_early(consumer, options, r, position):
                break
            raise KafkaTimeoutError(
                "kproto Spark source: no progress reading {}-{} at offset {} for {} ms "
                "(kafkaConsumer.pollTimeoutMs); the range ends at {}".format(
                    r.topic, r.partition, position, options.poll_timeout_ms, r.until_offset))
        while len(pending) >= rows:
            yield to_record_batch(pending[:rows], r.topic, r.partition, options.include_headers)
            del pending[:rows]
    if pending:
        yield to_record_batch(pending, r.topic, r.partition, options.include_headers)


def _skip_lost(consumer: KafkaConsumer, options: SourceOptions, r: OffsetRange, position: int) -> int:
    """``position`` is out of range: fail, or continue at the earliest offset left (or stop
    when the log now ends below ``position``); returns the new position."""
    tp = r.topic_partition
    earliest = consumer.beginning_offsets([tp])[tp]
    if earliest <= position:  # out of range above: the log was truncated below position
        data_loss(options, "{}-{} now ends below offset {}, below the planned end {} (truncated or "
                  "recreated)".format(r.topic, r.partition, position, r.until_offset))
        return r.until_offset
    data_loss(options, "offsets {}-{} of {}-{} are no longer available (earliest is now {})".format(
        position, min(earliest, r.until_offset) - 1, r.topic, r.partition, earliest))
    if earliest >= r.until_offset:
        return r.until_offset
    consumer.seek(tp, max(earliest, position))
    return max(earliest, position)


def _log_ends_early(consumer: KafkaConsumer, options: SourceOptions, r: OffsetRange, position: int) -> bool:
    """After a stall: True (stop reading) when the log now ends below the range and
    ``failOnDataLoss`` is false; raises DataLossError when it is true."""
    tp = r.topic_partition
    end = consumer.highwater(tp)
    if end is None:
        end = consumer.end_offsets([tp])[tp]
    if end >= r.until_offset or end > position:
        return False
    data_loss(options, "{}-{} now ends at offset {}, below the planned end {} (truncated or recreated)"
              .format(r.topic, r.partition, end, r.until_offset))
    return True
