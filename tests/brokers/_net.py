"""Socket helpers shared by the broker fixtures: free ports, closed ports and a readiness
probe.

The probe is a hand-built ApiVersions v0 request (the one request every Kafka broker
answers before anything else) so that readiness does not depend on kproto code that is
itself under test.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

from kproto.tools import embedded


# One home for both: kproto.tools.embedded (the CLI's demo broker) needs them too, and its probe
# is the same hand-built request, independent of kproto.messages.
free_port = embedded.free_port


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports on 127.0.0.1 that were free a moment ago (all bound at once,
    so none repeats: a broker refuses two listeners on one port)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for as long as the block runs.

    The port stays bound (never listening) until the block ends. A port merely free a
    moment ago is not safe: a broker or proxy of a test running beside may bind it
    meanwhile, and a client reconnecting to it may be handed it as its own source port
    and connect to itself; neither can take a port that is bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def api_versions_v0_probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when a Kafka broker at host:port answers ApiVersions v0 with correlation id 7."""
    return embedded.answers_api_versions(host, port, timeout)


def recv_exact(s: socket.socket, n: int) -> bytes | None:
    """Exactly ``n`` bytes from ``s``, or None if the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def wait_until(predicate, timeout: float, interval: float = 0.1) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass (sleeps between)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
