"""``python -m kproto trace``: run the decoding proxy, or render a recorded trace as a page.

Owns the command line only. ``trace --upstream HOST:PORT`` runs :class:`~.proxy.TraceProxy`
until Ctrl-C (or SIGTERM), printing one line per request/response pair (``-v``: the decoded
trees too, ``--api``: only these APIs), optionally writing ``--jsonl`` and ``--html``, and
a summary on exit (stderr). The events of the ``--html`` page wait on disk, not in memory,
while the proxy runs (in the ``--jsonl`` file, else in a temporary one deleted at exit), so
a proxy left running for hours does not grow. ``trace read CAPTURE`` decodes a pcap/pcapng
file (:mod:`.capture`) into the same lines, JSON lines and page, in time order. ``trace render
FILE... -o page.html`` merges JSON-lines files (the proxy's trace, ``kproto.events`` files)
into the timeline page.
"""

from __future__ import annotations

import argparse
import os
import signal
import ssl
import sys
import tempfile
import threading
from typing import Any, Optional, Sequence

from kproto.net import config
from kproto.errors import KafkaConfigurationError, KafkaError, ToolUsageError

__all__ = ["main", "parse_address"]


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` with every option's default (not for required arguments: they have none)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.required or not action.option_strings:
            return action.help or ""
        return super()._get_help_string(action) or ""


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT, or a port alone on 127.0.0.1 (kproto.net.config's one parser)."""
    return config.parse_address(text, default_host="127.0.0.1")


def _proxy_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kproto trace",
                                description="A decoding proxy: point any Kafka client at --listen.",
                                epilog="python -m kproto trace render FILE... -o page.html writes "
                                       "the timeline page of recorded --jsonl (and kproto.events) files; "
                                       "python -m kproto trace read CAPTURE decodes a pcap/pcapng file.",
                                formatter_class=_Defaults)
    p.add_argument("--upstream", required=True, help="HOST:PORT of a broker (the bootstrap)")
    p.add_argument("--listen", default="127.0.0.1:0",
                   help="HOST:PORT the clients bootstrap to (port 0: any free port)")
    p.add_argument("--advertise-host", help="host name given to clients for the proxy's ports")
    p.add_argument("--upstream-tls", action="store_true", help="speak TLS to the brokers")
    p.add_argument("--cafile", help="CA bundle for --upstream-tls (None: the system store)")
    p.add_argument("--insecure", action="store_true",
                   help="with --upstream-tls: do not verify the brokers' certificates")
    _output_options(p)
    p.add_argument("--html", help="write the timeline page to this file on exit (the events wait "
                   "in the --jsonl file, else in a temporary file, not in memory)")
    return p


def _render_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kproto trace render",
                                description="Write the timeline page of recorded traces.",
                                formatter_class=_Defaults)
    p.add_argument("files", nargs="+", help="JSON-lines files (trace --jsonl, kproto.events)")
    p.add_argument("-o", "--output", default="trace.html", help="the page (default: trace.html)")
    p.add_argument("--title", default="kproto trace")
    return p


def _read_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kproto trace read",
        description="Decode the Kafka traffic of a packet capture (pcap or pcapng, e.g. "
                    "tcpdump -i any -w FILE 'tcp port 9092'): one line per exchange in time "
                    "order, the summary on stderr, optionally JSON lines and the timeline page.",
        formatter_class=_Defaults)
    p.add_argument("file", help="the capture (pcap or pcapng)")
    p.add_argument("--port", action="append", type=int, default=[], metavar="PORT",
                   help="a broker port (repeatable); default: guessed from the connections' "
                        "SYNs and from what decodes as Kafka requests")
    _output_options(p)
    p.add_argument("--html", help="write the timeline page to this file")
    p.add_argument("--title", default="kproto trace", help="the page's title (with --html)")
    return p


def _output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="store_true", help="print the decoded field trees")
    p.add_argument("--api", action="append", default=[], metavar="NAME",
                   help="show only these APIs (e.g. Fetch,JoinGroup); repeatable")
    p.add_argument("--jsonl", help="write every event as JSON lines to this file")
    p.add_argument("--quiet", action="store_true", help="no per-exchange lines")


def _read(args: argparse.Namespace, out: Any) -> int:
    from kproto.tools.trace.capture import read_capture
    from kproto.tools.trace.report import JsonlWriter, Stats, time_key

    events: list[dict[str, Any]] = []
    with open(args.file, "rb") as f:
        capture = read_capture(f, events.append, set(args.port) or None,
                               keep_trees=args.verbose or bool(args.jsonl) or bool(args.html))
    events.sort(key=time_key)
    stats = Stats()
    printer = _Printer(out, args)
    jsonl_file = open(args.jsonl, "w", encoding="utf-8") if args.jsonl else None
    try:
        writer = JsonlWriter(jsonl_file) if jsonl_file else None
        for event in events:
            stats.add(event)
            if writer is not None:
                writer.write(event)
            printer(event)
    finally:
        if jsonl_file is not None:
            jsonl_file.close()
    print(stats.text(), file=sys.stderr)
    print(capture.text(), file=sys.stderr)
    if args.html:
        from kproto.tools.trace.html import write_page

        write_page(events, args.html, title=args.title)
        print("kproto trace: timeline written to {}".format(args.html), file=sys.stderr)
    return 0


class _Printer:
    """The one-line view of events (``--api`` filters exchanges, ``-v`` adds the trees)."""

    def __init__(self, out: Any, args: argparse.Namespace) -> None:
        self.out = out
        self.verbose = args.verbose
        self.quiet = args.quiet
        self.apis = {a.strip().lower() for item in args.api for a in item.split(",") if a.strip()}
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> None:
        from kproto.tools.trace.report import format_line, format_tree

        if self.quiet or (self.apis and event.get("kind") == "exchange"
                          and event["api"].lower() not in self.apis):
            return
        line = format_line(event)
        if line is None:
            return
        with self.lock:
            self.out.write(line + "\n")
            if self.verbose and event.get("kind") == "exchange":
                self.out.write(format_tree(event) + "\n")
            self.out.flush()


def _render(args: argparse.Namespace) -> int:
    from kproto.tools.trace.html import write_page
    from kproto.tools.trace.report import read_events

    events = read_events(args.files)
    write_page(events, args.output, title=args.title)
    print("kproto trace: {} events -> {}".format(len(events), args.output), file=sys.stderr)
    return 0


def _run_proxy(args: argparse.Namespace, out: Any) -> int:
    from kproto.tools.trace.proxy import TraceProxy
    from kproto.tools.trace.report import JsonlWriter, Stats

    printer = _Printer(out, args)
    context: Optional[ssl.SSLContext] = None
    if args.upstream_tls:
        context = ssl.create_default_context(cafile=args.cafile)
        if args.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    stats = Stats()
    keep = args.verbose or bool(args.jsonl) or bool(args.html)
    jsonl_file = open(args.jsonl, "w", encoding="utf-8") if args.jsonl else None
    # The page's events wait on disk: the --jsonl file, else a temporary spool.
    spool: Optional[str] = None
    if args.html and jsonl_file is None:
        fd, spool = tempfile.mkstemp(prefix="kproto-trace-", suffix=".jsonl")
        jsonl_file = os.fdopen(fd, "w", encoding="utf-8")
    writer = JsonlWriter(jsonl_file) if jsonl_file else None

    def sink(event: dict[str, Any]) -> None:
        stats.add(event)
        if writer is not None:
            writer.write(event)
        printer(event)

    proxy = TraceProxy(parse_address(args.upstream), sink, listen=parse_address(args.listen),
                       advertise_host=args.advertise_host, ssl_context=context, keep_trees=keep)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    proxy.start()
    try:
        while not stop.wait(0.2):
            if proxy.failure is not None:
                break
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        proxy.stop()
        if jsonl_file is not None:
            jsonl_file.close()
        print(stats.text(), file=sys.stderr)
        try:
            if args.html:
                from kproto.tools.trace.html import write_page
                from kproto.tools.trace.report import read_events

                write_page(read_events([spool or args.jsonl]), args.html)
                print("kproto trace: timeline written to {}".format(args.html), file=sys.stderr)
        finally:
            if spool is not None:
                os.unlink(spool)
    if proxy.failure is not None:
        print("kproto trace: error: {}".format(proxy.failure), file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str], out: Any = None) -> int:
    out = out or sys.stdout
    argv = list(argv)
    try:
        if argv[:1] == ["render"]:
            return _render(_render_parser().parse_args(argv[1:]))
        if argv[:1] == ["read"]:
            return _read(_read_parser().parse_args(argv[1:]), out)
        return _run_proxy(_proxy_parser().parse_args(argv), out)
    except (ToolUsageError, KafkaConfigurationError) as exc:  # bad options
        print("kproto trace: error: {}".format(exc), file=sys.stderr)
        return 2
    except (OSError, KafkaError) as exc:
        print("kproto trace: error: {}".format(exc), file=sys.stderr)
        return 1
