"""Fuzzer throughput: generated requests per second against Tansu, per API.

    .venv/bin/python bench/bench_fuzz.py [--seconds 10] [--apis Fetch,Metadata,JoinGroup]

For each API, a fresh Tansu (a child process) and one ``kproto.tools.fuzz`` run of valid
requests only (``--levels valid``: generation from the schema, encoding, one exchange,
strict decoding and every oracle with its probes, minimisation off), then the same with
every level (field/frame mutants and sequences; a broker the mutants kill ends the run
early, which is printed). Runs are ``--adaptive`` (sequences capped at a quarter of the
time). Also printed: the generator alone (requests built and encoded per
second, no broker). One broker connection at a time, as the fuzzer works.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def generator_rate(api: str, seconds: float = 2.0) -> float:
    from kproto.tools.fuzz import schema
    from kproto.tools.fuzz.values import ValueGenerator, every_version

    spec = schema.api_by_name(api)
    versions = list(every_version(spec))
    gen = ValueGenerator(random.Random(1))
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        v = versions[n % len(versions)]
        gen.request(spec, v).encode(v)
        n += 1
    return n / (time.perf_counter() - start)


def broker_rate(api: str, seconds: float, levels: tuple[str, ...]) -> tuple[float, str, int]:
    from kproto.tools.fuzz.runner import Fuzzer, FuzzConfig
    from tests.brokers.tansu import TansuBroker

    broker = TansuBroker()
    try:
        fuzzer = Fuzzer(FuzzConfig(broker.bootstrap_servers, apis=[api], seconds=seconds,
                                   seed=1, minimise=False, levels=levels, adaptive=True,
                                   broker_pid=broker.pid))
        stats = fuzzer.run()
        sent = sum(stats.requests.values())
        return sent / (stats.ended - stats.started), stats.stop_reason, len(fuzzer.findings)
    finally:
        broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--apis", default="Fetch,Metadata,JoinGroup")
    args = parser.parse_args()
    print("{:10s} {:>14s} {:>16s} {:>22s}".format("API", "generator/s", "valid vs Tansu/s",
                                                  "all levels vs Tansu/s"))
    for api in args.apis.split(","):
        gen = generator_rate(api)
        valid, _, _ = broker_rate(api, args.seconds, ("valid",))
        mixed, why, findings = broker_rate(api, args.seconds,
                                           ("valid", "field", "frame", "sequence"))
        print("{:10s} {:14.0f} {:16.0f} {:16.0f} ({}, {} findings)".format(
            api, gen, valid, mixed, why, findings))


if __name__ == "__main__":
    main()
