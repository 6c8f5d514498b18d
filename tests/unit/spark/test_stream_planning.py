"""kproto.spark's planning against a cluster view: partitions added to a subscribed topic,
and timestamp starts and ends.

No broker the tests can start adds partitions to an existing topic: Tansu does not
implement CreatePartitions (confluent-kafka's AdminClient.create_partitions answers
"CreatePartitions (KIP-195) not supported by broker") and the librdkafka mock cluster
never completes it (its controller lookup times out). So the stream reader runs here
against a cluster view whose partition list changes between triggers: the real
``OffsetResolver.plan`` and rate limit, with the lookups (partitions, earliest, latest)
answered from the view. A new topic matched by ``subscribePattern`` is covered end to end
on real brokers in ``test_spark_source``. Timestamp lookups are answered only by Apache
Kafka (the mock and Tansu ignore timestamps; ``test_spark_reader`` checks them there when
Docker is reachable), so the timestamp specs are checked here too.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark", reason="the Spark data source needs pyspark>=4.0: pip install 'kproto[spark]'")

from kproto.spark.options import parse_options  # noqa: E402
from kproto.spark.planning import OffsetRange  # noqa: E402
from kproto.spark.resolver import DataLossError, OffsetResolver  # noqa: E402
from kproto.spark.source import KafkaStreamReader, ReadMaxRows  # noqa: E402
from kproto.structs import TopicPartition  # noqa: E402

T0, T1, T2 = (TopicPartition("events", p) for p in range(3))


class ClusterView(OffsetResolver):
    """The resolver's lookups answered from ``log`` ({TopicPartition: (start, end)}),
    which a test changes between triggers; planning is OffsetResolver's own."""

    def __init__(self, options, log: dict, times: dict | None = None) -> None:  # no consumer
        self.options = options
        self.log = log
        self.times = times or {}  # {TopicPartition: [(timestamp, offset), ...]}, ascending

    def topic_partitions(self) -> list:
        return sorted(tp for tp in self.log if tp.topic in self.options.subscribe)

    def earliest(self, tps) -> dict:
        return {tp: self.log[tp][0] for tp in tps}

    def latest(self, tps) -> dict:
        return {tp: self.log[tp][1] for tp in tps}

    def for_times(self, timestamps: dict) -> dict:
        # ListOffsets by timestamp: the first offset whose timestamp is >= the one asked.
        return {tp: next((off for stamp, off in self.times.get(tp, ()) if stamp >= ms), None)
                for tp, ms in timestamps.items()}

    def close(self) -> None:
        pass


def stream_reader(log: dict, **extra) -> KafkaStreamReader:
    opts = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "events", "startingOffsets": "earliest"}
    opts.update(extra)
    reader = KafkaStreamReader(parse_options(opts, streaming=True))
    reader._resolver = ClusterView(reader.options, log)
    return reader


def ranges(reader, start, end) -> list:
    # Through JSON, as Spark's checkpoint hands offsets back.
    return [p.offset_range for p in reader.partitions(json.loads(json.dumps(start)), json.loads(json.dumps(end)))]


def test_partitions_added_to_a_subscribed_topic_are_read_from_their_earliest_offset():
    log = {T0: (0, 100)}
    reader = stream_reader(log)
    start = reader.initialOffset()
    assert start == {"events": {"0": 0}}
    end = reader.latestOffset(start, None)
    assert end == {"events": {"0": 100}}
    assert ranges(reader, start, end) == [OffsetRange("events", 0, 0, 100)]

    # The topic grows from one partition to three; partition 2's first offsets already
    # left the log (retention), so it starts at its earliest offset, 7.
    log.update({T0: (0, 130), T1: (0, 40), T2: (7, 20)})
    start, end = end, reader.latestOffset(end, None)
    assert end == {"events": {"0": 130, "1": 40, "2": 20}}
    # The start of the batch lacks the new partitions: they are planned from the log start.
    assert ranges(reader, start, end) == [OffsetRange("events", 0, 100, 130), OffsetRange("events", 1, 0, 40),
                                          OffsetRange("events", 2, 7, 20)]
    # The next batch goes on from where this one ended in every partition.
    log.update({T1: (0, 45)})
    start, end = end, reader.latestOffset(end, None)
    assert end == {"events": {"0": 130, "1": 45, "2": 20}}
    assert ranges(reader, start, end) == [OffsetRange("events", 1, 40, 45)]


def test_new_partitions_share_max_offsets_per_trigger():
    log = {T0: (0, 10)}
    reader = stream_reader(log, maxOffsetsPerTrigger="30")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(30))
    assert end == {"events": {"0": 10}}
    log.update({T0: (0, 40), T1: (0, 30)})  # backlog 30 + 30 for a limit of 30
    second = reader.latestOffset(end, ReadMaxRows(30))
    assert second == {"events": {"0": 25, "1": 15}}
    planned = ranges(reader, end, second)
    assert planned == [OffsetRange("events", 0, 10, 25), OffsetRange("events", 1, 0, 15)]
    assert sum(r.size for r in planned) == 30
    # A restart replays the recorded batch exactly: partitions() depends on its arguments
    # (and the log start), not on what the cluster holds now.
    log.update({T0: (0, 90), T1: (0, 80), T2: (0, 5)})
    restarted = stream_reader(log, maxOffsetsPerTrigger="30")
    assert ranges(restarted, end, second) == planned


def test_a_partition_that_disappears_follows_fail_on_data_loss():
    log = {T0: (0, 10), T1: (0, 10)}
    strict = stream_reader(log)
    start = strict.latestOffset(strict.initialOffset(), None)
    del log[T1]  # topic recreated with fewer partitions
    with pytest.raises(DataLossError, match="events-1 is gone"):
        strict.latestOffset(start, None)
    lenient = stream_reader(log, failOnDataLoss="false")
    assert lenient.latestOffset(start, None) == {"events": {"0": 10, "1": 10}}


def test_timestamp_starts_and_ends_resolve_per_partition_with_the_strategy():
    from kproto.errors import KafkaConfigurationError

    log = {T0: (0, 50), T1: (0, 40)}
    times = {T0: [(1000 + 10 * i, i) for i in range(50)], T1: [(1000 + 20 * i, i) for i in range(40)]}

    def view(**extra):
        opts = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "events"}
        opts.update(extra)
        options = parse_options(opts, streaming=False)
        return options, ClusterView(options, log, times)

    options, resolver = view(startingTimestamp="1105", endingOffsetsByTimestamp='{"events":{"0":1300,"1":1300}}')
    tps = resolver.topic_partitions()
    starts = resolver.resolve(options.starting, tps, starting=True)
    ends = resolver.resolve(options.ending, tps, starting=False)
    assert starts == {T0: 11, T1: 6} and ends == {T0: 30, T1: 15}
    assert resolver.plan(starts, ends) == [OffsetRange("events", 0, 11, 30), OffsetRange("events", 1, 6, 15)]
    # No record at or after the timestamp in partition 0: an error by default ...
    options, resolver = view(startingOffsetsByTimestamp='{"events":{"0":1495,"1":1495}}')
    with pytest.raises(KafkaConfigurationError, match=r"events-0 .*startingOffsetsByTimestampStrategy=latest"):
        resolver.resolve(options.starting, tps, starting=True)
    # ... the latest offset with strategy latest; an end past every record is the latest.
    options, resolver = view(startingOffsetsByTimestamp='{"events":{"0":1495,"1":1495}}',
                             startingOffsetsByTimestampStrategy="latest", endingTimestamp="9999")
    assert resolver.resolve(options.starting, tps, starting=True) == {T0: 50, T1: 25}
    assert resolver.resolve(options.ending, tps, starting=False) == {T0: 50, T1: 40}
    # Per-partition timestamps must name every partition read.
    options, resolver = view(startingOffsetsByTimestamp='{"events":{"0":1000}}')
    with pytest.raises(KafkaConfigurationError, match="must give every partition being read"):
        resolver.resolve(options.starting, tps, starting=True)
