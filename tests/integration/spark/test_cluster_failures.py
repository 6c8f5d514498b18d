"""A streaming query survives the failures of a real deployment, nothing lost or doubled:
the ``kproto`` source on the standalone Spark cluster (two workers, ``spark_cluster``)
reading the three-node Kafka 4.4 cluster (``apache_kafka_cluster``), writing Parquet with a
checkpoint while records keep arriving.

In one run: a Kafka broker is killed (SIGKILL) and restarted; a Spark worker is killed
mid-batch, with its executor and Python workers (its tasks rerun on the other worker, and
the worker comes back); the driver is stopped (its SparkSession and JVM) and a new driver
restarts the query from the checkpoint. The output must hold every record written exactly
once, by (partition, offset) and by value: Spark's file sink commits a batch's files in its
log only once the batch succeeded, and the source plans exactly ``[start, end)`` per batch.
"""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("pyspark", reason="the Spark data source needs pyspark: pip install 'kproto[spark]'")
pytest.importorskip("pyarrow", reason="the Spark data source needs pyarrow: pip install 'kproto[spark]'")

from tests.brokers._net import wait_until  # noqa: E402
from tests.brokers.seeding import produce_records  # noqa: E402
from tests.integration.spark.session import spark_session  # noqa: E402
from tests.integration.spark.test_cluster import CLUSTER_CONFIG, WAIT_S, executors  # noqa: E402
from tests.threads import TestThread  # noqa: E402

# About ten minutes (a cluster of three Kafka nodes, a Spark cluster, three failures):
# run with -m heavy, outside the suite's budget.
pytestmark = [pytest.mark.broker, pytest.mark.heavy]

CHUNK = 2000


def test_a_stream_survives_a_broker_a_worker_and_the_driver_dying(apache_kafka_cluster, spark_cluster,
                                                                  tmp_path_factory, tmp_path):
    kafka, workers = apache_kafka_cluster, spark_cluster
    topic = kafka.new_topic(partitions=4)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    written: list = []
    stop = threading.Event()

    def keep_producing() -> None:
        # Records keep arriving through every failure (the producer rides out the broker's
        # death itself); the chunks are numbered so every value is unique. Idempotent: a
        # batch the dying broker wrote but never acknowledged is retried, and without
        # idempotence lands in the log twice (a run found 25 records, one batch, at two
        # offsets each: in the log, so rightly read twice, but not what was written).
        chunk = 0
        while not stop.is_set() or chunk < 4:
            written.extend(produce_records(kafka.bootstrap_servers, topic, CHUNK, partitions=range(4),
                                           start_index=chunk * CHUNK, tag="c%d" % chunk, timeout=120,
                                           producer_config={"enable.idempotence": True}))
            chunk += 1
            time.sleep(0.5)

    def start(spark, **trigger):
        stream = (spark.readStream.format("kproto").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", "3000").load()
                  .select("partition", "offset", "value"))
        return (stream.writeStream.format("parquet").option("path", out)
                .option("checkpointLocation", checkpoint).trigger(**trigger).start())

    def rows_done(query) -> int:
        return sum(p["numInputRows"] for p in query.recentProgress)

    def progressed(query, beyond: int, what: str) -> int:
        assert wait_until(lambda: query.exception() is not None or rows_done(query) > beyond, WAIT_S), what
        assert query.exception() is None, query.exception()
        return rows_done(query)

    producer = TestThread(target=keep_producing, name="spark-failures-producer")
    producer.start()
    try:
        with spark_session(tmp_path_factory, master=workers.master_url, **CLUSTER_CONFIG) as spark:
            assert wait_until(lambda: len(executors(spark)) == 2, WAIT_S), workers.log_tail()
            query = start(spark, processingTime="1 second")
            done = progressed(query, 0, "a first batch")
            # A broker dies (the leader of some partitions) and comes back.
            kafka.kill(2)
            done = progressed(query, done, "batches while broker 2 is down")
            kafka.restart(2)
            done = progressed(query, done, "batches after broker 2 came back")
            # A worker dies mid-batch: its tasks run again on the other one.
            assert wait_until(lambda: spark.sparkContext.statusTracker().getActiveStageIds(), WAIT_S)
            workers.kill_worker(0)
            done = progressed(query, done, "batches after worker 0 died")
            workers.start_worker(0)
            # The driver stops (the query, then its SparkSession and JVM) mid-stream.
            query.stop()
        stop.set()
        producer.join(WAIT_S)
        producer.raise_if_failed()
        assert not producer.is_alive()
        # A new driver restarts the query from the checkpoint and reads what is left.
        with spark_session(tmp_path_factory, master=workers.master_url, **CLUSTER_CONFIG) as spark:
            query = start(spark, availableNow=True)
            assert query.awaitTermination(WAIT_S * 4)
            assert query.exception() is None, query.exception()
            got = spark.read.parquet(out).select("partition", "offset", "value").collect()
    finally:
        stop.set()
        producer.join(WAIT_S)
        workers.start_worker(0)
        kafka.restart(2)
    keyed = sorted((r.partition, r.offset, None if r.value is None else bytes(r.value)) for r in got)
    assert len({(p, o) for p, o, _ in keyed}) == len(keyed)  # no offset twice ...
    assert keyed == sorted((w.partition, w.offset, w.value) for w in written)  # ... none lost
    assert len(keyed) >= 4 * CHUNK
