"""What the Kafka 4.4 tests read back from ``kproto.wire``: every request and response the
client encoded and decoded, as parsed field trees.

Owns :class:`WireLog`, a logging handler on the ``kproto.wire`` logger
(:mod:`kproto.net.wire`) kept for the length of a ``with`` block. Each log line's tree is
``pprint`` output of plain values, so :func:`ast.literal_eval` reads it back; an
:class:`Exchange` names the thread that logged it, which tells the consumers of one test
apart (each KIP-848 consumer has its own network thread; a test runs each classic
consumer on a thread of its own).
"""

from __future__ import annotations

import ast
import logging
import re
import threading
from typing import Any, NamedTuple


_ENUM = re.compile(r"<[A-Za-z_][\w.]*: (-?\d+)>")


class Exchange(NamedTuple):
    direction: str  # ">>" request, "<<" response
    node: str
    name: str  # "FetchRequest", "FetchResponse", ...
    version: int
    correlation_id: int
    thread: int  # ident of the logging thread
    text: str

    @property
    def api(self) -> str:
        """The API's name without Request/Response ("Fetch"; the classic group's lenient
        JoinGroup/SyncGroup classes count as their API)."""
        name = self.name.removeprefix("Lenient")
        for suffix in ("Request", "Response"):
            if name.endswith(suffix):
                return name[:-len(suffix)]
        return name

    def tree(self) -> Any:
        # Enum fields (IsolationLevel, ...) print as <Name.MEMBER: 0>: read their values.
        return ast.literal_eval(_ENUM.sub(r"\1", self.text))


class WireLog(logging.Handler):
    """``with WireLog() as wire:`` records every exchange logged meanwhile."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._lock_ = threading.Lock()
        self._exchanges: list[Exchange] = []
        self._logger = logging.getLogger("kproto.wire")
        self._level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return
        node, name, version, correlation_id, text = args
        direction = str(record.msg)[:2]
        with self._lock_:
            self._exchanges.append(Exchange(direction, str(node), str(name), int(version),  # type: ignore[call-overload]
                                            int(correlation_id), record.thread or 0, str(text)))  # type: ignore[call-overload]

    def __enter__(self) -> "WireLog":
        self._level = self._logger.level
        self._logger.setLevel(logging.DEBUG)
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)

    def exchanges(self, name: str | None = None, thread: int | None = None) -> list[Exchange]:
        """What was logged so far, in order; only ``name`` ("FetchRequest") and only one
        thread's when given."""
        with self._lock_:
            out = list(self._exchanges)
        return [e for e in out if (name is None or e.name == name)
                and (thread is None or e.thread == thread)]

    def requests(self) -> list[Exchange]:
        return [e for e in self.exchanges() if e.direction == ">>"]

    def pairs(self, api: str, thread: int | None = None) -> list[tuple[Exchange, Exchange]]:
        """(request, response) of ``api`` ("Fetch"), matched by node and correlation id, in
        the order the responses came: one client's (give its ``thread`` when several
        clients ran: their correlation ids repeat)."""
        pending: dict[tuple[str, int], Exchange] = {}
        out = []
        for e in self.exchanges(thread=thread):
            if e.api != api:
                continue
            key = (e.node, e.correlation_id)
            if e.direction == ">>":
                pending[key] = e
            elif key in pending:
                out.append((pending.pop(key), e))
        return out
