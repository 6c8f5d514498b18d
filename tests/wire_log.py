"""What kproto sent and received, read from its own wire trace (``kproto.wire``).

Owns :class:`WireLog`: a logging handler that keeps every request and response the
process's kproto clients exchanged while it is active, as :class:`WireEntry` (direction,
node, API message name, version, the decoded field tree, correlation id and the logging
thread). A test asserts the versions on the wire and the fields sent and answered with it
where a proxy cannot stand between client and broker (a client follows the broker's
advertised address after bootstrap); :meth:`WireLog.pairs` matches each request with its
answer. The thread tells the clients of one test apart (each KIP-848 or share consumer
has its own network thread; run classic consumers on threads of their own).
Only for tests: DEBUG formatting of every message costs time.
"""

from __future__ import annotations

import ast
import logging
import re
import threading
from typing import Any, NamedTuple

_WIRE = logging.getLogger("kproto.wire")
# Enum fields (IsolationLevel, ...) print as <Name.MEMBER: 0>: read their values.
_ENUM = re.compile(r"<[A-Za-z_][\w.]*: (-?\d+)>")


class WireEntry(NamedTuple):
    direction: str  # ">>" sent, "<<" received
    node: Any
    api: str  # the message class name, e.g. "ShareFetchRequest"
    version: int
    tree: Any  # the message's fields (bytes shown as "<n bytes...>")
    correlation_id: int = -1
    thread: int = 0  # ident of the thread that logged it

    @property
    def api_name(self) -> str:
        """The API without Request/Response ("Fetch"; the classic group's lenient
        JoinGroup/SyncGroup classes count as their API)."""
        name = self.api.removeprefix("Lenient")
        for suffix in ("Request", "Response"):
            if name.endswith(suffix):
                return name[:-len(suffix)]
        return name


class WireLog(logging.Handler):
    """``with WireLog() as wire: ...``: ``wire.sent(api)`` / ``wire.received(api)`` list
    the entries for one message name (without the Request/Response suffix)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._entries: list[WireEntry] = []
        self._entries_lock = threading.Lock()
        self._saved: tuple[int, bool] = (logging.NOTSET, True)

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return
        node, api, version, correlation_id, tree = args
        entry = WireEntry(str(record.msg)[:2], node, api, version,
                          ast.literal_eval(_ENUM.sub(r"\1", str(tree))), correlation_id,
                          record.thread or 0)
        with self._entries_lock:
            self._entries.append(entry)

    def entries(self) -> list[WireEntry]:
        with self._entries_lock:
            return list(self._entries)

    def sent(self, api: str) -> list[WireEntry]:
        return [e for e in self.entries() if e.direction == ">>" and e.api == api + "Request"]

    def received(self, api: str) -> list[WireEntry]:
        return [e for e in self.entries() if e.direction == "<<" and e.api == api + "Response"]

    def pairs(self, api: str, thread: int | None = None) -> list[tuple[WireEntry, WireEntry]]:
        """(request, response) of ``api`` ("Fetch"), matched by node and correlation id, in
        the order the responses came: one client's (give its ``thread`` when several
        clients ran: their correlation ids repeat)."""
        pending: dict[tuple[str, int], WireEntry] = {}
        out = []
        for e in self.entries():
            if e.api_name != api or (thread is not None and e.thread != thread):
                continue
            key = (str(e.node), e.correlation_id)
            if e.direction == ">>":
                pending[key] = e
            elif key in pending:
                out.append((pending.pop(key), e))
        return out

    def versions(self, api: str) -> set[int]:
        """The versions of every ``api`` request sent."""
        return {e.version for e in self.sent(api)}

    def __enter__(self) -> "WireLog":
        self._saved = (_WIRE.level, _WIRE.propagate)
        _WIRE.setLevel(logging.DEBUG)
        _WIRE.propagate = False  # the trees are large: keep them out of pytest's captured log
        _WIRE.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _WIRE.removeHandler(self)
        _WIRE.setLevel(self._saved[0])
        _WIRE.propagate = self._saved[1]
