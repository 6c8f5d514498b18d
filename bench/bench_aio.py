"""kproto.aio vs kproto's blocking consumer vs aiokafka: consume throughput, same broker, one run.

    .venv/bin/python bench/bench_aio.py [--brokers tansu] [--records 200000] [--value-size 100]

Seeds one topic (4 partitions, ``--records`` values of ``--value-size`` bytes) with
confluent-kafka's producer, then each client reads it from the beginning with assign() (no
group), checksumming every record as ``_common`` does, and each read is verified by count and
checksum. Clients: kproto's blocking ``KafkaConsumer``, ``kproto.aio.AIOKafkaConsumer``,
aiokafka with its C extension and aiokafka without it (``AIOKAFKA_NO_EXTENSIONS=1``, in a
child process since the switch is read at import). For the asyncio clients a ticker task
sleeping 1 ms measures the loop's responsiveness: the longest gap between its wake-ups
("max stall") is bounded by the longest step the consumer runs on the loop (one network
step with its response decoding, or one getmany() collection of ``max_poll_records``).
Figures are only meaningful on an idle machine (check ``uptime``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import _MASK32, IDLE_S, Tally, read_kproto, seed, start_broker  # noqa: E402

PARTITIONS = 4


async def _read_async(consumer, tps, n: int) -> tuple[Tally, float]:
    crc32 = zlib.crc32
    count = size = total = 0
    stall = 0.0
    stop = False

    async def ticker() -> None:
        nonlocal stall
        loop = asyncio.get_running_loop()
        last = loop.time()
        while not stop:
            await asyncio.sleep(0.001)
            now = loop.time()
            stall = max(stall, now - last)
            last = now

    await consumer.start()
    tick = asyncio.get_running_loop().create_task(ticker())
    try:
        consumer.assign(tps)
        idle = time.monotonic() + IDLE_S
        while count < n and time.monotonic() < idle:
            batch = await consumer.getmany(timeout_ms=500)
            if batch:
                idle = time.monotonic() + IDLE_S
            for records in batch.values():
                for r in records:
                    value = r.value
                    total += crc32(value, crc32(r.key, (r.offset * 1031 + r.partition) & _MASK32))
                    size += len(value)
                count += len(records)
    finally:
        stop = True
        await tick
        await consumer.stop()
    return Tally(count, size, total), stall


def read_aio(client: str, bootstrap: str, topic: str, n: int) -> tuple[Tally, float]:
    if client == "kproto.aio":
        from kproto.aio import AIOKafkaConsumer, TopicPartition
    else:
        from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[no-redef]

    async def main() -> tuple[Tally, float]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        return await _read_async(consumer, [TopicPartition(topic, p) for p in range(PARTITIONS)], n)

    return asyncio.run(main())


def timed(client: str, bootstrap: str, topic: str, n: int) -> tuple[Tally, float, float | None]:
    if client == "aiokafka-noext":
        env = dict(os.environ, AIOKAFKA_NO_EXTENSIONS="1")
        out = subprocess.run([sys.executable, __file__, "--child", bootstrap, topic, str(n)], env=env,
                             check=True, capture_output=True, text=True).stdout
        got = json.loads(out.strip().splitlines()[-1])
        return Tally(*got["tally"]), got["seconds"], got["stall"]
    start = time.perf_counter()
    if client == "kproto":
        tally, stall = read_kproto(bootstrap, topic, PARTITIONS, n), None
    else:
        tally, stall = read_aio(client, bootstrap, topic, n)
    return tally, time.perf_counter() - start, stall


def child(bootstrap: str, topic: str, n: int) -> None:
    start = time.perf_counter()
    tally, stall = read_aio("aiokafka", bootstrap, topic, n)
    print(json.dumps({"tally": list(tally), "seconds": time.perf_counter() - start, "stall": stall}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="tansu")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--clients", default="kproto,kproto.aio,aiokafka,aiokafka-noext")
    parser.add_argument("--child", nargs=3, metavar=("BOOTSTRAP", "TOPIC", "N"))
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    print("load average: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for kind in args.brokers.split(","):
        with start_broker(kind.strip()) as broker:
            bootstrap = broker.bootstrap_servers
            topic = broker.new_topic(partitions=PARTITIONS, prefix="bench-aio")
            written = seed(bootstrap, topic, args.records, PARTITIONS, args.value_size)
            print("\n## {}: {} records of {} bytes, {} partitions".format(
                kind, args.records, args.value_size, PARTITIONS))
            print("{:<16} {:>8} {:>8} {:>11} {:>8} {:>10}".format(
                "client", "records", "seconds", "records/s", "vs kproto", "max stall"))
            base = None
            for client in args.clients.split(","):
                tally, seconds, stall = timed(client, bootstrap, topic, args.records)
                rate = tally.count / seconds
                base = base or rate
                ok = tally.count == args.records and tally.checksum == written.checksum
                print("{:<16} {:>8} {:>8.2f} {:>11,.0f} {:>8.2f}x {:>10}{}".format(
                    client, tally.count, seconds, rate, rate / base,
                    "-" if stall is None else "{:.1f} ms".format(stall * 1000),
                    "" if ok else "  (NOT VERIFIED)"))


if __name__ == "__main__":
    main()
