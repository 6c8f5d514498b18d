"""Where a kproto read spends its CPU: one seeded topic, reads profiled in child processes.

    .venv/bin/python bench/profile_read.py --broker mock --partitions 1000 --records 100000
    .venv/bin/python bench/profile_read.py --partitions 4 --records 200000 --roots .,/other/checkout
    .venv/bin/python bench/profile_read.py --accessors     # position()/assignment()/... per call
    .venv/bin/python bench/profile_read.py --broker tansu --partitions 4 --clients kproto,kproto.aio

Seeds one topic (``--records`` x ``--value`` bytes, record ``i`` to partition ``i % P``)
once, then reads it from the beginning with ``assign()`` in a child process per kproto
checkout (``--roots``, default this one; so two versions compare on the same data), per
client (``--clients``: the blocking ``KafkaConsumer``, default, and/or ``kproto.aio``'s
``AIOKafkaConsumer``) and per mode: ``cpu`` (no profiler: ``time.process_time`` of the child's read, which leaves out the
broker — the mock runs in the parent, Tansu in a process of its own — and is steadier than
wall time on a loaded machine, as it counts only this process's own CPU) and ``profile``
(under cProfile: the hottest functions with their call counts, which do not depend on load
at all). Every read is verified by count and checksum against the seeding's. Each read also
reports its start: wall and CPU seconds from the consumer's creation to its first records
(``cpu`` mode: their medians per root and client at the end). Children run with bytecode
caching on (``PYTHONDONTWRITEBYTECODE`` unset), so only a checkout's first read compiles
its modules: with ``--repeat`` the medians leave that out.

``--accessors`` instead times the cheap consumer accessors (``position``, ``assignment``,
``paused``, ``highwater``, ``current_lag``, ...) on an assigned, positioned consumer with
``timeit``, at 4 and 1,000 partitions (``--accessor-partitions``).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import os
import pstats
import statistics
import subprocess
import sys
import time
import timeit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import ROOT, preload, read_kproto, read_kproto_aio, seed, start_broker  # noqa: E402


def child(spec: dict) -> None:
    """One read (``spec["mode"]`` cpu or profile); prints a RESULT line."""
    # This checkout's bench/_common.py put its own root first: the read uses spec["root"]'s kproto.
    sys.path[:] = [spec["root"]] + [p for p in sys.path if os.path.abspath(p or ".") != ROOT]
    preload({"kproto"})
    profiler = cProfile.Profile() if spec["mode"] == "profile" else None
    gc_count = [0]
    gc_cpu = [0.0, 0.0]  # CPU seconds in collections, start of the running one

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_count[0] += 1
            gc_cpu[1] = time.process_time()
        else:
            gc_cpu[0] += time.process_time() - gc_cpu[1]

    gc.callbacks.append(on_gc)
    first: dict[str, float] = {}  # CPU and wall seconds from the consumer's creation to the first records

    def progress(count: int, size: int) -> None:
        if count and not first:
            first.update(cpu=time.process_time() - cpu0, wall=time.monotonic() - wall0)

    cpu0 = time.process_time()
    wall0 = time.monotonic()
    if profiler is not None:
        profiler.enable()
    read = read_kproto_aio if spec.get("client") == "kproto.aio" else read_kproto
    tally = read(spec["bootstrap"], spec["topic"], spec["partitions"], spec["n"],
                 check_crcs=spec.get("check_crcs", True), progress=progress)
    if profiler is not None:
        profiler.disable()
    cpu = time.process_time() - cpu0
    out: dict = {"count": tally.count, "checksum": tally.checksum, "cpu_s": cpu, "gc_runs": gc_count[0],
                 "gc_s": gc_cpu[0], "first_cpu_s": first.get("cpu"), "first_wall_s": first.get("wall")}
    if profiler is not None:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats(spec.get("sort", "tottime")).print_stats(spec.get("top", 30))
        if spec.get("dump"):
            stats.dump_stats(spec["dump"])
        out["profile"] = text.getvalue()
        out["calls"] = sum(v[1] for v in stats.stats.values())  # type: ignore[attr-defined]
    import kproto

    out["kproto"] = kproto.__file__
    print("RESULT " + json.dumps(out), flush=True)


def run(root: str, spec: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=root)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env, timeout=1800)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit("child failed ({}): {}".format(proc.returncode, proc.stderr[-2000:]))


def accessors(n: int, root: str, partition_counts: list[int]) -> None:
    """Per-call cost of the cheap accessors on an assigned, positioned consumer (mock) with
    each of ``partition_counts`` partitions: the best of 5 timeit runs and the Python
    function calls per call (cProfile: load-independent). ``highwater`` and the lag are
    read once a fetch answered for the partition (the topic is empty: the watermark is 0)."""
    sys.path[:] = [root] + [p for p in sys.path if os.path.abspath(p or ".") != ROOT]
    from kproto import KafkaConsumer, TopicPartition

    with start_broker("mock") as broker:
        for count in partition_counts:
            topic = broker.new_topic(partitions=count, prefix="bench-acc")
            tps = [TopicPartition(topic, p) for p in range(count)]
            with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
                c.assign(tps)
                tp = tps[min(7, count - 1)]
                for tpx in tps:
                    c.position(tpx)
                deadline = time.monotonic() + 30
                while c.highwater(tp) is None and time.monotonic() < deadline:
                    c.poll(timeout_ms=100)
                c.pause(tps[0])
                cases = {"position(tp)": lambda: c.position(tp), "assignment()": c.assignment,
                         "paused()": c.paused, "highwater(tp)": lambda: c.highwater(tp),
                         "current_lag(tp)": lambda: c.current_lag(tp), "subscription()": c.subscription}
                for name, fn in cases.items():
                    best = min(timeit.repeat(fn, number=n, repeat=5)) / n
                    profiler = cProfile.Profile()
                    profiler.enable()
                    for _ in range(100):
                        fn()
                    profiler.disable()
                    calls = sum(v[1] for v in pstats.Stats(profiler).stats.values()) / 100  # type: ignore[attr-defined]
                    print("{:>5} partitions  {:<18} {:8.2f} µs per call, {:5.1f} function calls per call ({})".format(
                        count, name, best * 1e6, calls, root), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", default="mock")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--value", type=int, default=100)
    parser.add_argument("--roots", default=".", help="kproto checkouts to compare (comma-separated)")
    parser.add_argument("--modes", default="cpu,profile")
    parser.add_argument("--clients", default="kproto", help="kproto and/or kproto.aio (comma-separated)")
    parser.add_argument("--repeat", type=int, default=1, help="cpu reads per root (minimum kept)")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", default="tottime", help="pstats order of the profile (tottime, cumulative, ...)")
    parser.add_argument("--dump", help="also write the raw profile to this file (pstats format)")
    parser.add_argument("--no-crc", action="store_true")
    parser.add_argument("--accessors", action="store_true")
    parser.add_argument("--accessor-partitions", default="4,1000", help="partition counts for --accessors")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--accessors-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    if args.accessors:
        for _ in range(args.repeat):
            for root in args.roots.split(","):
                env = dict(os.environ)
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                subprocess.run([sys.executable, os.path.abspath(__file__), "--accessors-child",
                                os.path.abspath(root), "--accessor-partitions", args.accessor_partitions],
                               env=env, cwd=ROOT, timeout=600)
        return
    if args.accessors_child:
        accessors(2000, args.accessors_child, [int(p) for p in args.accessor_partitions.split(",")])
        return
    roots = [os.path.abspath(r) for r in args.roots.split(",")]
    with start_broker(args.broker) as broker:
        topic = broker.new_topic(partitions=args.partitions, prefix="bench-profile")
        written = seed(broker.bootstrap_servers, topic, args.records, args.partitions, args.value)
        spec = {"bootstrap": broker.bootstrap_servers, "topic": topic, "partitions": args.partitions,
                "n": args.records, "top": args.top, "sort": args.sort, "dump": args.dump, "check_crcs": not args.no_crc}
        print("# {} partitions, {:,} x {} B on {}, roots {}".format(
            args.partitions, args.records, args.value, args.broker, roots))
        best: dict[str, float] = {}
        firsts: dict[str, list[tuple[float, float]]] = {}
        for mode in args.modes.split(","):
            for _ in range(args.repeat if mode == "cpu" else 1):
                # interleaved, so load drifts touch every root and client alike
                for root, client in [(r, c) for r in roots for c in args.clients.split(",")]:
                    out = run(root, dict(spec, mode=mode, root=root, client=client))
                    ok = (out["count"], out["checksum"]) == (written.count, written.checksum)
                    print("{} {} {} ({}): {:.2f} s CPU, {:.2f} µs CPU per record, {} gc runs ({:.0%} of the CPU){}{}{}".format(
                        mode, client, root, out["kproto"], out["cpu_s"], out["cpu_s"] / max(out["count"], 1) * 1e6,
                        out["gc_runs"], out["gc_s"] / max(out["cpu_s"], 1e-9),
                        ", {:,} calls".format(out["calls"]) if "calls" in out else "",
                        "" if out["first_wall_s"] is None else ", first records after {:.3f} s ({:.3f} s CPU)".format(
                            out["first_wall_s"], out["first_cpu_s"]),
                        "" if ok else "  NOT VERIFIED"), flush=True)
                    if "profile" in out:
                        print(out["profile"])
                    elif ok:
                        key = "{} {}".format(client, root)
                        best[key] = min(best.get(key, math.inf), out["cpu_s"] / out["count"] * 1e6)
                        if out["first_wall_s"] is not None:
                            firsts.setdefault(key, []).append((out["first_wall_s"], out["first_cpu_s"]))
        for key, us in best.items():
            print("best of {}: {:.2f} µs CPU per record, {}".format(args.repeat, us, key))
        for key, times in firsts.items():
            print("median of {}: first records after {:.3f} s ({:.3f} s CPU), {}".format(
                len(times), statistics.median(t[0] for t in times), statistics.median(t[1] for t in times), key))


if __name__ == "__main__":
    main()
