"""What the trace prints and stores: one line per event, the summary, JSON lines.

Owns :func:`format_line` (the default one-line view of an event), :class:`Stats` (the
summary on exit: requests, bytes and errors per API), :class:`JsonlWriter` and
:func:`read_events` (JSON lines, several files merged in time order: the proxy's trace and
the ``kproto.events`` a consumer wrote, see :mod:`kproto.transition_log`).
"""

from __future__ import annotations

import collections
import json
import threading
import time
from typing import Any, Iterable, Optional, TextIO

from kproto.tools.trace.summaries import expected_step

__all__ = ["format_line", "format_tree", "time_key", "Stats", "JsonlWriter", "read_events"]


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) + ".{:03d}".format(int(t % 1 * 1000))


def _value(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ",".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join("{}:{}".format(k, _value(x)) for k, x in v.items()) + "}"
    return str(v)


def time_key(event: dict[str, Any]) -> float:
    """When an event's line is stamped: an exchange when its answer came (or the request
    left, for one that has none), anything else when it happened. The proxy prints lines
    as answers arrive, so ordering by this key is the order lines are in time order."""
    if event.get("kind") == "exchange":
        return event.get("t_end") or event.get("t", 0.0)
    return event.get("t", 0.0)


def format_line(event: dict[str, Any]) -> Optional[str]:
    """The one-line view (None for events the default view does not show). An exchange's
    line is stamped with the time its answer came (:func:`time_key`): its latency says when
    the request left."""
    kind = event.get("kind")
    t = _clock(time_key(event))
    if kind == "exchange":
        where = "{}->{}".format(event["conn"], "node{}".format(event["node"])
                                if event.get("node") is not None else event["broker"])
        latency = "one-way" if event.get("one_way") else (
            "unanswered" if event.get("unanswered") else "{:.1f}ms".format(event["latency_ms"]))
        fields = " ".join("{}={}".format(k, _value(v)) for k, v in event["summary"].items())
        parts = [t, event.get("client_id") or "-", where,
                 "{} v{}".format(event["api"], event["version"]),
                 "#{}".format(event["correlation_id"]), latency, fields]
        if event.get("errors"):
            parts.append(("STEP=" if expected_step(event) else "ERRORS=") + ",".join(event["errors"]))
        for key in ("request_error", "response_error", "rewrite_problem"):
            if event.get(key):
                parts.append("UNDECODED {}: {}".format(key.split("_")[0], event[key]))
        if event.get("rewritten"):
            parts.append("rewrote " + ",".join("{}=>{}".format(a, b) for a, b in event["rewritten"]))
        return " ".join(p for p in parts if p)
    if kind == "undecodable" and event.get("tls"):
        return "{} {} TLS {} -> {}: {}".format(t, event["conn"], event["client"], event["broker"],
                                               event["reason"])
    if kind == "skipped":
        return "{} {} skipped {} bytes of the {} stream: {}".format(
            t, event["conn"], event["bytes"], event["direction"], event["reason"])
    if kind == "undecodable":
        return "{} {} UNDECODABLE {} {} bytes: {} (head {})".format(
            t, event["conn"], event["direction"], event["bytes"], event["reason"], event["head"])
    if kind == "open":
        return "{} {} open {} -> {}{}".format(
            t, event["conn"], event["client"], event["broker"],
            " via " + event["listen"] if event.get("listen") else
            " (its start is not in the capture)" if event.get("mid_stream") else "")
    if kind == "close":
        return "{} {} close: {}".format(t, event["conn"], event["reason"])
    if kind == "listen":
        return "{} listening on {} for {}".format(t, event["listen"], event["upstream"])
    if kind == "error":
        return "{} {} INTERNAL ERROR {}".format(t, event.get("conn"), event["error"])
    return None


def format_tree(event: dict[str, Any]) -> str:
    """The decoded trees of an exchange, indented (``-v``)."""
    out = []
    for side in ("request", "response"):
        if side in event:
            out.append("  {}: {}".format(side, json.dumps(event[side], indent=2)
                                         .replace("\n", "\n  ")))
    return "\n".join(out)


class Stats:
    """Counts for the summary on exit (thread-safe: the proxy thread adds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: collections.Counter[str] = collections.Counter()
        self.bytes_in: collections.Counter[str] = collections.Counter()
        self.bytes_out: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()
        self.steps: collections.Counter[str] = collections.Counter()  # errors that are steps
        self.undecodable = 0
        self.connections = 0
        self.tls = 0

    def add(self, event: dict[str, Any]) -> None:
        with self._lock:
            kind = event.get("kind")
            if kind == "exchange":
                api = event["api"]
                self.requests[api] += 1
                self.bytes_out[api] += event["req_bytes"]
                self.bytes_in[api] += event["resp_bytes"]
                counter = self.steps if expected_step(event) else self.errors
                for name in event["errors"]:
                    counter["{} {}".format(api, name) if counter is self.steps else name] += 1
                if event.get("request_error") or event.get("response_error"):
                    self.undecodable += 1
            elif kind == "undecodable" and event.get("tls"):
                self.tls += 1
            elif kind == "undecodable":
                self.undecodable += 1
            elif kind == "open":
                self.connections += 1

    def text(self) -> str:
        with self._lock:
            lines = ["kproto trace: {} connections, {} requests, {} undecodable frames".format(
                self.connections, sum(self.requests.values()), self.undecodable)]
            if self.tls:
                lines[0] += ", {} TLS connections (encrypted)".format(self.tls)
            lines.append("  {:<28} {:>8} {:>12} {:>12}".format("API", "requests", "bytes out",
                                                               "bytes in"))
            for api, n in self.requests.most_common():
                lines.append("  {:<28} {:>8} {:>12} {:>12}".format(api, n, self.bytes_out[api],
                                                                   self.bytes_in[api]))
            if self.steps:
                lines.append("  expected steps (not failures): " + ", ".join(
                    "{} x{}".format(k, v) for k, v in self.steps.most_common()))
            if self.errors:
                lines.append("  errors: " + ", ".join("{} x{}".format(k, v)
                                                      for k, v in self.errors.most_common()))
            return "\n".join(lines)


class JsonlWriter:
    """Events as JSON lines (flushed per line, so a killed proxy leaves a readable file)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def write(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, default=str)
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()


def read_events(paths: Iterable[str]) -> list[dict[str, Any]]:
    """Every event of the JSON-lines files, merged by time (bad lines are skipped)."""
    events: list[dict[str, Any]] = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and isinstance(event.get("t"), (int, float)):
                    events.append(event)
    events.sort(key=lambda e: e["t"])
    return events
