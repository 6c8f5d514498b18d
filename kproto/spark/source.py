"""The PySpark classes of the ``kproto`` data source (imports pyspark; load it lazily).

Owns :class:`KafkaDataSource` (format name ``kproto``, Spark's Kafka schema),
:class:`KafkaBatchReader` (plans one task per offset range on the driver, reads each with
:func:`kproto.spark.reader.read_range`) and :class:`KafkaStreamReader` (micro-batches
whose offsets are ``{topic: {partition: offset}}``, Spark's Kafka layout).

Where the work happens: ``DataSource.__init__`` (option checks) and the readers'
planning methods run in Python workers on the driver, before any task; ``read()`` runs in
executor workers, from a pickled copy of the reader, so readers pickle without their
driver-side consumer.

Streaming: ``initialOffset`` resolves ``startingOffsets``; ``latestOffset(start, limit)``
re-lists the partitions (new ones start at their earliest offset), takes the latest
offsets and applies the read limits (``maxOffsetsPerTrigger`` -> ``ReadMaxRows``;
``minOffsetsPerTrigger`` with ``maxTriggerDelay``: a trigger with fewer new offsets than the
minimum plans no batch, until the delay since the last batch has passed, as Spark's
``KafkaMicroBatchStream.delayBatch``; not under ``Trigger.AvailableNow``);
``partitions(start, end)`` plans exactly ``[start, end)``, so a query restarted from its
checkpoint reads each offset once. ``Trigger.AvailableNow`` needs PySpark >= 4.2 (on 4.0.1
a restart with it planned no batch for the records still waiting).
On PySpark 4.0/4.1, which calls ``latestOffset()`` without a start, the limit counts
from the end of the previous batch this driver planned, so the first batch of each run
(fresh or restarted) is not limited.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterator, Optional

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField,
                               StructType, TimestampType)

from kproto.errors import KafkaConfigurationError
from kproto.spark.options import SourceOptions, parse_options
from kproto.spark.planning import OffsetRange, from_offset_json, rate_limit, to_offset_json
from kproto.spark.reader import read_range
from kproto.spark.resolver import OffsetResolver, data_loss
from kproto.structs import TopicPartition

try:  # PySpark >= 4.2: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows,
                                                  SupportsTriggerAvailableNow)
    _STREAM_BASES: tuple[Any, ...] = (DataSourceStreamReader, SupportsTriggerAvailableNow)
except ImportError:  # PySpark 4.0/4.1
    ReadAllAvailable = ReadLimit = ReadMaxRows = ReadMinRows = None  # type: ignore[assignment,misc,unused-ignore]
    _STREAM_BASES = (DataSourceStreamReader,)

log = logging.getLogger("kproto.spark")

SOURCE_NAME = "kproto"


def spark_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (``headers`` only with ``includeHeaders``)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


class KafkaInputPartition(InputPartition):
    """One task: one :class:`OffsetRange`."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[Any]:
    # PySpark substitutes InputPartition(None) when a plan has no partitions.
    offset_range = getattr(partition, "offset_range", None)
    if offset_range is None:
        return iter(())
    return read_range(options, offset_range)


def _check_schema(schema: StructType, options: SourceOptions) -> None:
    expected = spark_schema(options.include_headers)
    if schema != expected:
        raise KafkaConfigurationError(
            "kproto Spark source: the Kafka source has a fixed schema and cannot be set with a custom one "
            "(expected {}, got {})".format(expected.simpleString(), schema.simpleString()))


class KafkaDataSource(DataSource):
    """``spark.read.format("kproto")`` / ``spark.readStream.format("kproto")``."""

    def __init__(self, options: dict[Any, Any]) -> None:
        super().__init__(options)
        # Checked here, on the driver, so a bad option fails the query before it plans.
        self._common = parse_options(options, streaming=None)

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return spark_schema(self._common.include_headers)

    def reader(self, schema: StructType) -> "KafkaBatchReader":
        options = parse_options(self.options, streaming=False)
        _check_schema(schema, options)
        return KafkaBatchReader(options)

    def streamReader(self, schema: StructType) -> "KafkaStreamReader":
        options = parse_options(self.options, streaming=True)
        _check_schema(schema, options)
        return KafkaStreamReader(options)


def _check_not_beyond_end(latest: dict[TopicPartition, int], ends: dict[TopicPartition, int]) -> None:
    # A task would wait for offsets nobody has written yet: refuse while planning.
    beyond = ["{}-{}: {} (the partition ends at {})".format(tp.topic, tp.partition, ends[tp], latest[tp])
              for tp in sorted(ends) if ends[tp] > latest[tp]]
    if beyond:
        raise KafkaConfigurationError("kproto Spark source: endingOffsets beyond the end of the partition: "
                                      + "; ".join(beyond))


class KafkaBatchReader(DataSourceReader):
    """A batch read: ranges fixed at planning time, one task per range."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        with OffsetResolver(self.options) as resolver:
            tps = resolver.topic_partitions()
            starts = resolver.resolve(self.options.starting, tps, starting=True)
            ends = resolver.resolve(self.options.ending, tps, starting=False)
            if isinstance(self.options.ending, dict):
                _check_not_beyond_end(resolver.latest(tps), ends)
            ranges = resolver.plan(starts, ends)
        log.info("batch read of %d partitions in %d tasks", len(tps), len(ranges))
        return [KafkaInputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, partition)


class KafkaStreamReader(*_STREAM_BASES):  # type: ignore[misc]
    """Micro-batches over the subscribed partitions; see the module docstring."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._resolver: Optional[OffsetResolver] = None
        self._target: Optional[dict[TopicPartition, int]] = None  # Trigger.AvailableNow
        self._planned_end: Optional[dict[TopicPartition, int]] = None  # for PySpark < 4.2
        self._latest_seen: Optional[dict[TopicPartition, int]] = None
        self._last_trigger_ms = 0.0  # when the last batch was let through (minOffsetsPerTrigger)

    def __getstate__(self) -> dict[Any, Any]:
        # Executors get a pickled copy for read(); the driver's consumer stays behind.
        state = dict(self.__dict__)
        state["_resolver"] = None
        return state

    @property
    def resolver(self) -> OffsetResolver:
        if self._resolver is None:
            self._resolver = OffsetResolver(self.options)
        return self._resolver

    def initialOffset(self) -> dict[Any, Any]:
        tps = self.resolver.topic_partitions()
        starts = self.resolver.resolve(self.options.starting, tps, starting=True)
        return to_offset_json(starts)

    def getDefaultReadLimit(self) -> Any:
        # Spark's: the maximum, the minimum, or both (a composite PySpark has no class for;
        # latestOffset applies the minimum from the options whatever limit it is given, but
        # ReadAllAvailable: Trigger.AvailableNow or Once).
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.resolver.topic_partitions()
        self._target = self.resolver.latest(tps)

    def latestOffset(self, start: Optional[dict[Any, Any]] = None, limit: Any = None) -> dict[Any, Any]:
        if start is not None:
            begin = from_offset_json(start)
            max_rows = getattr(limit, "max_rows", None)  # ReadAllAvailable has none
        else:
            # PySpark 4.0/4.1 pass no start. The end of the batch this driver planned last
            # is where the next one starts; until one was planned (the first batch of a run,
            # also after a restart: initialOffset is no guide then) nothing is limited.
            begin = dict(self._planned_end or {})
            max_rows = self.options.max_offsets_per_trigger if self._planned_end is not None else None
        tps = self.resolver.topic_partitions()
        if self._target is not None:
            tps = [tp for tp in tps if tp in self._target]
        latest = self.resolver.latest(tps)
        if self._target is not None:
            latest = {tp: min(off, self._target[tp]) for tp, off in latest.items()}
        new = [tp for tp in tps if tp not in begin]
        if new:
            log.info("new partitions %s start at their earliest offsets", new)
            begin.update(self.resolver.earliest(new))
        for tp in sorted(set(begin) - set(latest)):
            if self._target is None or tp in self._target:
                data_loss(self.options, "{}-{} is gone (topic or partition deleted)".format(*tp))
            latest[tp] = begin[tp]
        self._latest_seen = latest
        all_available = self._target is not None or (
            ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable))
        if self.options.min_offsets_per_trigger is not None and not all_available \
                and self._delay_batch(begin, latest):
            # No batch this trigger: the end is the start (Spark then plans nothing).
            return start if start is not None else to_offset_json(self._planned_end or begin)
        return to_offset_json(rate_limit(begin, latest, max_rows))

    def _delay_batch(self, begin: dict[TopicPartition, int], latest: dict[TopicPartition, int]) -> bool:
        """Spark's ``delayBatch``: hold the batch while fewer than ``minOffsetsPerTrigger``
        offsets are new, unless ``maxTriggerDelay`` has passed since the last batch (the
        first trigger of a run always passes)."""
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.options.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        assert self.options.min_offsets_per_trigger is not None
        if sum(latest[tp] - begin.get(tp, 0) for tp in latest) < self.options.min_offsets_per_trigger:
            return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> Optional[dict[Any, Any]]:
        # Shown as the source's latestOffset in query progress (how far behind the query is).
        return None if self._latest_seen is None else to_offset_json(self._latest_seen)

    def partitions(self, start: dict[Any, Any], end: dict[Any, Any]) -> list[InputPartition]:
        self._planned_end = from_offset_json(end)
        ranges = self.resolver.plan(from_offset_json(start), self._planned_end)
        return [KafkaInputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, partition)

    def commit(self, end: dict[Any, Any]) -> None:
        # Offsets live in Spark's checkpoint; nothing is committed to Kafka.
        pass

    def stop(self) -> None:
        if self._resolver is not None:
            self._resolver.close()
            self._resolver = None


def register(spark: Any) -> None:
    """Make ``format("kproto")`` available in a SparkSession."""
    spark.dataSource.register(KafkaDataSource)
