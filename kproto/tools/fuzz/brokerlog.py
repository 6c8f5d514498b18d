"""The broker's own log as an oracle: ``--broker-log FILE``.

Owns following a log file as it grows (from its end at the start of the run; again from
the top when it is truncated or replaced, as log rotation does), cutting it into entries
(a first line and the lines that continue it: a Java stack trace, ``Caused by:``,
``... N more``), and judging an entry: ERROR or FATAL, or a WARN that carries a stack
trace, is worth a finding. An entry's signature is what stays the same when the same bug
is hit again: the logger, the message up to its first variable part, the root cause's
exception class and the first stack frame, numbers masked. Which request an entry belongs
to is the runner's business (the one in flight when it appeared).

The log format is the broker's choice: the level is found as a word near the start of the
first line (log4j's ``[%d] %p %m (%c)%n`` in Kafka's default configuration, and most
others), the logger as a trailing ``(name)`` when there is one.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

LEVELS = ("FATAL", "ERROR", "WARN", "WARNING", "SEVERE", "INFO", "DEBUG", "TRACE")
_LEVEL = re.compile(r"\b(FATAL|ERROR|WARN|WARNING|SEVERE|INFO|DEBUG|TRACE)\b")
_CONTINUATION = re.compile(r"^(\s|Caused by:|Suppressed:|\.\.\. \d+ (more|common)|"
                           r"[\w$]+(\.[\w$]+)+(Exception|Error|Throwable)\b)")
_EXCEPTION = re.compile(r"^(?:Caused by: |Suppressed: )?([\w$]+(?:\.[\w$]+)+"
                        r"(?:Exception|Error|Throwable))\b")
_FRAME = re.compile(r"^\s+at ([\w$.<>/]+)\(")
_PREFIX = re.compile(r"^\s*(\[[^\]]*\]\s*|\d{4}-\d\d-\d\d[T ][\d:.,]+\s*)")
_LOGGER = re.compile(r"\s*\(([\w$.]+)\)\s*$")
_NUMBERS = re.compile(r"\d+")
# topic ids (22 base64 characters, a digit among them: NotControllerException is 22
# letters too)
_IDS = re.compile(r"(?<![\w.$-])(?=[A-Za-z_-]*\d)[A-Za-z0-9_-]{22}(?![\w-])")
REFUSALS = ("InvalidRequestException", "UnsupportedVersionException",
            "InvalidReceiveException")
MAX_TEXT = 8192
LOG_SETTLE = 0.05  # seconds to wait for the broker's log line after an odd exchange


def _head(message: str, words: int = 12) -> str:
    """A message up to its first variable part (a quote, bracket, colon or parenthesis, or
    a word that is not all letters: a number, an address, a group id), at most ``words``
    words (names follow the words that say what went wrong)."""
    head = re.split(r"[(:{\['\"]", message, maxsplit=1)[0]
    out = []
    for word in head.split()[:words]:
        if not word.rstrip(".,;").isalpha():
            break
        out.append(word)
    return " ".join(out)


@dataclass
class LogEntry:
    level: str
    first_line: str
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)[:MAX_TEXT]

    @property
    def logger(self) -> str:
        m = _LOGGER.search(self.first_line)
        return m.group(1) if m else ""

    @property
    def exceptions(self) -> list[str]:
        """The exception classes of the entry, outermost first (a cause after its effect)."""
        out = []
        for line in self.lines[1:]:
            m = _EXCEPTION.match(line.strip())
            if m:
                out.append(m.group(1))
        return out

    @property
    def has_stack(self) -> bool:
        return any(_FRAME.match(line) for line in self.lines[1:])

    @property
    def message(self) -> str:
        """The first line without its time, level, bracketed context and logger."""
        line = self.first_line
        while True:
            m = _PREFIX.match(line)
            if not m or not m.group(0):
                break
            line = line[m.end():]
        line = line.lstrip()
        if line.startswith(self.level):
            line = line[len(self.level):].lstrip(" :-")
        while True:
            m = _PREFIX.match(line)
            if not m or not m.group(0):
                break
            line = line[m.end():]
        return _LOGGER.sub("", line.lstrip(" :-"))

    @property
    def signature(self) -> str:
        head = _head(self.message)
        sig = "{}: {}".format(self.logger, head) if self.logger else head
        exceptions = self.exceptions
        if exceptions:
            sig += " | " + exceptions[-1]  # the root cause
            frame = self._first_frame_of_root()
            if frame:
                sig += " at " + frame
            else:  # Kafka's ApiExceptions have no stack: the message tells them apart
                sig += ": " + _head(self._root_message(), 3)
        return _NUMBERS.sub("N", _IDS.sub("ID", sig))

    def _root_message(self) -> str:
        for line in reversed(self.lines[1:]):
            m = _EXCEPTION.match(line.strip())
            if m:
                return line.strip()[m.end():].lstrip(": ")
        return ""

    def _first_frame_of_root(self) -> str:
        frame = ""
        in_root = False
        for line in self.lines[1:]:
            if _EXCEPTION.match(line.strip()):
                in_root, frame = True, ""
                continue
            m = _FRAME.match(line)
            if m and in_root and not frame:
                frame = m.group(1)
        return frame

    @property
    def worth_a_finding(self) -> bool:
        return self.level in ("FATAL", "ERROR", "SEVERE") or (
            self.level in ("WARN", "WARNING") and self.has_stack)

    def is_refusal_of_malformed_request(self) -> bool:
        """Kafka's socket layer refusing a frame or request it cannot parse (logged at
        ERROR or WARN with the parser's exception, then the connection closed): the clean
        answer to a malformed request, not a finding when the request was malformed."""
        return self.logger in ("kafka.network.Processor",
                               "org.apache.kafka.common.network.Selector") and \
            any(name.endswith(refusal) for name in self.exceptions[:1] for refusal in REFUSALS)


def entries(lines: Iterable[str]) -> list[LogEntry]:
    """Cut log lines into entries (a line that does not continue the one before starts
    one); the level is the first level word of the entry's first line."""
    out: list[LogEntry] = []
    for line in lines:
        line = line.rstrip("\n")
        if out and (_CONTINUATION.match(line) or not line.strip()):
            out[-1].lines.append(line)
            continue
        m = _LEVEL.search(line[:80])
        out.append(LogEntry(m.group(1) if m else "", line, [line]))
    return out


class BrokerLog:
    """A log file followed from its current end; ``poll`` returns the entries written
    since the last call (log4j writes an event, stack trace included, in one write)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._inode: Optional[int] = None
        self._pos = 0
        self._partial = ""
        try:
            st = os.stat(self.path)
            self._inode, self._pos = st.st_ino, st.st_size
        except OSError:
            pass  # not there yet: read it from the top once it is

    def _read(self) -> list[str]:
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        if st.st_ino != self._inode or st.st_size < self._pos:
            self._inode, self._pos, self._partial = st.st_ino, 0, ""  # rotated or truncated
        if st.st_size == self._pos:
            return []
        with open(self.path, "rb") as f:
            f.seek(self._pos)
            data = f.read(st.st_size - self._pos)
        self._pos += len(data)
        lines = (self._partial + data.decode("utf-8", "replace")).split("\n")
        self._partial = lines.pop()  # a line still being written
        return lines

    def poll(self, wait: float = 0.0) -> list[LogEntry]:
        """The entries written since the last call; with ``wait``, those written within
        that many seconds too (a broker may log just after it answered)."""
        lines = self._read()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            time.sleep(0.02)
            more = self._read()
            if lines and not more:
                break  # it wrote, then stopped: the entry is complete
            lines += more
        return entries(lines)


__all__ = ["BrokerLog", "LogEntry", "entries", "LEVELS", "REFUSALS"]
