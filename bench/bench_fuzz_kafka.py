"""Fuzzing Apache Kafka 4.4 for N minutes: rate, findings, deaths, and the broker's heap.

    .venv/bin/python bench/bench_fuzz_kafka.py [--minutes 10] [--seed 1] [--out DIR]
        [--coverage] [-- extra fuzz options...]

Starts one Kafka 4.4 KRaft node from the test ground (:mod:`tests.brokers.maven`) with a
GC log, runs ``python -m kproto fuzz`` against it for the time given with
``--broker-log`` (its Log4j file), ``--broker-pid`` and ``--restart-cmd`` (a script that
starts the same node again on its ports and data, so a crash costs a restart, not the
run), and samples every 5 s the broker's RSS and its heap after the last collection (from
the GC log). ``--coverage`` starts the node with the JaCoCo agent in TCP-server mode and
passes ``--coverage`` to the run. Prints a summary and writes ``summary.json``,
``samples.csv``, the GC log, the report and the reproducers under ``--out``; the broker is
stopped by pid at the end (and whatever the restart script started, found by its port)
and its directory removed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

_HEAP = re.compile(r"(\d+)M->(\d+)M\((\d+)M\)")


def heap_after_gc(gc_log: str) -> tuple[int, int] | None:
    """(MB in use after the last collection, heap size MB) from a -Xlog:gc file."""
    try:
        with open(gc_log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    found = _HEAP.findall(tail)
    return (int(found[-1][1]), int(found[-1][2])) if found else None


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open("/proc/{}/status".format(pid)) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def start_node(directory: str, coverage_port: int | None):
    from tests.brokers import maven
    from tests.brokers._net import free_port
    from tests.brokers.apache import SINGLE_NODE_SETTINGS, _kraft_settings, _wait_ready

    port, cport = free_port(), free_port()
    settings = {**_kraft_settings(1, port, cport),
                "controller.quorum.bootstrap.servers": "127.0.0.1:{}".format(cport),
                **SINGLE_NODE_SETTINGS}
    node = maven.KafkaNode(directory, settings, maven.random_cluster_id(),
                           format_args=("--standalone",))
    jvm = ["-Xlog:gc:file={}:uptime".format(os.path.join(directory, "gc.log"))]
    if coverage_port is not None:
        from kproto.tools.fuzz.coverage import agent_option
        jvm.append(agent_option(maven.jacoco_agent(), coverage_port))
    node.start(extra_jvm=tuple(jvm))
    _wait_ready("127.0.0.1:{}".format(port), [node], 180.0)
    # the same command line again, for --restart-cmd (the node's own start is Python's)
    argv = node._java("kafka.Kafka", node.config_path, extra_jvm=tuple(jvm))
    script = os.path.join(directory, "restart.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexec {} >> {} 2>&1\n".format(
            " ".join(shlex.quote(a) for a in argv),
            shlex.quote(os.path.join(directory, "server.out"))))
    os.chmod(script, 0o755)
    return node, port, script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="directory for the results (default: a new temp dir)")
    parser.add_argument("--coverage", action="store_true",
                        help="JaCoCo agent in the broker, --coverage for the run")
    parser.add_argument("fuzz_args", nargs="*", help="more options for kproto fuzz")
    args = parser.parse_args()
    from kproto.tools.fuzz.target import listening_pid
    from tests.brokers._net import free_port

    out = args.out or tempfile.mkdtemp(prefix="kproto-fuzz-kafka-")
    os.makedirs(out, exist_ok=True)
    node_dir = tempfile.mkdtemp(prefix="kproto-fuzz-kafka44-")
    cov_port = free_port() if args.coverage else None
    node, port, restart = start_node(node_dir, cov_port)
    samples: list[tuple[float, float | None, int | None]] = []
    done = threading.Event()
    started = time.monotonic()

    def sample() -> None:
        while not done.wait(5.0):
            pid = listening_pid(port)
            heap = heap_after_gc(os.path.join(node_dir, "gc.log"))
            samples.append((round(time.monotonic() - started, 1), rss_mb(pid),
                            heap[0] if heap else None))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    report = os.path.join(out, "report.json")
    cmd = [sys.executable, "-m", "kproto", "fuzz", "--bootstrap-server",
           "127.0.0.1:{}".format(port), "--seconds", str(args.minutes * 60), "--seed",
           str(args.seed), "--broker-pid", str(node.pid), "--broker-log", node.log_path,
           "--restart-cmd", restart, "--out", os.path.join(out, "findings"),
           "--report", report, "--report-html", os.path.join(out, "report.html"), "--quiet"]
    if cov_port is not None:
        cmd += ["--coverage", "127.0.0.1:{}".format(cov_port)]
    cmd += args.fuzz_args
    try:
        with open(os.path.join(out, "fuzz.txt"), "w") as text:
            subprocess.run(cmd, stdout=text, stderr=subprocess.STDOUT, cwd=ROOT,
                           timeout=args.minutes * 60 + 1800)
    finally:
        done.set()
        sampler.join(10)
        pid = listening_pid(port)
        node.close()
        if pid is not None and pid != node.pid:  # started by the restart script
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if os.path.exists(os.path.join(node_dir, "gc.log")):
            shutil.copy(os.path.join(node_dir, "gc.log"), out)
        shutil.rmtree(node_dir, ignore_errors=True)
    data = json.load(open(report))
    with open(os.path.join(out, "samples.csv"), "w") as f:
        f.write("seconds,rss_mb,heap_after_gc_mb\n")
        f.writelines("{},{},{}\n".format(*s) for s in samples)
    heaps = [s[2] for s in samples if s[2] is not None]
    rss = [s[1] for s in samples if s[1] is not None]
    summary = {
        "minutes": args.minutes, "seed": args.seed, "coverage": args.coverage,
        "requests": data["requests"], "requests_per_second": data["requests_per_second"],
        "distinct_findings": data["distinct_findings"], "deaths": len(data["deaths"]),
        "restarts": data["restarts"], "stop_reason": data["stop_reason"],
        "findings_by_oracle": {}, "rss_mb_max": max(rss) if rss else None,
        "heap_after_gc_mb_first": heaps[0] if heaps else None,
        "heap_after_gc_mb_last": heaps[-1] if heaps else None,
        "heap_after_gc_mb_max": max(heaps) if heaps else None,
        "covered_probes": (data.get("coverage") or {}).get("covered"),
        "out": out,
    }
    for f in data["findings"]:
        summary["findings_by_oracle"][f["oracle"]] = \
            summary["findings_by_oracle"].get(f["oracle"], 0) + 1
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
