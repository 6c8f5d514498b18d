"""Consume throughput: kproto vs kafka-python 3.x vs confluent-kafka, same broker, one run.

    .venv/bin/python bench/bench_consume.py [--brokers tansu,mock] [--records 200000]
                                            [--profile] [--clients kproto,kafka-python,confluent]

Seeds one topic (4 partitions, ``--records`` x 100-byte values, 10-byte keys) with
confluent-kafka's producer, then each client consumes it from the beginning with
assign() (no group), checksumming every record's partition, offset, key and value, on the
same broker process; each read is verified by count and checksum against what the broker
acknowledged. Time runs from the consumer's construction to the last record (connecting and
offset lookups included); MB/s counts value bytes. kproto and kafka-python check CRCs (their
default); kproto is also run without; confluent-kafka with its defaults and with
``fetch.queue.backoff.ms=0`` ("vs ck" compares with its defaults). kafka-python cannot
bootstrap against librdkafka's mock cluster (it dies in its version probe), so it is skipped
there. ``--profile`` runs kproto once more under cProfile and prints the hottest functions.
Everything runs in this process; ``bench_matrix.py`` runs the wider matrix with one child
process per read (CPU time and peak RSS per client).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import UNSUPPORTED, VARIANTS, Tally, available, preload, read_kproto, seed, start_broker  # noqa: E402

PARTITIONS = 4
VALUE_SIZE = 100
GROUPS = {"kproto": ("kproto", "kproto-nocrc"), "kafka-python": ("kafka-python",),
          "confluent": ("confluent", "confluent-tuned")}


def timed(variant: str, bootstrap: str, topic: str, n: int) -> tuple[Tally, float]:
    start = time.perf_counter()
    tally = VARIANTS[variant].run(bootstrap, topic, PARTITIONS, n)
    return tally, time.perf_counter() - start


def profile_kproto(bootstrap: str, topic: str, n: int, top: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    read_kproto(bootstrap, topic, PARTITIONS, n)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def bench_one(kind: str, records: int, clients: list[str], profile: bool) -> None:
    preload({"kproto", "kafka", "confluent_kafka"})
    with start_broker(kind) as broker:
        bootstrap = broker.bootstrap_servers
        topic = broker.new_topic(partitions=PARTITIONS, prefix="bench-consume")
        written = seed(bootstrap, topic, records, PARTITIONS, VALUE_SIZE)
        n, dropped_from = records, 0
        if kind == "mock":
            n, dropped_from = available(bootstrap, topic, PARTITIONS)
        print("\n## {}: {} records of {} bytes kept (of {} written), {} partitions".format(
            kind, n, VALUE_SIZE, records, PARTITIONS))
        results = {}
        for client in clients:
            for variant in GROUPS[client]:
                name = VARIANTS[variant].label
                if (variant, kind) in UNSUPPORTED:
                    print("{:<36} skipped: {}".format(name, UNSUPPORTED[variant, kind]))
                    continue
                results[name] = timed(variant, bootstrap, topic, n)
        kp = results.get(VARIANTS["kafka-python"].label)
        cf = results.get(VARIANTS["confluent"].label)
        print("{:<36} {:>8} {:>8} {:>11} {:>7} {:>8} {:>8}".format(
            "client", "records", "seconds", "records/s", "MB/s", "vs kp", "vs ck"))
        for name, (tally, seconds) in results.items():
            rate = tally.count / seconds
            ratio = lambda ref: "-" if ref is None else "{:.2f}x".format(rate / (ref[0].count / ref[1]))  # noqa: E731
            # The mock may have dropped the oldest records: then only the count is checked.
            ok = tally.count == n and (dropped_from > 0 or tally.checksum == written.checksum)
            print("{:<36} {:>8} {:>8.2f} {:>11,.0f} {:>7.1f} {:>8} {:>8}{}".format(
                name, tally.count, seconds, rate, tally.value_bytes / seconds / 1e6, ratio(kp),
                ratio(cf), "" if ok else "  (NOT VERIFIED: count or checksum differs)"))
        if profile and "kproto" in clients:
            print(profile_kproto(bootstrap, topic, n))


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
