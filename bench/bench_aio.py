"""kproto.aio vs kproto's blocking consumer vs aiokafka: consume throughput, same broker, one run.

    .venv/bin/python bench/bench_aio.py [--brokers tansu|kafka|mock] [--records 200000] [--value-size 100]
    .venv/bin/python bench/bench_aio.py --loop-debug      # also the longest loop callback, per client

Seeds one topic (4 partitions, ``--records`` values of ``--value-size`` bytes) with
confluent-kafka's producer, then each client reads it from the beginning with assign() (no
group) through ``_common``'s verified read (count and checksum), timed from the consumer's
construction to its last record, its close reported apart (``close s``; as ``bench_matrix``). Clients: kproto's blocking
``KafkaConsumer``, ``kproto.aio.AIOKafkaConsumer``, aiokafka with its C extension and aiokafka
without it (``AIOKAFKA_NO_EXTENSIONS=1``, in a child process since the switch is read at
import). Every client reads with its defaults: 1 MiB per partition per fetch
(``max_partition_fetch_bytes``), 500 records per ``getmany()`` (kproto's
``max_poll_records``; aiokafka has no bound).

The loop's responsiveness, for the asyncio clients: in the timed read a ticker task sleeping
1 ms measures the longest gap between its wake-ups from ``assign()`` to the last record ("max
stall"). With ``--loop-debug`` each asyncio client reads once more, untimed, under asyncio's
debug mode with ``slow_callback_duration`` at 1 ms: the longest callback asyncio reports
(wall time, which a loaded machine stretches) and the callback that took the most CPU time
of the loop's thread (what the step itself costs; with where its task resumed and
suspended) are printed. Both are bounded by the longest step a consumer runs on the loop:
for kproto.aio one network step (reading the sockets and parsing the responses, which leaves
each partition's records as bytes) or one ``getmany()`` collection (decoding at most
``max_poll_records`` records, after checking the CRC of the batches they are in), plus
what the application does with the records in the same step.
Figures are only meaningful on an idle machine (check ``uptime``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from typing import Any, Callable, Iterator, NamedTuple, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import Progress, ReadTimer, Tally, Timing, drain_asyncio, read_kproto, seed, start_broker  # noqa: E402

PARTITIONS = 4
#: asyncio's debug mode reports the callbacks that ran at least this long (seconds).
SLOW_CALLBACK_S = 0.001


class Loop(NamedTuple):
    """What a read saw of its event loop: the ticker's longest gap (seconds), and under
    ``--loop-debug`` the longest callback asyncio reported and the callback that took the
    most CPU time (seconds, what ran)."""

    stall: float
    slowest: Optional[tuple[float, str]] = None
    costliest: Optional[tuple[float, str]] = None


def _suspended_at(handle: asyncio.Handle) -> str:
    """Where the task a handle steps is suspended (its innermost coroutine frame), or what
    the handle calls."""
    callback = getattr(handle, "_callback", None)
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        coro: Any = task.get_coro()
        where = "?"
        while coro is not None:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            if frame is not None:
                where = "{}:{} {}".format(os.path.basename(frame.f_code.co_filename), frame.f_lineno,
                                          frame.f_code.co_name)
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        return where
    return getattr(callback, "__qualname__", repr(callback))


class _SlowCallbacks(logging.Handler):
    """The loop's longest callbacks while ``armed`` (the read, not the consumer's start and
    stop): ``slowest``, the longest of asyncio's "Executing <handle> took N seconds" reports
    (wall time: a loaded machine lengthens it), and ``costliest``, the callback that took
    the most CPU time of this thread (what the consumer's own step costs, load or not)
    with where its task resumed and where it suspended again (:meth:`instrument`)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.armed = False
        self.slowest: Optional[tuple[float, str]] = None
        self.costliest: Optional[tuple[float, str]] = None

    def emit(self, record: logging.LogRecord) -> None:
        if not self.armed or not record.msg.startswith("Executing") or not isinstance(record.args, tuple):
            return
        handle, seconds = record.args
        if self.slowest is None or seconds > self.slowest[0]:
            self.slowest = (float(seconds), str(handle)[:300])

    @contextlib.contextmanager
    def instrument(self) -> Iterator[None]:
        """Time every callback's CPU (``Handle._run``) while inside."""
        run = asyncio.Handle._run
        cpu = time.thread_time

        def timed_run(handle: asyncio.Handle) -> None:
            if not self.armed:
                run(handle)
                return
            resumed = _suspended_at(handle)
            start = cpu()
            run(handle)
            spent = cpu() - start
            if self.costliest is None or spent > self.costliest[0]:
                self.costliest = (spent, "{} -> {}".format(resumed, _suspended_at(handle)))

        asyncio.Handle._run = timed_run  # type: ignore[method-assign]
        try:
            yield
        finally:
            asyncio.Handle._run = run  # type: ignore[method-assign]


async def _read_watched(consumer, tps, n: int, slow: _SlowCallbacks, progress: Optional[Progress]
                        ) -> tuple[Tally, float]:
    """The read, with the loop watched from ``assign()`` to the last record: a ticker
    task's longest gap, and ``slow`` armed."""
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
    try:
        consumer.assign(tps)
        tick = asyncio.get_running_loop().create_task(ticker())
        slow.armed = True
        try:
            tally = await drain_asyncio(consumer, n, progress)
        finally:
            slow.armed = False
            stop = True
            await tick
    finally:
        await consumer.stop()
    return tally, stall


def read_aio(client: str, bootstrap: str, topic: str, n: int, debug: bool = False,
             progress: Optional[Progress] = None) -> tuple[Tally, Loop]:
    if client == "kproto.aio":
        from kproto.aio import AIOKafkaConsumer, TopicPartition
    else:
        from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[no-redef]

    slow = _SlowCallbacks()

    async def main() -> tuple[Tally, float]:
        if debug:
            asyncio.get_running_loop().slow_callback_duration = SLOW_CALLBACK_S
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        return await _read_watched(consumer, [TopicPartition(topic, p) for p in range(PARTITIONS)], n, slow,
                                   progress)

    asyncio_log = logging.getLogger("asyncio")
    if not debug:
        tally, stall = asyncio.run(main())
        return tally, Loop(stall)
    asyncio_log.addHandler(slow)
    try:
        with slow.instrument():
            tally, stall = asyncio.run(main(), debug=True)
    finally:
        asyncio_log.removeHandler(slow)
    return tally, Loop(stall, slow.slowest, slow.costliest)


def timed(client: str, bootstrap: str, topic: str, n: int, debug: bool = False
          ) -> tuple[Tally, Timing, Optional[Loop]]:
    if client == "aiokafka-noext":
        env = dict(os.environ, AIOKAFKA_NO_EXTENSIONS="1")
        argv = [sys.executable, __file__, "--child", bootstrap, topic, str(n)] + (["--loop-debug"] if debug else [])
        out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
        got = json.loads(out.strip().splitlines()[-1])
        slowest, costliest = got["slowest"], got["costliest"]
        return Tally(*got["tally"]), Timing(*got["timing"]), Loop(got["stall"], tuple(slowest) if slowest else None,
                                                                   tuple(costliest) if costliest else None)
    timer = ReadTimer(n)
    progress, timing = timer.progress, timer.timing
    if client == "kproto":
        return read_kproto(bootstrap, topic, PARTITIONS, n, progress=progress), timing(), None
    tally, loop = read_aio(client, bootstrap, topic, n, debug, progress)
    return tally, timing(), loop


def child(bootstrap: str, topic: str, n: int, debug: bool) -> None:
    timer = ReadTimer(n)
    progress, timing = timer.progress, timer.timing
    tally, loop = read_aio("aiokafka", bootstrap, topic, n, debug, progress)
    print(json.dumps({"tally": list(tally), "timing": list(timing()), "stall": loop.stall,
                      "slowest": loop.slowest, "costliest": loop.costliest}))


def _ms(seconds: Optional[float]) -> str:
    return "-" if seconds is None else "{:.1f} ms".format(seconds * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="tansu")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--clients", default="kproto,kproto.aio,aiokafka,aiokafka-noext")
    parser.add_argument("--loop-debug", action="store_true",
                        help="also read once more per asyncio client under asyncio's debug mode: the longest callback")
    parser.add_argument("--child", nargs=3, metavar=("BOOTSTRAP", "TOPIC", "N"))
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), args.loop_debug)
        return
    print("load average: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    clients = args.clients.split(",")
    for kind in args.brokers.split(","):
        with start_broker(kind.strip()) as broker:
            bootstrap = broker.bootstrap_servers
            topic = broker.new_topic(partitions=PARTITIONS, prefix="bench-aio")
            written = seed(bootstrap, topic, args.records, PARTITIONS, args.value_size)
            print("\n## {}: {} records of {} bytes, {} partitions".format(
                kind, args.records, args.value_size, PARTITIONS))
            print("{:<16} {:>8} {:>8} {:>11} {:>9} {:>10} {:>8}".format(
                "client", "records", "seconds", "records/s", "vs kproto", "max stall", "close s"))
            base = None
            for client in clients:
                tally, timing, loop = timed(client, bootstrap, topic, args.records)
                rate = tally.count / timing.seconds
                base = base or rate
                print("{:<16} {:>8} {:>8.2f} {:>11,.0f} {:>8.2f}x {:>10} {:>8.2f}{}".format(
                    client, tally.count, timing.seconds, rate, rate / base, _ms(loop.stall if loop else None),
                    timing.close_s, "" if _verified(tally, args.records, written) else "  (NOT VERIFIED)"))
            if not args.loop_debug:
                continue
            print("\nunder asyncio's debug mode (slow_callback_duration {:.0f} ms; untimed): the longest "
                  "callback (wall), the costliest (CPU of the loop's thread)".format(SLOW_CALLBACK_S * 1000))
            for client in clients:
                if client == "kproto":
                    continue
                tally, _timing, loop = timed(client, bootstrap, topic, args.records, debug=True)
                assert loop is not None
                slowest, costliest = loop.slowest, loop.costliest
                print("{:<16} longest {:>9}, costliest {:>9}{}".format(
                    client, _ms(slowest[0]) if slowest else "< {:.0f} ms".format(SLOW_CALLBACK_S * 1000),
                    _ms(costliest[0] if costliest else None),
                    "" if _verified(tally, args.records, written) else "  (NOT VERIFIED)"))
                if slowest:
                    print("{:<16}   longest:   {}".format("", slowest[1]))
                if costliest:
                    print("{:<16}   costliest: {}".format("", costliest[1]))


def _verified(tally: Tally, n: int, written: Tally) -> bool:
    return tally.count == n and tally.checksum == written.checksum


if __name__ == "__main__":
    main()
