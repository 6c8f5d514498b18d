"""Fuzzing Apache Kafka 4.4 for N minutes: rate, findings, deaths, and the broker's heap.

    .venv/bin/python bench/bench_fuzz_kafka.py [--minutes 10] [--seed 1] [--out DIR]
        [--coverage] [--cluster] [--kill-after S] [-- extra fuzz options...]
    .venv/bin/python bench/bench_fuzz_kafka.py --compare 1,2,3 --minutes 5 [-- options]

Starts one Kafka 4.4 KRaft node from the test ground (:mod:`tests.brokers.maven`) with a
GC log, runs ``python -m kproto fuzz`` against it for the time given with
``--broker-log`` (its Log4j file), ``--broker-pid`` and ``--restart-cmd`` (a script that
starts the same node again on its ports and data, so a crash costs a restart, not the
run), and samples every 5 s the broker's RSS and its heap after the last collection (from
the GC log). ``--coverage`` starts the node with the JaCoCo agent in TCP-server mode and
passes ``--coverage`` to the run. ``--cluster`` fuzzes node 1 of the test ground's
three-node cluster instead (its restart script starts that node again; ``--kill-after S``
kills it S seconds in, to see the run survive). ``--compare SEEDS`` measures coverage
feedback: per seed, a run with feedback and one with ``--coverage-no-feedback`` at the
same time (equal load), each on a broker of its own, and the ratio of the covered probes
of the request-handling packages. Prints a summary and writes ``summary.json``,
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


def _restart_script(node, directory: str, jvm: tuple[str, ...]) -> str:
    """A script that starts ``node`` again with the same command line (for --restart-cmd;
    the node's own start is Python's)."""
    argv = node._java("kafka.Kafka", node.config_path, extra_jvm=jvm)
    script = os.path.join(directory, "restart.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexec {} >> {} 2>&1\n".format(
            " ".join(shlex.quote(a) for a in argv),
            shlex.quote(os.path.join(node.directory, "server.out"))))
    os.chmod(script, 0o755)
    return script


def _jvm(directory: str, coverage_port: int | None) -> tuple[str, ...]:
    from tests.brokers import maven

    jvm = ["-Xlog:gc:file={}:uptime".format(os.path.join(directory, "gc.log"))]
    if coverage_port is not None:
        from kproto.tools.fuzz.coverage import agent_option
        jvm.append(agent_option(maven.jacoco_agent(), coverage_port))
    return tuple(jvm)


def start_node(directory: str, coverage_port: int | None):
    from tests.brokers import maven
    from tests.brokers._net import free_port
    from tests.brokers.apache import SINGLE_NODE_SETTINGS
    from tests.brokers.maven_kafka import _kraft_settings, _wait_ready

    port, cport = free_port(), free_port()
    settings = {**_kraft_settings(1, port, cport),
                "controller.quorum.bootstrap.servers": "127.0.0.1:{}".format(cport),
                **SINGLE_NODE_SETTINGS}
    node = maven.KafkaNode(directory, settings, maven.random_cluster_id(),
                           format_args=("--standalone",))
    jvm = _jvm(directory, coverage_port)
    node.start(extra_jvm=jvm)
    _wait_ready("127.0.0.1:{}".format(port), [node], 180.0)
    return node, port, _restart_script(node, directory, jvm), node.close


def start_cluster(directory: str, coverage_port: int | None):
    """The test ground's three-node cluster; node 1 (the one fuzzed) is started again with
    the GC log (and the agent), as the cluster starts its nodes plainly."""
    from tests.brokers.maven_kafka import MavenKafkaCluster, _wait_ready

    cluster = MavenKafkaCluster(3)
    node = cluster.node(1)
    port = cluster.ports[0]
    node.stop()
    jvm = _jvm(directory, coverage_port)
    node.start(extra_jvm=jvm)
    _wait_ready("127.0.0.1:{}".format(port), [node], 180.0)
    return node, port, _restart_script(node, directory, jvm), cluster.close


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="directory for the results (default: a new temp dir)")
    parser.add_argument("--coverage", action="store_true",
                        help="JaCoCo agent in the broker, --coverage for the run")
    parser.add_argument("--cluster", action="store_true",
                        help="the three-node cluster; node 1 is fuzzed (and restarted)")
    parser.add_argument("--kill-after", type=float, metavar="SECONDS",
                        help="SIGKILL the fuzzed node this long into the run (the run's "
                             "--restart-cmd must bring it back)")
    parser.add_argument("--compare", metavar="SEEDS",
                        help="coverage feedback against its baseline: for each seed "
                             "(comma-separated), a run with and one without feedback at the "
                             "same time on brokers of their own; prints the ratio of the "
                             "request-handling probes")
    parser.add_argument("fuzz_args", nargs="*", help="more options for kproto fuzz")
    args = parser.parse_args()
    if args.compare:
        compare(args)
        return
    from kproto.tools.fuzz.target import listening_pid
    from tests.brokers._net import free_port

    out = args.out or tempfile.mkdtemp(prefix="kproto-fuzz-kafka-")
    os.makedirs(out, exist_ok=True)
    node_dir = tempfile.mkdtemp(prefix="kproto-fuzz-kafka44-")
    cov_port = free_port() if args.coverage else None
    node, port, restart, close = (start_cluster if args.cluster else start_node)(
        node_dir, cov_port)
    samples: list[tuple[float, float | None, int | None]] = []
    done = threading.Event()
    started = time.monotonic()
    if args.kill_after:
        def kill() -> None:
            if not done.wait(args.kill_after):
                pid = listening_pid(port)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
        threading.Thread(target=kill, daemon=True).start()

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
        close()
        if pid is not None and pid != node.pid:  # started by the restart script
            try:  # SIGKILL: its data goes, and a cluster node would wait for its quorum
                os.kill(pid, signal.SIGKILL)
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
        "cluster": args.cluster, "fuzz_args": args.fuzz_args,
        "requests": data["requests"], "requests_per_second": data["requests_per_second"],
        "distinct_findings": data["distinct_findings"], "deaths": len(data["deaths"]),
        "restarts": data["restarts"], "stop_reason": data["stop_reason"],
        "findings_by_oracle": {}, "rss_mb_max": max(rss) if rss else None,
        "heap_after_gc_mb_first": heaps[0] if heaps else None,
        "heap_after_gc_mb_last": heaps[-1] if heaps else None,
        "heap_after_gc_mb_max": max(heaps) if heaps else None,
        "covered_probes": (data.get("coverage") or {}).get("covered"),
        "request_handling_probes": (data.get("coverage") or {}).get("request_handling"),
        "feedback": (data.get("coverage") or {}).get("feedback"),
        "out": out,
    }
    for f in data["findings"]:
        summary["findings_by_oracle"][f["oracle"]] = \
            summary["findings_by_oracle"].get(f["oracle"], 0) + 1
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))


def compare(args: argparse.Namespace) -> None:
    """Both arms of each seed at once (equal load), then the table and the ratios."""
    out = args.out or tempfile.mkdtemp(prefix="kproto-fuzz-compare-")
    os.makedirs(out, exist_ok=True)
    rows = []
    for seed in [int(x) for x in args.compare.split(",")]:
        procs = []
        for arm in ("feedback", "baseline"):
            arm_out = os.path.join(out, "{}-{}".format(arm, seed))
            extra = ["--coverage-no-feedback"] if arm == "baseline" else []
            cmd = [sys.executable, os.path.abspath(__file__), "--minutes", str(args.minutes),
                   "--seed", str(seed), "--coverage", "--out", arm_out,
                   *(["--cluster"] if args.cluster else []), "--",
                   *args.fuzz_args, *extra]
            log = open(arm_out + ".txt", "w")
            procs.append((arm, arm_out, subprocess.Popen(cmd, stdout=log,
                                                         stderr=subprocess.STDOUT, cwd=ROOT),
                          log))
        results = {}
        for arm, arm_out, proc, log in procs:
            proc.wait()
            log.close()
            with open(os.path.join(arm_out, "summary.json")) as f:
                results[arm] = json.load(f)
        fb, base = results["feedback"], results["baseline"]
        rows.append((seed, fb, base, fb["request_handling_probes"] /
                     max(1, base["request_handling_probes"])))
        print("seed {}: feedback {} / baseline {} request-handling probes = {:.3f}x "
              "({} / {} requests)".format(seed, fb["request_handling_probes"],
                                          base["request_handling_probes"], rows[-1][3],
                                          fb["requests"], base["requests"]), flush=True)
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump([{"seed": r[0], "feedback": r[1], "baseline": r[2], "ratio": r[3]}
                   for r in rows], f, indent=1)
    ratios = [r[3] for r in rows]
    print("ratios {}; mean {:.3f}x".format(", ".join("{:.3f}".format(r) for r in ratios),
                                           sum(ratios) / len(ratios)))


if __name__ == "__main__":
    main()
