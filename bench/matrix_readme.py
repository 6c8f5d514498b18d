"""The README's matrix figures, rendered from ``bench_matrix.py --json`` output.

    .venv/bin/python bench/matrix_readme.py matrix.json [more.json ...] [--big-read big.json] \
        [--write README.md]

Prints Markdown, per matrix run given: the run's date, machine and versions; the issue's
goals, each with the measured ratios and whether it holds; per broker, one row per cell (kproto's records/s and
MB/s, its ratios to each peer, CPU seconds per million records and peak RSS of kproto and
tuned confluent-kafka); and the ``--big-read`` RSS samples. ``--write`` replaces the text
between ``<!-- bench_matrix:begin -->`` and ``<!-- bench_matrix:end -->`` in the file.
Nothing is typed by hand: rerun the matrix, rerun this.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Callable, Optional

BEGIN, END = "<!-- bench_matrix:begin -->", "<!-- bench_matrix:end -->"
TUNED, DEFAULTS, KAFKA_PYTHON = "confluent-tuned", "confluent", "kafka-python"
AIOKAFKA, AIOKAFKA_PURE, JAVA = "aiokafka", "aiokafka-pure", "java"
#: Peers with a "× peer" column when the run has them: (variant, column head).
EXTRA_PEERS = ((AIOKAFKA, "× aiokafka"), (AIOKAFKA_PURE, "× aiokafka pure"), (JAVA, "× Java"),
               (KAFKA_PYTHON, "× kafka-python"))
BROKER_NAMES = {"tansu": "Tansu", "mock": "librdkafka's mock cluster", "kafka": "Apache Kafka 4.4"}


def size_label(size: int) -> str:
    return "{} KB".format(size // 1000) if size >= 1000 and size % 1000 == 0 else "{} B".format(size)


def med(cell: dict, variant: str, key: str) -> Optional[float]:
    m = cell["median"].get(variant)
    return None if m is None else m.get(key)


def ratio(cell: dict, key: str, variant: str = "kproto", ref: str = TUNED) -> Optional[float]:
    a, b = med(cell, variant, key), med(cell, ref, key)
    return None if a is None or not b else a / b


def fmt(value: Optional[float], spec: str) -> str:
    return "-" if value is None else spec.format(value)


def span(values: list[float], spec: str = "{:.2f}×") -> str:
    if not values:
        return "no cell"
    lo, hi = min(values), max(values)
    return spec.format(lo) if abs(hi - lo) < 0.005 else "{}–{}".format(spec.format(lo), spec.format(hi))


def goals(cells: list[dict]) -> list[str]:
    """One table row per goal of the issue: what was measured, and whether it holds."""
    rows = []

    def goal(text: str, pick: Callable[[dict], bool], measure: Callable[[dict], Optional[float]],
             target: "float | dict[str, float] | None", higher_is_better: bool = True) -> None:
        """``target`` per broker (a dict), the same for all, or None: reported, no goal."""
        for broker in sorted({c["broker"] for c in cells}):
            got = [v for c in cells if c["broker"] == broker and not c["skipped"] and pick(c)
                   for v in [measure(c)] if v is not None]
            goal_value = target.get(broker) if isinstance(target, dict) else target
            held = (goal_value is not None and bool(got)
                    and all(v >= goal_value if higher_is_better else v <= goal_value for v in got))
            verdict = ("reported" if goal_value is None and got else "yes" if held
                       else ("no" if got else "not measured"))
            rows.append("| {} | {} | {} | {} |".format(text, broker, span(got), verdict))

    goal("100 B: kproto (CRC checked) ≥ 1.0× tuned confluent-kafka, records/s",
         lambda c: c["value_size"] == 100, lambda c: ratio(c, "records_s"), 1.0)
    goal("1 KB: ≥ 0.8× tuned confluent-kafka, MB/s", lambda c: c["value_size"] == 1000,
         lambda c: ratio(c, "mb_s"), 0.8)
    goal("10 KB and above: ≥ 0.6× tuned confluent-kafka, MB/s", lambda c: c["value_size"] >= 10000,
         lambda c: ratio(c, "mb_s"), 0.6)
    goal("CPU per record ≤ tuned confluent-kafka's (kproto / confluent)", lambda c: True,
         lambda c: ratio(c, "cpu_per_m"), 1.0, higher_is_better=False)
    # 1,000 partitions against 4, same value size and codec: CPU per record (lower is better).
    by_key = {(c["broker"], c["value_size"], c["codec"], c["partitions"]): c for c in cells if not c["skipped"]}

    def per_record_vs_4(c: dict) -> Optional[float]:
        base = by_key.get((c["broker"], c["value_size"], c["codec"], 4))
        a = med(c, "kproto", "cpu_per_m")
        b = None if base is None else med(base, "kproto", "cpu_per_m")
        return None if a is None or not b else a / b

    goal("1,000 partitions: kproto's CPU per record ≤ 2× 4 partitions' (p1000 / p4)",
         lambda c: c["partitions"] == 1000, per_record_vs_4, 2.0, higher_is_better=False)
    goal("1,000 partitions, 100 B: ≥ 0.5× tuned confluent-kafka on the mock, ≥ 1.0× on Tansu and Kafka 4.4, "
         "records/s", lambda c: c["partitions"] == 1000 and c["value_size"] == 100,
         lambda c: ratio(c, "records_s"), {"mock": 0.5, "tansu": 1.0, "kafka": 1.0})
    goal("4 partitions, 100 B and 1 KB: ≥ 1.0× aiokafka with its compiled extension, records/s",
         lambda c: c["partitions"] == 4 and c["value_size"] in (100, 1000),
         lambda c: ratio(c, "records_s", ref=AIOKAFKA), 1.0)
    goal("kproto / the Java consumer 4.4, records/s (every cell)", lambda c: True,
         lambda c: ratio(c, "records_s", ref=JAVA), None)
    return rows


def cell_table(cells: list[dict], variants: set[str]) -> list[str]:
    peers = [(v, title) for v, title in EXTRA_PEERS if v in variants]
    head = ("| value | partitions | codec | records | kproto records/s | kproto MB/s | × tuned | × tuned from 1st record | × defaults"
            + "".join(" | " + title for _, title in peers)
            + " | CPU s/M kproto, no-CRC, tuned, defaults | kproto busy, in GC | peak RSS MiB kproto, tuned |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for c in cells:
        label = "| {} | {:,} | {} | {:,}{} |".format(size_label(c["value_size"]), c["partitions"], c["codec"],
                                                    c["records"], "*" if c["capped"] else "")
        if c["skipped"]:
            out.append(label + " skipped: {} |".format(c["skipped"]) + " |" * (head.count("|") - 6))
            continue
        cpu = ", ".join(fmt(med(c, v, "cpu_per_m"), "{:.1f}") for v in ("kproto", "kproto-nocrc", TUNED, DEFAULTS))
        rss = ", ".join(fmt(med(c, v, "peak_rss_mib"), "{:.0f}") for v in ("kproto", TUNED))
        # kproto reads on one thread: CPU seconds over wall seconds is the share of the read
        # it computed; the rest it waited for the broker.
        per_m, rate = med(c, "kproto", "cpu_per_m"), med(c, "kproto", "records_s")
        busy = None if per_m is None or rate is None else per_m / 1e6 * rate
        out.append(label + " {} | {} | {} | {} | {} |{} {} | {} | {} |".format(
            fmt(med(c, "kproto", "records_s"), "{:,.0f}"), fmt(med(c, "kproto", "mb_s"), "{:.1f}"),
            fmt(ratio(c, "records_s"), "{:.2f}"), fmt(ratio(c, "steady_records_s"), "{:.2f}"),
            fmt(ratio(c, "records_s", ref=DEFAULTS), "{:.2f}"),
            "".join(" {} |".format(fmt(ratio(c, "records_s", ref=v), "{:.2f}")) for v, _ in peers),
            cpu, "{}, {}".format(fmt(busy if busy is None else 100 * busy, "{:.0f}%"),
                                 fmt(med(c, "kproto", "gc_share"), "{:.0%}")), rss))
    return out


def render(report: dict, big: Optional[dict]) -> str:
    meta, config, cells = report["meta"], report["config"], report["cells"]
    variants = {v for c in cells for v in c["runs"]}
    lines = ["Generated by `bench/matrix_readme.py` from `bench/bench_matrix.py --mb {mb:g} --repeat {repeat}` "
             "(values {values}, partitions {partitions}, codecs {codecs}), {date}: {nproc} CPUs ({cpu}), load "
             "{load} at the start; {python}; kproto {kproto}; kafka-python {kp}; confluent-kafka {ck}; aiokafka {aio}; "
             "{tansu}. "
             "Medians of {repeat} read(s) per client and cell, every read verified by count and checksum; "
             "CPU is user + sys of the reading process (librdkafka's threads included), per million "
             "records.".format(mb=config["mb"], repeat=config["repeat"], values=config["values"],
                               partitions=config["partitions"] or "4,100,1000", codecs=config["codecs"],
                               date=meta["date"], nproc=meta["nproc"], cpu=meta["cpu_model"],
                               load=", ".join(str(x) for x in meta["loadavg"]), python=meta["python"],
                               kproto=meta["kproto"], kp=meta["kafka-python"], ck=meta["confluent-kafka"],
                               tansu=meta["tansu"], aio=meta.get("aiokafka", "-")),
             "", "| goal | broker | measured (over the cells it covers) | met |", "|---|---|---|---|"]
    lines += goals(cells)
    for broker in sorted({c["broker"] for c in cells}, key=lambda b: (b != "tansu", b)):
        mine = [c for c in cells if c["broker"] == broker]
        present = {v for c in mine for v in c["median"]}
        lines += ["", "**{}** (× columns: kproto with CRC checks, records/s against tuned confluent-kafka "
                      "(`fetch.queue.backoff.ms=0`), its defaults{}):".format(
                          BROKER_NAMES.get(broker, broker),
                          "".join(", " + title[2:] for v, title in EXTRA_PEERS if v in present)),
                  ""]
        lines += cell_table(mine, variants)
        if any(c["capped"] for c in mine):
            lines.append("\n\\* capped at 4 MiB of records per partition (the mock drops older data).")
    if big is not None:
        b = big["big_read"]
        run = b["run"]
        mib = 2 ** 20
        samples = run.get("samples") or []
        lines += ["", "**Memory over a long read** (`--big-read`, {date}): kproto read {gb:.2f} GB of {size:,} B "
                      "values from Tansu ({p} partitions, verified), RSS {before:.1f} MiB before the consumer, "
                      "peak {peak:.1f} MiB; over the last three quarters of the read RSS grew {growth:.1f} MiB "
                      "(one Fetch response is at most {resp:.0f} MiB). Samples (GB read: MiB): {samples}.".format(
                          date=big["meta"]["date"], gb=run["value_bytes"] / 1e9, size=b["value_size"],
                          p=b["partitions"], before=run["rss_before"] / mib, peak=run["peak_rss"] / mib,
                          growth=b.get("growth_after_first_quarter", 0) / mib,
                          resp=b["bounds"]["response_bytes"] / mib,
                          samples=", ".join("{:.2f}: {:.0f}".format(s / 1e9, r / mib) for s, r in samples[::4]))]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("matrix", nargs="+", help="bench_matrix.py --json outputs (one section each)")
    parser.add_argument("--big-read", help="bench_matrix.py --big-read --json output")
    parser.add_argument("--write", metavar="FILE", help="replace the marked block of FILE")
    args = parser.parse_args()
    reports = []
    for path in args.matrix:
        with open(path) as f:
            reports.append(json.load(f))
    big = None
    if args.big_read:
        with open(args.big_read) as f:
            big = json.load(f)
    text = "\n".join(render(report, big if i == len(reports) - 1 else None) for i, report in enumerate(reports))
    if not args.write:
        sys.stdout.write(text)
        return
    with open(args.write) as f:
        old = f.read()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(old):
        raise SystemExit("{}: no {} ... {} block".format(args.write, BEGIN, END))
    with open(args.write, "w") as f:
        f.write(pattern.sub(lambda _: BEGIN + "\n" + text + END, old))


if __name__ == "__main__":
    main()
