"""Consume throughput: kproto vs kafka-python 3.x vs confluent-kafka, same broker, one run.

    .venv/bin/python bench/bench_consume.py [--brokers tansu,mock] [--records 200000]
                                            [--profile] [--clients kproto,kafka-python,confluent]

Seeds one topic (4 partitions, ``--records`` x 100-byte values, 10-byte keys) with
confluent-kafka's producer, then each client consumes it from the beginning with
assign() (no group), touching every record's offset, key and value, on the same broker
process. Time runs from the consumer's construction to the last record (connecting and
offset lookups included). kproto and kafka-python check CRCs (their default); kproto is
also run without; confluent-kafka with its defaults and with ``fetch.queue.backoff.ms=0``
("vs ck" compares with its defaults). kafka-python cannot bootstrap against librdkafka's mock cluster (it
dies in its version probe), so it is skipped there. ``--profile`` runs kproto once more
under cProfile and prints the hottest functions.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PARTITIONS = 4
VALUE_SIZE = 100


def seed(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    value = (os.urandom(VALUE_SIZE // 2).hex().encode())[:VALUE_SIZE]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.messages": 1_000_000, "broker.address.family": "v4"})
    for i in range(n):
        while True:
            try:
                producer.produce(topic, key=b"k%09d" % i, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(60):
        raise SystemExit("seeding {} did not finish".format(topic))


def available(bootstrap: str, topic: str) -> int:
    """Records the mock keeps (it silently drops the oldest past ~5 MiB per partition).

    Not for Tansu: its ListOffsets(LATEST) is the last batch's base offset + 1."""
    from kproto import KafkaConsumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with KafkaConsumer(bootstrap_servers=bootstrap) as c:
        begin, end = c.beginning_offsets(tps), c.end_offsets(tps)
    return sum(end[tp] - begin[tp] for tp in tps)


def drain(consumer, n: int) -> tuple[int, int]:
    """Poll a kafka-python-style consumer until ``n`` records (or 10 s without any)."""
    count = size = 0
    idle = time.monotonic() + 10
    while count < n and time.monotonic() < idle:
        batch = consumer.poll(timeout_ms=500)
        if batch:
            idle = time.monotonic() + 10
        for records in batch.values():
            for r in records:
                count += 1
                size += len(r.value) + len(r.key) + (r.offset & 0)
    consumer.close()
    return count, size


def run_kproto(bootstrap: str, topic: str, n: int, check_crcs: bool = True) -> tuple[int, int]:
    from kproto import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", check_crcs=check_crcs)
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    return drain(consumer, n)


def run_kafka_python(bootstrap: str, topic: str, n: int) -> tuple[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", check_crcs=True,
                             enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    return drain(consumer, n)


def run_confluent(bootstrap: str, topic: str, n: int, tuned: bool = False) -> tuple[int, int]:
    """confluent-kafka with its defaults, or ``tuned`` with ``fetch.queue.backoff.ms=0``
    (librdkafka otherwise pauses fetching while its queue holds data)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    count = size = 0
    config = {"bootstrap.servers": bootstrap, "group.id": "bench-{}".format(time.monotonic_ns()),
              "enable.auto.commit": False, "broker.address.family": "v4"}
    if tuned:
        config["fetch.queue.backoff.ms"] = 0
    consumer = Consumer(config)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    idle = time.monotonic() + 10
    while count < n and time.monotonic() < idle:
        msgs = consumer.consume(num_messages=10000, timeout=0.5)
        if msgs:
            idle = time.monotonic() + 10
        for m in msgs:
            if m.error():
                continue
            count += 1
            size += len(m.value()) + len(m.key()) + (m.offset() & 0)
    consumer.close()
    return count, size


def timed(fn: Callable[..., tuple[int, int]], *args) -> tuple[int, int, float]:
    start = time.perf_counter()
    count, size = fn(*args)
    return count, size, time.perf_counter() - start


def profile_kproto(bootstrap: str, topic: str, n: int, top: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    run_kproto(bootstrap, topic, n)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def preload() -> None:
    """Import every client before timing, so no run pays for module loading."""
    import confluent_kafka  # noqa: F401
    import kafka  # noqa: F401

    import kproto.consumer.classic.classic_kafka_consumer  # noqa: F401
    from kproto.consumer.config import ConsumerConfig

    ConsumerConfig({})


def bench_one(kind: str, records: int, clients: list[str], profile: bool) -> None:
    preload()
    if kind == "tansu":
        from kproto.embedded import TansuBroker

        broker = TansuBroker().start()
        bootstrap, close = broker.bootstrap_servers, broker.stop
        from kproto.embedded import create_topic

        topic = "bench-consume"
        create_topic(bootstrap, topic, PARTITIONS)
    else:
        from tests.brokers.mock_cluster import MockCluster

        broker = MockCluster(1)
        bootstrap, close = broker.bootstrap_servers, broker.close
        topic = broker.new_topic(partitions=PARTITIONS, prefix="bench")
    try:
        seed(bootstrap, topic, records)
        n = records if kind == "tansu" else available(bootstrap, topic)
        print("\n## {}: {} records of {} bytes kept (of {} written), {} partitions".format(
            kind, n, VALUE_SIZE, records, PARTITIONS))
        runs = {
            "kproto (check_crcs)": lambda: timed(run_kproto, bootstrap, topic, n, True),
            "kproto (no crc check)": lambda: timed(run_kproto, bootstrap, topic, n, False),
            "kafka-python 3 (check_crcs)": lambda: timed(run_kafka_python, bootstrap, topic, n),
            "confluent-kafka (defaults)": lambda: timed(run_confluent, bootstrap, topic, n),
            "confluent-kafka (no fetch backoff)": lambda: timed(run_confluent, bootstrap, topic, n, True),
        }
        wanted = {"kproto": ("kproto (check_crcs)", "kproto (no crc check)"),
                  "kafka-python": ("kafka-python 3 (check_crcs)",),
                  "confluent": ("confluent-kafka (defaults)", "confluent-kafka (no fetch backoff)")}
        results = {}
        for client in clients:
            for name in wanted[client]:
                if kind == "mock" and name.startswith("kafka-python"):
                    print("{:<36} skipped: kafka-python cannot bootstrap against the mock cluster".format(name))
                    continue
                count, size, seconds = runs[name]()
                results[name] = (count, size, seconds)
        kp = results.get("kafka-python 3 (check_crcs)")
        cf = results.get("confluent-kafka (defaults)")
        print("{:<36} {:>8} {:>8} {:>11} {:>7} {:>8} {:>8}".format(
            "client", "records", "seconds", "records/s", "MB/s", "vs kp", "vs ck"))
        for name, (count, size, seconds) in results.items():
            rate = count / seconds
            ratio = lambda ref: "-" if ref is None else "{:.2f}x".format(rate / (ref[0] / ref[2]))  # noqa: E731
            print("{:<36} {:>8} {:>8.2f} {:>11,.0f} {:>7.1f} {:>8} {:>8}{}".format(
                name, count, seconds, rate, size / seconds / 1e6, ratio(kp), ratio(cf),
                "" if count == n else "  (INCOMPLETE)"))
        if profile and "kproto" in clients:
            print(profile_kproto(bootstrap, topic, n))
    finally:
        close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="tansu,mock")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--clients", default="kproto,kafka-python,confluent")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for kind in args.brokers.split(","):
        bench_one(kind.strip(), args.records, [c.strip() for c in args.clients.split(",")], args.profile)


if __name__ == "__main__":
    main()
