"""Rows/s of Spark reading Kafka through kproto's source and Spark's own, side by side: the
same topic on the same broker, ``format("kproto")`` beside ``format("kafka")``
(spark-sql-kafka-0-10, the package of the PySpark version, resolved by Maven from
tests/ground/spark/pom.xml and given to Spark as local jars).

    .venv/bin/python bench/bench_spark.py [--small 2000000] [--large 200000] [--partitions 4]
                                          [--repeat 2] [--master local[2]|cluster|both]
                                          [--stream-seconds 60] [--profile] [--option KEY=VALUE]

A Kafka 4.4 node from the test ground (tests/brokers/maven_kafka.py ``MavenKafka``) is started on
127.0.0.1 and filled by confluent-kafka with two topics: ``--small`` records of 100-byte
values and ``--large`` records of 10 KB values (no compression, no headers, 8-byte keys).
``--spark-kafka-version`` picks the package version (default: the PySpark version).

Measured per master (``local[2]``; ``cluster``: a standalone master and two one-core workers
on loopback, tests/integration/spark/standalone.py), best of ``--repeat`` runs:
- batch: ``spark.read.format(F)`` of the whole topic, aggregating ``count(*)`` and
  ``sum(length(value))`` so every row crosses into Spark; planning included, JVM start not;
- stream: ``readStream.format(F)`` over the small topic with ``maxOffsetsPerTrigger``,
  ``foreachBatch`` counting; records/s over the batches after the first (the steady state)
  for ``--stream-seconds``.
``--profile`` measures nothing: it fills the small topic only, reads it once through
``format("kproto")`` on ``local[2]`` with cProfile in the Python workers (PySpark's data
source profiler, ``spark.sql.pyspark.dataSource.profiler=perf``: the time spent producing
each Arrow batch, summed over the tasks) and prints the hottest functions.

The goals: kproto >= 0.5x Spark's source at 100 B values and >= 0.8x at 10 KB. Publish
figures only from an otherwise idle machine: the load average is printed with them.
Needs ``pip install 'kproto[spark]'``, Java 17 and Maven.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FORMATS = ("kafka", "kproto")
#: ``--option KEY=VALUE``: reader options given to both sources (e.g. a ``kafka.*`` setting).
OPTIONS: dict[str, str] = {}


def fill(bootstrap: str, topic: str, records: int, value_size: int, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.kbytes": 1 << 20, "log_level": 3})
    value = b"v" * value_size
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=b"%08d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(600):
        raise RuntimeError("records to {} undelivered".format(topic))


def session(master: str, jars: list[str], workdir: str):
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    import kproto.spark

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    builder = (SparkSession.builder.master(master).appName("kproto-bench-spark")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.jars", ",".join(jars)).config("spark.executorEnv.PYTHONPATH", root)
               .config("spark.executor.memory", "1g").config("spark.executor.cores", "1")
               .config("spark.cores.max", "2").config("spark.sql.shuffle.partitions", "2"))
    if "--profile" in sys.argv:
        builder = builder.config("spark.sql.pyspark.dataSource.profiler", "perf")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kproto.spark.register(spark)
    return spark


def stop(spark) -> None:
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
        SparkContext._gateway = None
        SparkContext._jvm = None


def batch(spark, fmt: str, bootstrap: str, topic: str, repeat: int) -> tuple[int, float]:
    from pyspark.sql import functions as F

    best, n = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        row = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
               .options(**OPTIONS).load().agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()[0])
        best = min(best, time.perf_counter() - t0)
        n = row["n"]
    return n, best


def stream(spark, fmt: str, bootstrap: str, topic: str, seconds: float, per_batch: int) -> float:
    """Records/s of the batches after the first, over ``seconds`` of a running query."""
    marks: list = []

    def count(df, batch_id: int) -> None:
        marks.append((time.perf_counter(), df.count()))

    checkpoint = tempfile.mkdtemp(prefix="kproto-bench-stream-")
    query = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .options(**OPTIONS)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(per_batch)).load()
             .writeStream.foreachBatch(count).option("checkpointLocation", checkpoint).start())
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and query.exception() is None:
            time.sleep(0.5)
    finally:
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    if len(marks) < 3:
        return float("nan")
    steady = marks[1:]
    return sum(n for _, n in steady[1:]) / (steady[-1][0] - steady[0][0])


def profile(spark, bootstrap: str, topic: str, top: int = 30) -> None:
    """One profiled kproto batch read of ``topic``: the hottest functions of the Python
    workers by own time and by cumulative time, with the load average."""
    import pstats

    try:
        n, seconds = batch(spark, "kproto", bootstrap, topic, 1)
        print("profiled read: {} rows in {:.1f} s (under cProfile), load average {:.1f}".format(
            n, seconds, os.getloadavg()[0]), flush=True)
        out = tempfile.mkdtemp(prefix="kproto-bench-profile-")
        spark.profile.dump(out, type="perf")
        for name in sorted(os.listdir(out)):
            stats = pstats.Stats(os.path.join(out, name))
            stats.sort_stats("tottime").print_stats(top)
            stats.sort_stats("cumulative").print_stats(top)
    finally:
        stop(spark)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=2_000_000, help="records of 100 B values")
    parser.add_argument("--large", type=int, default=200_000, help="records of 10 KB values")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--master", choices=("local[2]", "cluster", "both"), default="both")
    parser.add_argument("--stream-seconds", type=float, default=60.0)
    parser.add_argument("--spark-kafka-version")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a reader option for both sources, e.g. kafka.max.partition.fetch.bytes=8388608")
    args = parser.parse_args()
    OPTIONS.update(option.split("=", 1) for option in args.option)

    import pyspark

    from tests.brokers import maven
    from tests.brokers.maven_kafka import MavenKafka
    from tests.integration.spark.standalone import StandaloneCluster

    jars = maven.spark_kafka_jars(args.spark_kafka_version or pyspark.__version__,
                                  os.path.join(os.path.dirname(pyspark.__file__), "jars"))
    kafka = MavenKafka()
    cluster = None
    results = []
    try:
        small = kafka.new_topic(partitions=args.partitions, prefix="bench-100b")
        t0 = time.perf_counter()
        fill(kafka.bootstrap_servers, small, args.small, 100, args.partitions)
        if args.profile:
            print("filled {} x 100 B in {:.0f} s".format(args.small, time.perf_counter() - t0), flush=True)
            profile(session("local[2]", jars, tempfile.gettempdir()), kafka.bootstrap_servers, small)
            return
        large = kafka.new_topic(partitions=args.partitions, prefix="bench-10kb")
        fill(kafka.bootstrap_servers, large, args.large, 10_000, args.partitions)
        print("filled {} x 100 B and {} x 10 KB in {:.0f} s; load average {:.1f}".format(
            args.small, args.large, time.perf_counter() - t0, os.getloadavg()[0]), flush=True)
        masters = ["local[2]", "cluster"] if args.master == "both" else [args.master]
        for master in masters:
            url = master
            if master == "cluster":
                cluster = StandaloneCluster(workers=2, cores=1, memory="1536m").start()
                url = cluster.master_url
            spark = session(url, jars, tempfile.gettempdir())
            try:
                for label, topic in (("100 B", small), ("10 KB", large)):
                    for fmt in FORMATS:
                        n, seconds = batch(spark, fmt, kafka.bootstrap_servers, topic, args.repeat)
                        results.append((master, "batch " + label, fmt, n / seconds))
                        print(results[-1], flush=True)
                for fmt in FORMATS:
                    try:
                        rate = stream(spark, fmt, kafka.bootstrap_servers, small, args.stream_seconds,
                                      max(args.small // 20, 1000))
                    except RuntimeError as exc:  # e.g. a Python worker too slow to start on a loaded machine
                        print("stream through {} failed: {}".format(fmt, str(exc).splitlines()[0]), flush=True)
                        rate = float("nan")
                    results.append((master, "stream 100 B", fmt, rate))
                    print(results[-1], flush=True)
            finally:
                stop(spark)
                if cluster is not None:
                    cluster.close()
                    cluster = None
    finally:
        kafka.close()
    print("cpus {}, load average {:.1f}".format(os.cpu_count(), os.getloadavg()[0]))
    print("{:<9} {:<14} {:>14} {:>14} {:>7}".format("master", "read", "kafka rows/s", "kproto rows/s", "ratio"))
    rates = {(m, r, f): v for m, r, f, v in results}
    for master, read in dict.fromkeys((m, r) for m, r, _, _ in results):
        theirs, ours = rates[(master, read, "kafka")], rates[(master, read, "kproto")]
        print("{:<9} {:<14} {:>14,.0f} {:>14,.0f} {:>7.2f}".format(master, read, theirs, ours, ours / theirs))


if __name__ == "__main__":
    main()
