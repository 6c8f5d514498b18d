"""The transition log: structured state-transition events of kproto's consumer, on the
``kproto.events`` logger.

(Named apart from the event-queue modules, ``consumer/background/events.py`` and the
engines' ``events.py``, which hold Java's application and background events; the logger
keeps its published name.)

Owns the one way consumer code reports an inner transition (member state, a partition's
fetch state, a reconciliation step, a heartbeat-thread event) so that tools can put it on a
timeline next to the wire (``python -m kproto trace render``). Each event is a log record
at DEBUG whose ``kproto_event`` attribute is a dict ``{"event": name, ...fields}`` with
plain JSON values; the message text is a readable one-liner for ordinary log handlers.

Nothing is built unless someone listens: :func:`emit` checks ``isEnabledFor`` first, so a
consumer pays one attribute lookup and one comparison per transition when events are off.
:class:`JsonlEventHandler` writes the events as JSON lines (``{"kind": "kproto", "t": unix
seconds, ...}``), the format ``trace render`` merges. Bottom layer: imports nothing of kproto.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, TextIO

__all__ = ["logger", "emit", "enabled", "JsonlEventHandler", "event_line"]

logger = logging.getLogger("kproto.events")


def enabled() -> bool:
    """Whether anyone listens (callers with costly fields check this first)."""
    return logger.isEnabledFor(logging.DEBUG)


def emit(event: str, **fields: Any) -> None:
    """Report one transition named ``event`` (e.g. ``member_state``) with its fields."""
    if not logger.isEnabledFor(logging.DEBUG):
        return
    payload = {"event": event}
    payload.update(fields)
    logger.debug("%s %s", event, " ".join("{}={}".format(k, v) for k, v in fields.items()),
                 extra={"kproto_event": payload})


def event_line(record: logging.LogRecord) -> str | None:
    """The JSON line of one ``kproto.events`` record (None for other records)."""
    payload = getattr(record, "kproto_event", None)
    if payload is None:
        return None
    line = {"kind": "kproto", "t": record.created, "thread": record.threadName}
    line.update(payload)
    return json.dumps(line, default=str)


class JsonlEventHandler(logging.Handler):
    """Writes ``kproto.events`` records as JSON lines to a file (or an open text stream).

    ``JsonlEventHandler.attach("events.jsonl")`` adds the handler and turns the logger on;
    ``detach()`` undoes both and closes the file.
    """

    def __init__(self, target: str | TextIO) -> None:
        super().__init__(logging.DEBUG)
        self._owned = isinstance(target, str)
        self._out: TextIO = open(target, "a", encoding="utf-8") if isinstance(target, str) else target
        self._write_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        line = event_line(record)
        if line is None:
            return
        with self._write_lock:
            self._out.write(line + "\n")
            self._out.flush()

    @classmethod
    def attach(cls, target: str | TextIO) -> JsonlEventHandler:
        handler = cls(target)
        handler._previous_level = logger.level  # type: ignore[attr-defined]
        logger.addHandler(handler)
        if not logger.isEnabledFor(logging.DEBUG):
            logger.setLevel(logging.DEBUG)
        return handler

    def detach(self) -> None:
        logger.removeHandler(self)
        logger.setLevel(getattr(self, "_previous_level", logging.NOTSET))
        if self._owned:
            self._out.close()
