"""kproto's source beside Spark's own: the same reads through ``format("kafka")`` (Spark's
JVM source, ``spark-sql-kafka-0-10``) and ``format("kproto")`` give the same rows on Apache
Kafka 4.4.

Spark's source is the package of the installed PySpark's version, resolved by Maven from
``tests/ground/spark/pom.xml`` (:func:`tests.brokers.maven.spark_kafka_jars`) and handed to
Spark as local jars (``spark.jars``); the test extra pins a PySpark whose package is served.
``KPROTO_SPARK_KAFKA_VERSION`` picks another package version (a local try against a newer
PySpark). The module skips when the package cannot be resolved.

Rows compared: key, value, topic, partition, offset, timestamp, timestampType, headers.
One SparkSession for the module (both sources in it).
"""

from __future__ import annotations

import json
import os
import time

import pytest

pytest.importorskip("pyspark", reason="the Spark data source needs pyspark: pip install 'kproto[spark]'")
pytest.importorskip("pyarrow", reason="the Spark data source needs pyarrow: pip install 'kproto[spark]'")

from tests.brokers.seeding import CODECS  # noqa: E402
from tests.integration.spark.session import spark_session  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.broker_kinds("apache_kafka")]

FORMATS = ("kafka", "kproto")
COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType")


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    import pyspark

    from tests.brokers import maven

    version = os.environ.get("KPROTO_SPARK_KAFKA_VERSION") or pyspark.__version__
    try:
        jars = maven.spark_kafka_jars(version, os.path.join(os.path.dirname(pyspark.__file__), "jars"))
    except maven.MavenUnavailable as exc:
        pytest.skip("Spark's Kafka source {} is not available: {}".format(version, str(exc).splitlines()[0]))
    with spark_session(tmp_path_factory, **{"spark.jars": ",".join(jars)}) as session:
        yield session


def both(spark, broker, **options) -> tuple[list, list]:
    """The rows of the same read through Spark's source and kproto's, as sorted tuples."""
    out = []
    for fmt in FORMATS:
        reader = spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap_servers)
        for key, value in options.items():
            reader = reader.option(key, value)
        df = reader.load()
        columns = list(COLUMNS) + (["headers"] if "headers" in df.columns else [])
        rows = [tuple(_plain(v) for v in row) for row in df.select(*columns).collect()]
        out.append(sorted(rows, key=lambda r: r[:3]))
    return out[0], out[1]


def _plain(value):
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):  # headers: Row(key, value)
        return tuple((h[0], None if h[1] is None else bytes(h[1])) for h in value)
    return value


def test_every_codec_with_headers_gives_the_same_rows(spark, broker):
    topic = broker.new_topic(partitions=len(CODECS))
    for p, codec in enumerate(CODECS):
        broker.produce(topic, 300, partitions=[p], codec=codec, start_index=p * 300)
    theirs, ours = both(spark, broker, subscribe=topic, includeHeaders="true")
    assert len(ours) == 300 * len(CODECS)
    assert ours == theirs


def test_subscribe_pattern_assign_and_json_offsets_give_the_same_rows(spark, broker):
    prefix = "dif%d" % time.monotonic_ns()
    first, second = broker.new_topic(partitions=2, prefix=prefix), broker.new_topic(partitions=3, prefix=prefix)
    broker.produce(first, 200)
    broker.produce(second, 300)
    theirs, ours = both(spark, broker, subscribePattern=prefix + ".*")
    assert len(ours) == 500 and ours == theirs
    theirs, ours = both(spark, broker, assign=json.dumps({first: [1], second: [0, 2]}),
                        startingOffsets=json.dumps({first: {"1": 10}, second: {"0": -2, "2": 50}}),
                        endingOffsets=json.dumps({first: {"1": 60}, second: {"0": 30, "2": -1}}))
    assert ours and ours == theirs


def test_timestamp_offsets_give_the_same_rows(spark, broker):
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 400)
    stamps = sorted(w.timestamp for w in written)
    start, end = stamps[100], stamps[300]
    theirs, ours = both(spark, broker, subscribe=topic, startingTimestamp=str(start), endingTimestamp=str(end))
    assert ours and ours == theirs
    by_partition = {topic: {"0": start, "1": start}}
    theirs, ours = both(spark, broker, subscribe=topic, startingOffsetsByTimestamp=json.dumps(by_partition))
    assert ours and ours == theirs


def test_min_partitions_splits_give_the_same_rows(spark, broker):
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 1000)
    theirs, ours = both(spark, broker, subscribe=topic, minPartitions="7")
    assert len(ours) == 1000 and ours == theirs


@pytest.mark.needs("transactions")
def test_read_committed_over_aborted_transactions_gives_the_same_rows(spark, broker):
    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 20)
    broker.produce_transactions(topic, committed=10, aborted=10, start_index=100)
    broker.produce(topic, 5, start_index=200)
    theirs, ours = both(spark, broker, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
    assert len(ours) == 35 and ours == theirs


# -- streams ----------------------------------------------------------------------------


def batches(spark, broker, fmt: str, checkpoint: str, **options) -> list[tuple[dict, int]]:
    """Run a stream with Trigger.AvailableNow to its end; each micro-batch's end offsets
    and row count, from the query's progress."""
    reader = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(600)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    out = []
    for progress in query.recentProgress:
        if progress["numInputRows"]:
            end = progress["sources"][0]["endOffset"]
            out.append((json.loads(end) if isinstance(end, str) else end, progress["numInputRows"]))
    return out


def test_max_offsets_per_trigger_cuts_the_same_micro_batches(spark, broker, tmp_path):
    # Uneven backlogs, and a limit that does not divide them: Spark's shares are rounded
    # down per partition (a batch may hold less than the limit), and so are kproto's.
    topic = broker.new_topic(partitions=3)
    broker.produce(topic, 700, partitions=[0])
    broker.produce(topic, 200, partitions=[1], start_index=1000)
    broker.produce(topic, 3, partitions=[2], start_index=2000)
    theirs = batches(spark, broker, "kafka", str(tmp_path / "kafka"), subscribe=topic, maxOffsetsPerTrigger="250")
    ours = batches(spark, broker, "kproto", str(tmp_path / "kproto"), subscribe=topic, maxOffsetsPerTrigger="250")
    assert len(theirs) > 3 and sum(n for _, n in theirs) == 903
    assert ours == theirs


def _noop_stream(spark, broker, fmt: str, checkpoint: str, topic: str, **options):
    reader = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return (reader.load().writeStream.format("noop").option("checkpointLocation", checkpoint)
            .trigger(processingTime="300 milliseconds").start())


def _batch_rows(query) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_min_offsets_per_trigger_and_max_trigger_delay_hold_batches_as_spark_does(spark, broker, tmp_path):
    # Spark's rule (KafkaMicroBatchStream.delayBatch): the first trigger of a run passes;
    # later ones plan a batch only with >= minOffsetsPerTrigger new offsets, or once
    # maxTriggerDelay (default 15 minutes) has passed since the last batch.
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 60)
    held, delayed = {}, {}
    for fmt in FORMATS:
        held[fmt] = _noop_stream(spark, broker, fmt, str(tmp_path / ("held-" + fmt)), topic, minOffsetsPerTrigger="100")
        delayed[fmt] = _noop_stream(spark, broker, fmt, str(tmp_path / ("delayed-" + fmt)), topic,
                                    minOffsetsPerTrigger="100", maxTriggerDelay="2s")
    queries = {("held", fmt): q for fmt, q in held.items()} | {("delayed", fmt): q for fmt, q in delayed.items()}
    try:
        for query in queries.values():
            assert _wait(lambda q=query: sum(_batch_rows(q)) >= 60), query.exception()
        broker.produce(topic, 60, start_index=1000)  # fewer than the minimum
        for query in delayed.values():  # let through once their 2 s have passed
            assert _wait(lambda q=query: sum(_batch_rows(q)) >= 120), query.exception()
        time.sleep(2)  # a few more triggers: still held, 15 minutes are far off
        for fmt, query in held.items():
            assert _batch_rows(query) == [60], (fmt, _batch_rows(query))
        broker.produce(topic, 300, start_index=2000)
        # A trigger may see only part of the 300 (the producer's batches land one by one):
        # it takes what it sees, and a rest below the minimum waits on, so all but < 100 of
        # the 360 new offsets are read, in batches of 100 or more.
        for query in held.values():
            assert _wait(lambda q=query: sum(_batch_rows(q)) > 60 + 360 - 100), (query.exception(), _batch_rows(query))
    finally:
        for query in queries.values():
            query.stop()
    for fmt in FORMATS:
        first, *rest = _batch_rows(held[fmt])
        assert first == 60 and min(rest) >= 100 and 360 - 100 < sum(rest) <= 360, (fmt, _batch_rows(held[fmt]))
        first, *rest = _batch_rows(delayed[fmt])
        assert first == 60 and min(rest) < 100, (fmt, _batch_rows(delayed[fmt]))  # the delay, not the minimum


def test_partitions_added_mid_stream_are_read_from_their_start(spark, broker, tmp_path):
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 100)
    out = {}
    queries = {}
    for fmt in FORMATS:
        out[fmt] = str(tmp_path / fmt)
        queries[fmt] = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap_servers)
                        .option("subscribe", topic).option("startingOffsets", "earliest").load()
                        .select(*COLUMNS).writeStream.format("parquet").option("path", out[fmt] + "/data")
                        .option("checkpointLocation", out[fmt] + "/checkpoint")
                        .trigger(processingTime="500 milliseconds").start())
    try:
        for query in queries.values():
            assert _wait(lambda q=query: sum(p["numInputRows"] for p in q.recentProgress) >= 100), query.exception()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # kept: it answers the futures
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(60)
        # Brokers learn of the new partitions a moment after CreatePartitions answers.
        assert _wait(lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4)
        broker.produce(topic, 200, partitions=[0, 1, 2, 3], start_index=1000)
        for query in queries.values():
            assert _wait(lambda q=query: sum(p["numInputRows"] for p in q.recentProgress) >= 300), query.exception()
    finally:
        for query in queries.values():
            query.stop()
    rows = {fmt: sorted(tuple(_plain(v) for v in r) for r in spark.read.parquet(out[fmt] + "/data").collect())
            for fmt in FORMATS}
    assert len(rows["kproto"]) == 300 and {r[1] for r in rows["kproto"]} == {0, 1, 2, 3}
    assert rows["kproto"] == rows["kafka"]


def _wait(predicate, timeout: float = 300) -> bool:
    from tests.brokers._net import wait_until

    return wait_until(predicate, timeout, interval=0.5)


# -- data loss --------------------------------------------------------------------------


def test_fail_on_data_loss_after_deleted_offsets(spark, broker):
    # The first 100 offsets deleted (DeleteRecords: what retention does to old segments);
    # a read that asks for them: failOnDataLoss=true fails in both, false skips them in both.
    from confluent_kafka import TopicPartition as Tp
    from confluent_kafka.admin import AdminClient

    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 300)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # kept: it answers the futures
    for future in admin.delete_records([Tp(topic, 0, 100)]).values():
        future.result(60)
    asked = {"subscribe": topic, "startingOffsets": json.dumps({topic: {"0": 0}})}
    theirs, ours = both(spark, broker, failOnDataLoss="false", **asked)
    assert [r[2] for r in ours] == list(range(100, 300)) and ours == theirs
    for fmt in FORMATS:
        reader = spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap_servers)
        for key, value in dict(asked, failOnDataLoss="true").items():
            reader = reader.option(key, value)
        with pytest.raises(Exception, match="failOnDataLoss") as caught:
            reader.load().collect()
        assert "lost" in str(caught.value), (fmt, str(caught.value)[:2000])
