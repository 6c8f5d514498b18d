"""Socket helpers shared by the broker fixtures: free ports and a readiness probe.

The probe is a hand-built ApiVersions v0 request (the one request every Kafka broker
answers before anything else) so that readiness does not depend on kproto code that is
itself under test.
"""

from __future__ import annotations

import socket
import struct
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the caller retries on a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_versions_v0_probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when a Kafka broker at host:port answers ApiVersions v0 with correlation id 7."""
    client_id = b"kproto-probe"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exact(s, 8)
            if head is None:
                return False
            size, correlation_id = struct.unpack(">ii", head)
            return correlation_id == 7 and 2 <= size < 1 << 20
    except OSError:
        return False


def _recv_exact(s: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def wait_until(predicate, timeout: float, interval: float = 0.1) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass (sleeps between)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
