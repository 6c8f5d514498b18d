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

from tests.brokers._net import free_ports
from tests.brokers.maven_kafka import MavenKafka
from tests.brokers.proxy import BrokerProxy

MARKER = b"corrupt-me-please"
FLIPPED = bytes([MARKER[0] ^ 0x20]) + MARKER[1:]


class CorruptingProxy(BrokerProxy):
    """Forwards 127.0.0.1 connections to ``upstream`` (set once the broker runs); flips
    MARKER's first byte in responses. ``flipped`` counts the response frames changed so
    far."""

    rewrites_responses = True

    def __init__(self) -> None:
        self.flipped = 0
        super().__init__(("127.0.0.1", 0))  # the upstream is set by tansu_behind / KafkaBehind

    def rewrite_response(self, frame: bytes, api_key: int, api_version: int) -> bytes:
        if MARKER not in frame:
            return frame
        self.flipped += 1
        return frame.replace(MARKER, FLIPPED)


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
