"""A proxy that corrupts fetched data on its way to the client, as a failing disk or network
would, and a Kafka 4.4 node that sends its clients through one.

Owns :class:`CorruptingProxy`: it forwards 127.0.0.1 connections to ``upstream`` untouched
except that, in every response frame (Fetch, ShareFetch or any other), it flips the first
byte of :data:`MARKER` wherever the marker appears; a record batch holding a record with
the marker in its key or value then fails its CRC-32C in every answer that carries it, while
the broker's own copy stays intact. Uncompressed batches only (a codec hides the marker).

Clients must be sent to the proxy by the broker's own metadata: :func:`tansu_behind`
(:mod:`tests.brokers.tansu`) advertises the proxy's port, and :class:`KafkaBehind` is a
Kafka 4.4 node (:class:`~tests.brokers.maven_kafka.MavenKafka`) with a second client
listener, ``CORRUPTING``, advertised at the proxy's port (Kafka answers Metadata and
FindCoordinator with the endpoints of the listener a request came in on): a client
bootstrapped on ``proxy.bootstrap_servers`` stays behind the proxy, while ``new_topic``,
``produce`` and group settings use PLAINTEXT (``bootstrap_servers``) directly.
"""

from __future__ import annotations

import socket
import struct

from tests.brokers.maven_kafka import MavenKafka
from tests.brokers._net import free_ports
from tests.threads import TestThread

MARKER = b"corrupt-me-please"
FLIPPED = bytes([MARKER[0] ^ 0x20]) + MARKER[1:]
_SIZE = struct.Struct(">i")


class CorruptingProxy:
    """Forwards 127.0.0.1 connections to ``upstream``; flips MARKER's first byte in responses.
    ``flipped`` counts the response frames changed so far."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.flipped = 0
        self._sockets: list[socket.socket] = []
        TestThread(target=self._accept).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            try:
                up = socket.create_connection(self.upstream)  # type: ignore[arg-type]
            except OSError:
                client.close()
                continue
            self._sockets += [client, up]
            TestThread(target=self._pump, args=(client, up, False)).start()
            TestThread(target=self._pump, args=(up, client, True)).start()

    def _pump(self, src: socket.socket, dst: socket.socket, responses: bool) -> None:
        buf = b""
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if not responses:
                    dst.sendall(data)
                    continue
                buf += data
                # Whole response frames only, so a marker split across reads is still found.
                while len(buf) >= 4 and len(buf) >= 4 + _SIZE.unpack_from(buf)[0]:
                    end = 4 + _SIZE.unpack_from(buf)[0]
                    frame, buf = buf[:end], buf[end:]
                    if MARKER in frame:
                        frame = frame.replace(MARKER, FLIPPED)
                        self.flipped += 1
                    dst.sendall(frame)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @property
    def bootstrap_servers(self) -> str:
        return "127.0.0.1:{}".format(self.port)

    def close(self) -> None:
        self.listener.close()
        for s in self._sockets:
            s.close()


class KafkaBehind(MavenKafka):
    """Kafka 4.4 (one node) whose ``CORRUPTING`` listener is advertised at ``proxy``'s port;
    ``proxy.upstream`` is pointed at that listener. Closing it closes the proxy too."""

    def __init__(self, proxy: CorruptingProxy) -> None:
        self.proxy = proxy
        super().__init__()

    def _more_settings(self, controller_port: int) -> dict[str, str]:
        # Ports free a moment ago may repeat (Kafka refuses two listeners on one port).
        port = next(p for p in free_ports(3) if p not in (self.port, controller_port))
        self.proxy.upstream = ("127.0.0.1", port)
        return {
            "listeners": "PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{},CORRUPTING://127.0.0.1:{}".format(
                self.port, controller_port, port),
            "advertised.listeners": "PLAINTEXT://127.0.0.1:{},CORRUPTING://127.0.0.1:{}".format(
                self.port, self.proxy.port),
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CORRUPTING:PLAINTEXT",
        }

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.proxy.close()
