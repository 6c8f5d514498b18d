"""kproto.spark's driver lookups and task reads against real brokers, without Spark.

The resolver and ``read_range`` are what the Spark classes call; here they run directly
against the librdkafka mock cluster and Tansu, with records written by confluent-kafka.
"""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow", reason="kproto.spark reads into PyArrow: pip install 'kproto[spark]'")

from kproto.errors import KafkaConfigurationError  # noqa: E402
from kproto.spark.options import parse_options  # noqa: E402
from kproto.spark.planning import OffsetRange  # noqa: E402
from kproto.spark.reader import arrow_schema, read_range  # noqa: E402
from kproto.spark.resolver import DataLossError, OffsetResolver  # noqa: E402
from kproto.structs import TopicPartition  # noqa: E402
from tests.brokers import raw  # noqa: E402
from tests.integration.spark.topics import open_transaction, retained_topic

pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka")


def options(broker, topic, **extra):
    opts = {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic}
    opts.update(extra)
    return parse_options(opts, streaming=False)


def rows(batches):
    out = []
    for batch in batches:
        out.extend(batch.to_pylist())
    return out


def expected_row(w, include_headers=True):
    row = {"key": w.key, "value": w.value, "topic": w.topic, "partition": w.partition, "offset": w.offset,
           "timestamp_ms": w.timestamp, "timestampType": 0}
    if include_headers:
        row["headers"] = [{"key": k, "value": v} for k, v in w.headers] or None
    return row


def normalise(row):
    row = dict(row)
    stamp = row.pop("timestamp")
    row["timestamp_ms"] = int(stamp.timestamp() * 1000)
    return row


def test_resolver_latest_is_the_log_end_on_every_broker(broker):
    # Tansu's ListOffsets(LATEST) stops at its last batch's base offset + 1: the resolver
    # takes the Fetch high watermark when it is larger.
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 301, codec="zstd")
    with OffsetResolver(options(broker, topic)) as resolver:
        tps = resolver.topic_partitions()
        assert tps == [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        ends = {tp: max(w.offset for w in written if w.partition == tp.partition) + 1 for tp in tps}
        assert resolver.latest(tps) == ends
        assert resolver.earliest(tps) == {tp: 0 for tp in tps}


@pytest.mark.broker_kinds("apache_kafka")
def test_resolver_timestamps(broker):
    # Only Apache Kafka answers timestamp lookups (the mock and Tansu ignore timestamps).
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 20)
    with OffsetResolver(options(broker, topic)) as resolver:
        tps = resolver.topic_partitions()
        third = [w for w in written if w.partition == 1][2]
        assert resolver.for_times({tps[1]: third.timestamp}) == {tps[1]: third.offset}
        assert resolver.for_times({tps[1]: 2 ** 50}) == {tps[1]: None}
        stamp = written[-1].timestamp + 1
        with pytest.raises(KafkaConfigurationError, match="startingOffsetsByTimestampStrategy=latest"):
            resolver.resolve(("timestamp", stamp), tps, starting=True)
        latest = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic,
                                "startingOffsetsByTimestampStrategy": "latest"}, streaming=False)
        with OffsetResolver(latest) as lenient:
            assert lenient.resolve(("timestamp", stamp), tps, starting=True) == {tps[0]: 10, tps[1]: 10}


def test_resolver_specs_and_pattern(broker):
    topic = broker.new_topic(partitions=2, prefix="spk")
    broker.produce(topic, 40)
    pattern = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                             "subscribePattern": topic.replace("spk", "sp[k]")}, streaming=False)
    with OffsetResolver(pattern) as resolver:
        tps = resolver.topic_partitions()
        assert tps == [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        spec = {tps[0]: 3, tps[1]: -1}
        assert resolver.resolve(spec, tps, starting=False) == {tps[0]: 3, tps[1]: 20}
        with pytest.raises(KafkaConfigurationError, match="must give every partition being read"):
            resolver.resolve({tps[0]: 3}, tps, starting=True)


def test_assign_of_a_missing_partition_is_refused(broker):
    topic = broker.new_topic(partitions=1)
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                          "assign": '{"%s":[0,7]}' % topic}, streaming=False)
    with OffsetResolver(opts) as resolver:
        with pytest.raises(KafkaConfigurationError, match=r"does not have: .*-7"):
            resolver.topic_partitions()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_read_range_yields_exactly_the_range_as_arrow(broker, codec):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 500, codec=codec)
    opts = options(broker, topic, includeHeaders="true")
    batches = list(read_range(opts, OffsetRange(topic, 0, 37, 411), batch_rows=100))
    assert all(b.schema.equals(arrow_schema(True)) for b in batches)
    assert [b.num_rows for b in batches][:3] == [100, 100, 100]
    got = [normalise(r) for r in rows(batches)]
    assert got == [expected_row(w) for w in written[37:411]]


def test_read_range_without_headers_and_empty_range(broker):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 30)
    opts = options(broker, topic)
    got = [normalise(r) for r in rows(read_range(opts, OffsetRange(topic, 0, 0, 30)))]
    assert got == [expected_row(w, include_headers=False) for w in written]
    assert list(read_range(opts, OffsetRange(topic, 0, 5, 5))) == []


def test_range_beyond_the_log_end_is_data_loss_after_the_poll_timeout(broker):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 20)
    strict = options(broker, topic, **{"kafkaConsumer.pollTimeoutMs": "1500"})
    with pytest.raises(DataLossError, match="now ends at offset 20, below the planned end 25"):
        list(read_range(strict, OffsetRange(topic, 0, 10, 25)))
    lenient = options(broker, topic, failOnDataLoss="false", **{"kafkaConsumer.pollTimeoutMs": "1500"})
    got = rows(read_range(lenient, OffsetRange(topic, 0, 10, 25)))
    assert [r["offset"] for r in got] == [w.offset for w in written[10:]]


@pytest.mark.broker_kinds("mock")
def test_read_range_below_the_log_start_follows_fail_on_data_loss(mock_cluster, retained_topic):
    topic, earliest = retained_topic
    strict = options(mock_cluster, topic)
    with pytest.raises(DataLossError, match="no longer available .*failOnDataLoss"):
        list(read_range(strict, OffsetRange(topic, 0, 0, 100)))
    lenient = options(mock_cluster, topic, failOnDataLoss="false")
    got = rows(read_range(lenient, OffsetRange(topic, 0, 0, 100)))
    assert [r["offset"] for r in got] == list(range(earliest, 100))
    assert [r["key"] for r in got] == [b"%d" % i for i in range(earliest, 100)]


@pytest.mark.needs("transactions", "valid_control_batch_crc")
def test_read_range_ends_past_transaction_markers(broker):
    # 10 committed records, a commit marker, 10 aborted records, an abort marker: the last
    # offset of the log is a marker no poll returns, and the read must still end there.
    topic = broker.new_topic(partitions=1)
    txns = broker.produce_transactions(topic, committed=10, aborted=10)
    opts = options(broker, topic)
    with OffsetResolver(opts) as resolver:
        end = resolver.latest([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    assert end == max(w.offset for w in txns.aborted) + 2
    got = rows(read_range(opts, OffsetRange(topic, 0, 0, end)))
    assert [r["offset"] for r in got] == [w.offset for w in txns.committed + txns.aborted]


@pytest.mark.broker_kinds("mock")
def test_planning_below_the_log_start_follows_fail_on_data_loss(mock_cluster, retained_topic):
    topic, earliest = retained_topic
    tp = TopicPartition(topic, 0)
    with OffsetResolver(options(mock_cluster, topic)) as resolver:
        with pytest.raises(DataLossError, match=r"offsets 0-%d are no longer available" % (earliest - 1)):
            resolver.plan({tp: 0}, {tp: 100})
    lenient = options(mock_cluster, topic, failOnDataLoss="false", minPartitions="2")
    with OffsetResolver(lenient) as resolver:
        middle = earliest + (100 - earliest + 1) // 2  # the first piece takes the odd offset
        assert resolver.plan({tp: 0}, {tp: 100}) == [OffsetRange(topic, 0, earliest, middle),
                                                     OffsetRange(topic, 0, middle, 100)]
        # An end below the start (a recreated topic) plans nothing for the partition.
        assert resolver.plan({tp: 90}, {tp: 50}) == []


@pytest.mark.needs("fault_injection")
def test_out_of_range_above_the_log_start_is_a_log_that_ends_early(broker):
    # OFFSET_OUT_OF_RANGE at a position at or above the earliest offset: the log now ends
    # below it (truncation). Strict: DataLossError; lenient: the read stops, no retry loop.
    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 20)
    fetch, offset_out_of_range = 1, 1
    broker.push_partition_request_errors(topic, 0, fetch, [offset_out_of_range])
    with pytest.raises(DataLossError, match="now ends below offset 5"):
        list(read_range(options(broker, topic), OffsetRange(topic, 0, 5, 20)))
    broker.push_partition_request_errors(topic, 0, fetch, [offset_out_of_range])
    lenient = options(broker, topic, failOnDataLoss="false")
    assert rows(read_range(lenient, OffsetRange(topic, 0, 5, 20))) == []


@pytest.mark.needs("transactions", "valid_control_batch_crc")
def test_resolver_latest_under_read_committed_is_the_last_stable_offset(broker):
    # Tansu answers ListOffsets(LATEST, read_committed) with its last batch's base + 1, or
    # 0 while a transaction is open: the resolver takes the Fetch's last stable offset.
    topic = broker.new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    plain = broker.produce(topic, 30)  # multi-record batches: base + 1 is below the end
    committed = options(broker, topic, **{"kafka.isolation.level": "read_committed"})
    with OffsetResolver(committed) as resolver:
        assert resolver.latest([tp]) == {tp: plain[-1].offset + 1}
    producer = open_transaction(broker, topic, 4)
    try:
        with OffsetResolver(committed) as resolver:
            assert resolver.latest([tp]) == {tp: plain[-1].offset + 1}  # the open transaction's first offset
        with OffsetResolver(options(broker, topic)) as resolver:
            assert resolver.latest([tp]) == {tp: plain[-1].offset + 5}
    finally:
        producer.commit_transaction(30)
    # Answered before the commit marker is written: until it is, the last stable offset is
    # still the transaction's first.
    raw.settled_log_end(broker.bootstrap_servers, topic, 0)
    with OffsetResolver(committed) as resolver:
        assert resolver.latest([tp]) == {tp: plain[-1].offset + 6}  # past the commit marker
