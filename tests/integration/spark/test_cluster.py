"""The ``kproto`` source on a real Spark cluster: a standalone master and two workers on
loopback (:class:`tests.integration.spark.standalone.StandaloneCluster`, Spark's own launch
classes from the PySpark install), the job submitted to ``spark://``, reading Apache Kafka
4.4 (or the mock with ``--brokers=mock``).

The suite reads a modest 200k records in batch and streams 60k over 12 partitions in four
micro-batches (26 s on the 2-core machine at load 5); the >= 5 million record batch read
(344 s, mostly seeding) and a 300k-record stream (84-106 s) are ``heavy`` tests, skipped
unless asked for (``pytest -m heavy``): CI does not run them.
Tasks spread over both workers is asserted from Spark's own task counts per executor.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="the Spark data source needs pyspark: pip install 'kproto[spark]'")
pytest.importorskip("pyarrow", reason="the Spark data source needs pyarrow: pip install 'kproto[spark]'")

from tests.brokers._net import wait_until  # noqa: E402
from tests.brokers.seeding import now_ms  # noqa: E402
from tests.integration.spark.session import spark_session  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.broker_kinds("apache_kafka")]

#: A driver's settings on the two one-core workers: one executor on each.
CLUSTER_CONFIG = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2"}
WAIT_S = 300  # upper bound for executors to register on a loaded machine; not a threshold


@pytest.fixture(scope="module")
def spark(spark_cluster, tmp_path_factory):
    with spark_session(tmp_path_factory, master=spark_cluster.master_url, **CLUSTER_CONFIG) as session:
        assert wait_until(lambda: len(executors(session)) == 2, WAIT_S), spark_cluster.log_tail()
        yield session


def executors(spark) -> dict[str, int]:
    """Executor id -> tasks it ran (Spark's status store; the driver left out)."""
    summaries = spark.sparkContext._jsc.sc().statusStore().executorList(True)
    found = {}
    for i in range(summaries.size()):
        summary = summaries.apply(i)
        if summary.id() != "driver":
            found[summary.id()] = summary.totalTasks()
    return found


def read_on_the_cluster(spark, broker, topic: str, written: int, min_partitions: int) -> None:
    before = executors(spark)
    df = (spark.read.format("kproto").option("kafka.bootstrap.servers", broker.bootstrap_servers)
          .option("subscribe", topic).option("minPartitions", str(min_partitions)).load())
    stats = df.selectExpr("count(*) AS n", "count(DISTINCT partition, offset) AS distinct_offsets",
                          "sum(length(value)) AS bytes").collect()[0]
    assert (stats.n, stats.distinct_offsets) == (written, written)
    ran = {executor: tasks - before.get(executor, 0) for executor, tasks in executors(spark).items()}
    assert sum(ran.values()) >= min_partitions
    assert len([tasks for tasks in ran.values() if tasks > 0]) == 2, ran  # both workers took tasks


def test_a_batch_read_on_two_workers_returns_every_record(spark, broker):
    topic = broker.new_topic(partitions=4)
    broker.produce(topic, 200_000, timeout=300)
    read_on_the_cluster(spark, broker, topic, 200_000, min_partitions=8)


@pytest.mark.heavy
def test_five_million_records_on_two_workers(spark, broker):
    topic = broker.new_topic(partitions=12)
    # Record i is stamped base + i ms: from now, the last would be 83 minutes ahead, and
    # Kafka refuses timestamps more than an hour ahead (log.message.timestamp.after.max.ms):
    # the stamps end now instead.
    base = now_ms() - 5_000_000
    for chunk in range(10):
        broker.produce(topic, 500_000, start_index=chunk * 500_000, timestamp_base=base, timeout=900)
    read_on_the_cluster(spark, broker, topic, 5_000_000, min_partitions=24)


def stream_on_the_cluster(spark, broker, tmp_path, records: int, per_trigger: int) -> None:
    """A stream over a 12-partition topic into Parquet (Trigger.AvailableNow, several
    micro-batches): every record once, tasks on both workers."""
    topic = broker.new_topic(partitions=12)
    written = broker.produce(topic, records, timeout=600)
    before = executors(spark)
    out = str(tmp_path / "out")
    query = (spark.readStream.format("kproto").option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(per_trigger)).load().select("partition", "offset")
             .writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    try:
        query.awaitTermination(3600)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    assert len([p for p in query.recentProgress if p["numInputRows"]]) >= records // per_trigger
    ran = {executor: tasks - before.get(executor, 0) for executor, tasks in executors(spark).items()}
    assert len([tasks for tasks in ran.values() if tasks > 0]) == 2, ran  # both workers took tasks
    rows = spark.read.parquet(out).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(w.partition, w.offset) for w in written]


def test_a_stream_over_twelve_partitions_on_two_workers_writes_every_record_once(spark, broker, tmp_path):
    stream_on_the_cluster(spark, broker, tmp_path, 60_000, per_trigger=15_000)


@pytest.mark.heavy
def test_a_stream_of_300k_records_over_twelve_partitions_writes_every_record_once(spark, broker, tmp_path):
    stream_on_the_cluster(spark, broker, tmp_path, 300_000, per_trigger=50_000)
