"""What kproto sent and received, read from its own wire trace (``kproto.wire``).

Owns :class:`WireLog`: a logging handler that keeps every request and response the
process's kproto clients exchanged while it is active, as :class:`WireEntry` (direction,
node, API message name, version, the decoded field tree). A test asserts the versions on
the wire and the fields sent and answered with it where a proxy cannot stand between
client and broker (a client follows the broker's advertised address after bootstrap).
Only for tests: DEBUG formatting of every message costs time.
"""

from __future__ import annotations

import ast
import logging
import threading
from typing import Any, NamedTuple

_WIRE = logging.getLogger("kproto.wire")


class WireEntry(NamedTuple):
    direction: str  # ">>" sent, "<<" received
    node: Any
    api: str  # the message class name, e.g. "ShareFetchRequest"
    version: int
    tree: Any  # the message's fields (bytes shown as "<n bytes...>")


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
        node, api, version, _, tree = args
        entry = WireEntry(str(record.msg)[:2], node, api, version, ast.literal_eval(tree))
        with self._entries_lock:
            self._entries.append(entry)

    def entries(self) -> list[WireEntry]:
        with self._entries_lock:
            return list(self._entries)

    def sent(self, api: str) -> list[WireEntry]:
        return [e for e in self.entries() if e.direction == ">>" and e.api == api + "Request"]

    def received(self, api: str) -> list[WireEntry]:
        return [e for e in self.entries() if e.direction == "<<" and e.api == api + "Response"]

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
