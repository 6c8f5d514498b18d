"""``python -m kproto fuzz``: the fuzzer's command line.

    python -m kproto fuzz --bootstrap-server 127.0.0.1:9092 [--api Fetch,JoinGroup]
        [--versions 12-17] [--seed N] [--seconds S | --requests N] [--out DIR]
        [--report FILE.json] [--report-html FILE.html] [--broker-pid PID] ...
    python -m kproto fuzz replay FILE [FILE...] --bootstrap-server 127.0.0.1:9092

Owns argument parsing, the loopback-only rule (``--allow-remote`` lifts it), the report
files and exit statuses: 0 a run finished (findings or not) / every replayed finding fires
again, 1 one no longer fires, 2 bad input or an unreachable broker (one line on stderr).
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from pathlib import Path
from typing import NoReturn, Optional, Sequence

from kproto.errors import KafkaConfigurationError, ToolError, ToolUsageError
from kproto.net.config import parse_address
from kproto.tools.fuzz import corpus, report, schema
from kproto.tools.fuzz.replay import replay
from kproto.tools.fuzz.runner import Fuzzer, FuzzConfig
from kproto.tools.fuzz.target import Target

LEVELS = ("valid", "field", "frame", "sequence")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        raise ToolUsageError(message)


def _versions(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("-")
    try:
        return (int(lo), int(hi if sep else lo))
    except ValueError:
        raise argparse.ArgumentTypeError("--versions wants N or LO-HI, not {!r}".format(
            text)) from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m kproto fuzz",
                usage="%(prog)s --bootstrap-server HOST:PORT [options]\n"
                      "       %(prog)s replay FILE [FILE ...] --bootstrap-server HOST:PORT",
                description="Fuzz a Kafka broker at the protocol level (loopback only unless "
                            "--allow-remote).",
                epilog="replay: send saved reproducer files (--out DIR) again and say whether "
                       "each still fires (exit 0 all do, 1 one does not); "
                       "'%(prog)s replay --help' for its options.")
    p.add_argument("--bootstrap-server", required=True, help="HOST:PORT of one broker")
    p.add_argument("--api", help="comma-separated API names (default: every API the broker "
                                 "advertises, cluster-internal ones left out)")
    p.add_argument("--skip-api", default="", help="comma-separated API names to leave out")
    p.add_argument("--versions", type=_versions, help="N or LO-HI: only these versions")
    p.add_argument("--seed", type=int, default=0, help="replays a run exactly (default 0)")
    p.add_argument("--seconds", type=float, default=60.0, help="time bound (default 60)")
    p.add_argument("--requests", type=int, help="request bound")
    p.add_argument("--max-rps", type=float, help="requests per second at most")
    p.add_argument("--max-connections", type=int, default=4,
                   help="connections open at once at most (default 4)")
    p.add_argument("--timeout", type=float, default=6.0,
                   help="seconds a valid request may take before it is a hang (default 6)")
    p.add_argument("--out", type=Path, help="directory for reproducer files")
    p.add_argument("--report", type=Path, help="write the JSON report here")
    p.add_argument("--report-html", type=Path, help="write a self-contained HTML report here")
    p.add_argument("--broker-pid", type=int, help="watch this process's RSS and existence")
    p.add_argument("--broker-log", type=Path, metavar="FILE",
                   help="follow the broker's log file: an ERROR (or a stack trace) logged "
                        "while a request is in flight is a finding of that request")
    p.add_argument("--coverage", metavar="HOST:PORT",
                   help="a JaCoCo agent in TCP-server mode in the broker's JVM: its coverage "
                        "is read after every batch of requests, the new probes are credited "
                        "to what was sent, APIs and sequences that keep reaching new code are "
                        "drawn more, the requests that reached it become seeds that later "
                        "requests are mutated from; the report has coverage per package (the "
                        "run then depends on timing: --seed replays it only roughly)")
    p.add_argument("--coverage-no-feedback", action="store_true",
                   help="with --coverage: measure coverage only, steer nothing (a baseline)")
    p.add_argument("--restart-cmd", metavar="CMD",
                   help="shell command that brings a dead broker back (it may return at once "
                        "or be the broker itself); the run records the death, runs it, waits "
                        "until the broker answers and goes on")
    p.add_argument("--restart-timeout", type=float, default=180.0,
                   help="seconds the restarted broker may take to answer (default 180)")
    p.add_argument("--probe-seconds", type=float, default=1.0,
                   help="a liveness probe at least this often, besides the one after every "
                        "exchange that ended without its answer (default 1)")
    p.add_argument("--rss-bound-mb", type=float, default=256.0,
                   help="RSS growth that is a finding (default 256 MB)")
    p.add_argument("--levels", default=",".join(LEVELS),
                   help="comma-separated subset of " + ",".join(LEVELS))
    p.add_argument("--prefix", default="kproto-fuzz-",
                   help="prefix of every topic and group the fuzzer names or creates")
    p.add_argument("--adaptive", action="store_true",
                   help="draw slow APIs less often and cap sequences at a quarter of the "
                        "time (more requests per second; --seed then replays only roughly)")
    p.add_argument("--no-minimise", action="store_true", help="keep findings as found")
    p.add_argument("--no-setup", action="store_true",
                   help="create no seed topic (the run then only reads what exists)")
    p.add_argument("--cluster-apis", action="store_true",
                   help="also fuzz cluster-internal APIs (broker registration, quorum, ACLs...)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback target (this tool sends malformed traffic)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def build_replay_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m kproto fuzz replay",
                description="Send a saved finding again and say whether it still fires.")
    p.add_argument("file", type=Path, nargs="+", help="reproducer file(s)")
    p.add_argument("--bootstrap-server", required=True, help="HOST:PORT of the broker")
    p.add_argument("--timeout", type=float, default=6.0)
    p.add_argument("--broker-log", type=Path, metavar="FILE",
                   help="the broker's log file (for broker_log findings)")
    p.add_argument("--no-setup", action="store_true",
                   help="do not re-create the run's seed topic before sending")
    p.add_argument("--prefix", default="kproto-fuzz-")
    p.add_argument("--allow-remote", action="store_true")
    return p


def check_loopback(host: str, allow_remote: bool) -> None:
    """Refuse a target that is not this machine unless ``allow_remote``."""
    if allow_remote:
        return
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError as exc:
        raise ToolUsageError("cannot resolve {!r}: {}".format(host, exc)) from None
    addresses = {str(info[4][0]) for info in infos}
    if not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        raise ToolUsageError("{} is not a loopback address: the fuzzer sends malformed "
                             "traffic, pass --allow-remote to target it".format(host))


def _names(text: Optional[str]) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def run(args: argparse.Namespace) -> int:
    host, port = parse_address(args.bootstrap_server)
    check_loopback(host, args.allow_remote)
    levels = tuple(_names(args.levels))
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad or not levels:
        raise ToolUsageError("--levels: unknown {}".format(",".join(bad) or "(none given)"))
    if args.versions is not None and args.versions[0] > args.versions[1]:
        raise ToolUsageError("empty version range {}-{}".format(*args.versions))
    for name in _names(args.api) + _names(args.skip_api):
        if schema.api_by_name(name) is None:
            raise ToolUsageError("unknown API {!r}".format(name))
    if args.requests is not None and args.requests < 1:
        raise ToolUsageError("--requests must be at least 1")
    if args.seconds is not None and args.seconds <= 0:
        raise ToolUsageError("--seconds must be positive")
    config = FuzzConfig(
        bootstrap="{}:{}".format(host, port), apis=_names(args.api) or None,
        versions=args.versions, seed=args.seed, seconds=args.seconds, requests=args.requests,
        max_rps=args.max_rps, out_dir=args.out, broker_pid=args.broker_pid,
        rss_bound_mb=args.rss_bound_mb, timeout=args.timeout,
        max_connections=max(2, args.max_connections), prefix=args.prefix,
        minimise=not args.no_minimise, setup=not args.no_setup,
        cluster_apis=args.cluster_apis, levels=levels, adaptive=args.adaptive,
        restart_cmd=args.restart_cmd, restart_timeout=args.restart_timeout,
        probe_seconds=args.probe_seconds, broker_log=args.broker_log,
        coverage=args.coverage, coverage_feedback=not args.coverage_no_feedback,
        skip_apis=[spec.api_name for spec in map(schema.api_by_name, _names(args.skip_api))
                   if spec is not None],
        progress=None if args.quiet else sys.stderr)
    fuzzer = Fuzzer(config)
    fuzzer.run()
    data = report.build(fuzzer)
    if args.report:
        args.report.write_text(report.to_json(data))
    if args.report_html:
        args.report_html.write_text(report.to_html(data))
    sys.stdout.write(report.to_text(data))
    return 0


def run_replay(args: argparse.Namespace) -> int:
    host, port = parse_address(args.bootstrap_server)
    check_loopback(host, args.allow_remote)
    try:
        findings = [(path, corpus.load(path)) for path in args.file]
    except ValueError as exc:
        raise ToolUsageError(str(exc)) from None
    all_fire = True
    for path, finding in findings:
        target = Target(host, port, timeout=args.timeout)
        try:
            fires, verdicts = replay(finding, target, setup=not args.no_setup,
                                     prefix=args.prefix, broker_log=args.broker_log)
        finally:
            target.close()
        all_fire = all_fire and fires
        print("{}: {} v{} (fired on {}) [{}] {}: {}".format(
            path, finding.api, finding.version, finding.version_text, finding.oracle,
            finding.signature,
            "FIRES again" if fires else "does not fire"))
        for v in verdicts:
            print("  [{}] {}".format(v.oracle, v.message))
    return 0 if all_fire else 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["replay"]:
            return run_replay(build_replay_parser().parse_args(argv[1:]))
        return run(build_parser().parse_args(argv))
    except (ToolError, KafkaConfigurationError) as exc:  # bad options, an unreachable broker
        print("kproto fuzz: error: {}".format(exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the run started (a running run reports and ends)
        return 130


__all__ = ["main", "build_parser", "check_loopback"]
