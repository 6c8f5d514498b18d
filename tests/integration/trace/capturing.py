"""tcpdump for the capture tests: a capture of loopback traffic on given ports, made while a
block runs (skips with the reason without tcpdump or the right to capture).

The librdkafka mock cluster runs in this process (ctypes), so only a capture of the ``lo``
interface with a port filter sees its traffic. tcpdump writes each packet as it comes
(``-U``); the capture is stopped (SIGINT, by pid) once :func:`read` of the file shows what
the test waits for, since tcpdump may still be writing when the clients are done.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import signal
import subprocess
import time
from typing import Callable, Iterator, Optional

import pytest

from kproto.errors import InvalidCaptureError
from kproto.tools.trace.capture import CaptureStats, read_capture
from kproto.tools.trace.report import format_line, time_key
from tests.support.signals import interruptible


def read(path: str, ports: Optional[set[int]] = None) -> tuple[list[dict], CaptureStats]:
    """Every event of a capture file, in time order, and its statistics."""
    events: list[dict] = []
    with open(path, "rb") as f:
        data = f.read()
    stats = read_capture(io.BytesIO(data), events.append, ports)
    events.sort(key=time_key)
    return events, stats


@contextlib.contextmanager
def tcpdump(path: str, ports: list[int], interface: str = "lo",
            linktype: Optional[str] = None) -> Iterator[Callable[[Callable[[list[dict]], bool]], None]]:
    """Capture TCP on ``ports`` into ``path`` while the block runs; the block gets
    ``finish(done)``: wait (at most 60 s) until ``done(events)`` holds for the file, then stop."""
    binary = shutil.which("tcpdump")
    if binary is None:
        pytest.skip("no tcpdump: install Debian's tcpdump (apt-get install tcpdump)")
    expression = "tcp and (" + " or ".join("port {}".format(p) for p in ports) + ")"
    # -B: an 8 MiB kernel buffer, so a loaded machine does not make the kernel drop packets
    # before tcpdump reads them (a capture missing a FIN never shows its connection closed).
    command = [binary, "-i", interface, "-U", "-s", "0", "-n", "-B", "8192", "-w", path]
    if linktype:
        command += ["-y", linktype]
    proc = subprocess.Popen(command + [expression], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    stopped = False

    def stop() -> str:
        nonlocal stopped
        if not stopped:
            stopped = True
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                return proc.communicate(timeout=30)[1]
            except subprocess.TimeoutExpired:
                proc.kill()
                return proc.communicate()[1]
        return ""

    try:
        said = ""
        for _ in range(5):  # "listening on lo, link-type EN10MB ..." once capturing
            line = proc.stderr.readline()
            said += line
            if not line or "listening on" in line:
                break
        if "listening on" not in said:
            message = said + stop()
            pytest.skip("tcpdump cannot capture here: " + message.strip()[-300:])

        def finish(done: Callable[[list[dict]], bool]) -> None:
            deadline = time.monotonic() + 60
            while True:
                try:
                    events, _ = read(path)
                    if done(events):
                        break
                except InvalidCaptureError:
                    events = []  # the file header is not written yet
                if time.monotonic() > deadline:
                    said = stop()  # tcpdump's counts: were packets dropped by the kernel?
                    raise AssertionError("the capture never showed what was awaited ({}):\n{}".format(
                        " ".join(said.split()), "\n".join(
                            line for line in map(format_line, events[-30:]) if line)))
                time.sleep(0.2)
            stop()

        yield finish
    finally:
        stop()


def opened_in_capture(events: list[dict]) -> set[str]:
    """The connections whose start is in the capture: the clients the test ran opened them.
    (A shared broker may hold idle connections of earlier tests' clients; a packet of one,
    such as an ACK, shows it mid-stream.)"""
    return {e["conn"] for e in events if e["kind"] == "open" and not e.get("mid_stream")}


def all_closed(events: list[dict]) -> bool:
    """Every connection opened during the capture was closed."""
    opened = opened_in_capture(events)
    closed = {e["conn"] for e in events if e["kind"] == "close"}
    return bool(opened) and opened <= closed
