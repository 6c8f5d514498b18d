"""The ``kproto`` PySpark data source end to end: local Spark (``local[2]``) reading the
librdkafka mock cluster and Tansu, records written by confluent-kafka.

One SparkSession for the whole module (every Spark test lives here); its JVM (a child
process PySpark started) and Python workers are stopped when the module ends. The workers
import a copy of kproto taken when the session starts, so an edit to the tree while the
module runs cannot reach them half-way. Skips when pyspark or pyarrow is not installed
(``pip install 'kproto[spark]'``).
"""

from __future__ import annotations

import importlib.util
import json
import re
import time

import pytest

pytest.importorskip("pyspark", reason="the Spark data source needs pyspark>=4.0: pip install 'kproto[spark]'")
pytest.importorskip("pyarrow", reason="the Spark data source needs pyarrow: pip install 'kproto[spark]'")

from tests.brokers import raw  # noqa: E402
from tests.brokers._net import closed_port  # noqa: E402
from tests.brokers.seeding import CODECS  # noqa: E402
from tests.integration.spark.session import spark_session  # noqa: E402
from tests.integration.spark.topics import retained_topic  # noqa: E402,F401  (fixture)
from tests.threads import TestThread  # noqa: E402

pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka")

_ADMISSION_CONTROL = importlib.util.find_spec("pyspark.sql.streaming.datasource") is not None  # PySpark >= 4.2
WAIT_S = 180  # upper bound for waits on Spark; never a performance threshold


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    with spark_session(tmp_path_factory) as session:
        yield session


def read(spark, broker, **options):
    reader = spark.read.format("kproto").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def as_tuples(table) -> list:
    """Rows of an Arrow table (or pylist) as comparable tuples, sorted by (topic, partition, offset)."""
    rows = table.to_pylist() if hasattr(table, "to_pylist") else table
    out = []
    for r in rows:
        headers = None if r.get("headers") is None else tuple((h["key"], h["value"]) for h in r["headers"])
        out.append((r["topic"], r["partition"], r["offset"], r["key"], r["value"],
                    int(r["timestamp"].timestamp() * 1000), r["timestampType"], headers))
    return sorted(out, key=lambda t: t[:3])


def written_tuples(written, with_headers=True) -> list:
    return sorted(((w.topic, w.partition, w.offset, w.key, w.value, w.timestamp, 0,
                    (tuple(w.headers) or None) if with_headers else None) for w in written),
                  key=lambda t: t[:3])


# -- batch ------------------------------------------------------------------------------


def test_batch_read_in_every_codec_equals_what_the_producer_wrote(spark, broker):
    # 10k records, one partition per codec (2k each), read by local[2] in one query.
    topic = broker.new_topic(partitions=len(CODECS))
    written = []
    for p, codec in enumerate(CODECS):
        written += broker.produce(topic, 2_000, partitions=[p], codec=codec, start_index=p * 2_000)
    df = read(spark, broker, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")
    got = as_tuples(df.toArrow())
    assert len(got) == 2_000 * len(CODECS)
    assert got == written_tuples(written)


def test_offset_ranges_and_min_partitions_split(spark, broker):
    from pyspark.sql.functions import spark_partition_id

    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 400)  # offsets 0-199 in each partition
    df = read(spark, broker, subscribe=topic, minPartitions="6",
              startingOffsets=json.dumps({topic: {"0": 10, "1": -2}}),
              endingOffsets=json.dumps({topic: {"0": 150, "1": -1}}))
    assert df.rdd.getNumPartitions() == 6
    rows = df.select(spark_partition_id().alias("task"), "partition", "offset").collect()
    expected = [(w.partition, w.offset) for w in written
                if (w.partition == 0 and 10 <= w.offset < 150) or w.partition == 1]
    assert sorted((r.partition, r.offset) for r in rows) == sorted(expected)
    tasks: dict = {}
    for r in rows:
        tasks.setdefault(r.task, []).append((r.partition, r.offset))
    assert len(tasks) == 6
    for offsets in tasks.values():  # each task: one contiguous range of one partition
        assert len({p for p, _ in offsets}) == 1
        numbers = sorted(o for _, o in offsets)
        assert numbers == list(range(numbers[0], numbers[-1] + 1))
    # Without headers the column is absent; the default range is earliest..latest.
    whole = read(spark, broker, assign=json.dumps({topic: [1]}))
    assert "headers" not in whole.columns
    assert as_tuples(whole.toArrow()) == written_tuples([w for w in written if w.partition == 1], False)


def _bad(spark, broker, match, **options):
    from pyspark import SparkContext

    group = "bad-%d" % time.monotonic_ns()
    spark.sparkContext.setJobGroup(group, "bad options")
    try:
        with pytest.raises(Exception, match=match):
            read(spark, broker, **options).collect()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    # The query failed while planning: no Spark job (so no task) was started for it.
    assert SparkContext._active_spark_context.statusTracker().getJobIdsForGroup(group) == []


@pytest.mark.broker_kinds("mock")
def test_bad_options_fail_before_any_task_runs(spark, broker):
    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 5)
    _bad(spark, broker, "exactly one of the options 'subscribe', 'subscribePattern', 'assign'")
    _bad(spark, broker, "unknown option 'startingoffset'", subscribe=topic, startingOffset="earliest")
    _bad(spark, broker, "not allowed for a batch query", subscribe=topic, startingOffsets="latest")
    _bad(spark, broker, "'failOnDataLoss' must be 'true' or 'false'", subscribe=topic, failOnDataLoss="maybe")
    _bad(spark, broker, "set the source option 'startingOffsets'", subscribe=topic,
         **{"kafka.auto.offset.reset": "earliest"})
    _bad(spark, broker, r"does not have: .*-3 \(no such partition\)", assign=json.dumps({topic: [0, 3]}))
    _bad(spark, broker, r"kafka.bootstrap.servers={} does not have: {}x-0 \(no such topic\)".format(
        re.escape(broker.bootstrap_servers), topic), assign=json.dumps({topic + "x": [0]}))
    # Nobody listens there, or the name resolves nowhere: the planner stops after a few
    # seconds of refused connections instead of default.api.timeout.ms (60 s), with why.
    with closed_port() as port:
        closed = "127.0.0.1:{}".format(port)
        _bad(spark, broker, r"no broker of bootstrap servers {0} could be reached within \d+ ms; tried {0} "
             r"\(\d+ tries\): connect to {0} failed: connection refused".format(re.escape(closed)),
             subscribe=topic, **{"kafka.bootstrap.servers": closed})
    _bad(spark, broker, r"tried kproto-no-such-host.invalid:9092 \(\d+ tries\): cannot resolve",
         subscribe=topic, **{"kafka.bootstrap.servers": "kproto-no-such-host.invalid:9092"})
    _bad(spark, broker, "must give every partition being read", subscribe=topic,
         endingOffsets=json.dumps({topic + "x": {"0": 1}}))
    _bad(spark, broker, "beyond the end of", subscribe=topic, endingOffsets=json.dumps({topic: {"0": 99}}))
    with pytest.raises(Exception, match="fixed schema"):
        (spark.read.format("kproto").schema("value string")
         .option("kafka.bootstrap.servers", broker.bootstrap_servers).option("subscribe", topic)
         .load().collect())
    # A streaming query plans on its own thread: the error ends the query before a batch.
    query = (spark.readStream.format("kproto").option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("subscribe", topic).option("endingOffsets", "latest").load()
             .writeStream.format("memory").queryName("never").start())
    try:
        with pytest.raises(Exception, match="'endingoffsets' is for batch queries only"):
            query.awaitTermination(WAIT_S)
        assert query.recentProgress == []
    finally:
        query.stop()


@pytest.mark.broker_kinds("mock")
def test_batch_data_loss_follows_fail_on_data_loss(spark, broker, retained_topic):
    topic, earliest = retained_topic
    from_zero = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="no longer available.*failOnDataLoss"):
        read(spark, broker, subscribe=topic, startingOffsets=from_zero).collect()
    rows = read(spark, broker, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(earliest, 100))


@pytest.mark.needs("transactions", "valid_control_batch_crc")
def test_read_committed_batch_stops_at_the_last_stable_offset(spark, broker):
    # Plain records, a committed and an aborted transaction, then a transaction left open
    # and plain records behind it. Checked: read_committed ends at the last stable offset
    # (the open transaction's first offset) and reads past it once that commits; control
    # records (markers) never appear. Aborted records are dropped only by brokers that
    # list aborted transactions in Fetch; the mock and Tansu send no list, so on them
    # read_committed returns the aborted records too (what Java's consumer does there).
    from tests.integration.spark.topics import open_transaction

    topic = broker.new_topic(partitions=1)
    committed_read = {"subscribe": topic, "kafka.isolation.level": "read_committed"}
    plain = broker.produce(topic, 20)
    txns = broker.produce_transactions(topic, committed=10, aborted=10, start_index=100)
    stable = max(w.offset for w in txns.aborted) + 2  # past the abort marker
    visible = plain + txns.committed
    if "aborted_transactions_in_fetch" not in broker.capabilities:
        visible = visible + txns.aborted
    producer = open_transaction(broker, topic, 5)
    try:
        behind = broker.produce(topic, 5, start_index=200)
        got = as_tuples(read(spark, broker, **committed_read).toArrow())
        assert got == written_tuples(visible, False)
        assert max(r[2] for r in got) < stable
        everything = sorted(r.offset for r in read(spark, broker, subscribe=topic).select("offset").collect())
        assert everything == sorted([w.offset for w in plain + txns.committed + txns.aborted + behind]
                                    + list(range(stable, stable + 5)))
    finally:
        producer.commit_transaction(30)
    raw.settled_log_end(broker.bootstrap_servers, topic, 0)  # the commit marker written too
    after = sorted(r.offset for r in read(spark, broker, **committed_read).select("offset").collect())
    assert after == sorted([w.offset for w in visible + behind] + list(range(stable, stable + 5)))


def test_kafka_group_id_is_only_the_consumers_group_nothing_is_committed(spark, broker):
    # As Spark's own source: kafka.group.id names the consumers' group (overriding
    # groupIdPrefix); offsets live in the query (or nowhere, for a batch read), never in
    # the group.
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 40)
    group = "kproto-spark-%d" % time.monotonic_ns()
    df = read(spark, broker, subscribe=topic, groupIdPrefix="unused", **{"kafka.group.id": group})
    assert as_tuples(df.toArrow()) == written_tuples(written, False)
    assert nothing_committed(broker, group, [(topic, 0), (topic, 1)])  # (streams: in the streaming test)


def nothing_committed(broker, group: str, partitions: list) -> bool:
    """True when ``group`` has no committed offset for any of ``partitions`` (asked by
    confluent-kafka)."""
    from confluent_kafka import OFFSET_INVALID, Consumer
    from confluent_kafka import TopicPartition as PeerPartition

    peer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                     "enable.auto.commit": False, "log_level": 3})
    try:
        committed = peer.committed([PeerPartition(t, p) for t, p in partitions], timeout=30)
    finally:
        peer.close()
    return len(committed) == len(partitions) and all(c.offset == OFFSET_INVALID for c in committed)


# -- streaming --------------------------------------------------------------------------


def _wait(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.2)


def _offsets(progress, which: str) -> dict:
    value = progress["sources"][0][which]
    return json.loads(value) if isinstance(value, str) else value


def test_stream_stopped_and_restarted_from_its_checkpoint_writes_every_record_once(spark, broker, tmp_path):
    prefix = "spk%d" % time.monotonic_ns()
    first = broker.new_topic(partitions=2, prefix=prefix)
    written = broker.produce(first, 3000, tag="a")
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start(**trigger):
        stream = (spark.readStream.format("kproto")
                  .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                  .option("subscribePattern", prefix + ".*")
                  .option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", "1000")
                  .option("kafka.group.id", prefix)
                  .load()
                  .select("topic", "partition", "offset", "key", "value"))
        return (stream.writeStream.format("parquet").option("path", out)
                .option("checkpointLocation", checkpoint).trigger(**trigger).start())

    # The topics keep receiving records while the query runs; a second topic matching the
    # pattern appears mid-way (new partitions are picked up from their earliest offset).
    second: list = []
    more: list = []

    def keep_producing() -> None:
        for i in range(4):
            more.extend(broker.produce(first, 1000, tag="b%d" % i, start_index=10_000 * (i + 1)))
            if i == 1:
                second.append(broker.new_topic(partitions=1, prefix=prefix))
                more.extend(broker.produce(second[0], 700, tag="c"))
            time.sleep(0.5)

    producer = TestThread(target=keep_producing)
    query = start(processingTime="500 milliseconds")
    producer.start()
    try:
        _wait(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 3000,
              "the first 3000 records to be processed")
    finally:
        query.stop()
        producer.join(timeout=WAIT_S)
    before = [p for p in query.recentProgress if p["numInputRows"]]
    assert not producer.is_alive()

    # Restarted from the checkpoint: reads what is left, then stops (Trigger.AvailableNow;
    # PySpark < 4.2 has no AvailableNow for Python sources: run until the rest arrived).
    everything = written + more
    done_before = sum(p["numInputRows"] for p in before)
    if _ADMISSION_CONTROL:
        query = start(availableNow=True)
        assert query.awaitTermination(WAIT_S)
    else:
        query = start(processingTime="500 milliseconds")
        try:
            _wait(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= len(everything) - done_before,
                  "the rest of the records to be processed")
        finally:
            query.stop()
    assert query.exception() is None
    after = [p for p in query.recentProgress if p["numInputRows"]]

    assert 0 < done_before < len(everything) and after
    # The restart's first batch starts where the last completed one ended.
    assert _offsets(after[0], "startOffset") == _offsets(before[-1], "endOffset")
    # maxOffsetsPerTrigger; PySpark < 4.2 passes latestOffset no start, so the first batch of
    # each run is not limited there.
    limited = before + after if _ADMISSION_CONTROL else before[1:] + after[1:]
    assert all(p["numInputRows"] <= 1000 for p in limited)
    if _ADMISSION_CONTROL:  # reportLatestOffset (PySpark >= 4.2): the last run ends level with it
        assert _offsets(after[-1], "latestOffset") == _offsets(after[-1], "endOffset")
    got = spark.read.parquet(out).toArrow().to_pylist()
    assert len(got) == len(everything)  # no record repeated ...
    assert sorted((r["topic"], r["partition"], r["offset"], r["key"], r["value"]) for r in got) == \
        sorted((w.topic, w.partition, w.offset, w.key, w.value) for w in everything)  # ... or lost
    assert {r["topic"] for r in got} == {first, second[0]}
    # kafka.group.id: the group the consumers use; the offsets stay in the checkpoint.
    assert nothing_committed(broker, prefix, [(first, 0), (first, 1), (second[0], 0)])


@pytest.mark.broker_kinds("mock", "tansu", "tansu_sessions")  # tansu_sessions: Tansu keeping fetch sessions
def test_stream_goes_on_after_triggers_with_idle_partitions(spark, broker):
    # Between the two batches every trigger finds all partitions idle (the resolver asks
    # the same partitions at the same offsets again); then one partition moves, the other
    # stays idle. Every record arrives once and the query keeps running. One record per
    # batch: Tansu's ListOffsets(LATEST) (last batch base + 1) is then the log end, as
    # Apache Kafka's, so the log-end Fetch of an idle partition returns no records.
    topic = broker.new_topic(partitions=2)
    one_per_batch = {"batch.num.messages": 1}
    written = broker.produce(topic, 40, producer_config=one_per_batch)
    name = "idle%d" % time.monotonic_ns()
    # A progress event for every trigger that found nothing new (Spark's default: one per 10 s).
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "100")
    try:
        query = (spark.readStream.format("kproto").option("kafka.bootstrap.servers", broker.bootstrap_servers)
                 .option("subscribe", topic).option("startingOffsets", "earliest")
                 .option("kafka.request.timeout.ms", "5000").option("fetchOffset.numRetries", "0").load()
                 .select("partition", "offset", "value")
                 .writeStream.format("memory").queryName(name).trigger(processingTime="100 milliseconds").start())
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    try:
        query.processAllAvailable()
        first = len(query.recentProgress)

        def idle_triggers() -> int:
            if not query.isActive:  # a lookup that failed ended the query: say why
                raise AssertionError("the query ended: {}".format(query.exception()))
            return sum(1 for p in query.recentProgress[first:] if p["numInputRows"] == 0)

        _wait(lambda: idle_triggers() >= 3, "three triggers that found the partitions idle")
        written += broker.produce(topic, 15, partitions=[1], start_index=100, producer_config=one_per_batch)
        query.processAllAvailable()
        assert query.exception() is None and query.isActive
        got = sorted((r.partition, r.offset, r.value) for r in spark.table(name).collect())
        assert got == sorted((w.partition, w.offset, w.value) for w in written)
    finally:
        query.stop()
