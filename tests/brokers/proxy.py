"""A TCP proxy on 127.0.0.1 in front of one broker: optional TLS, a request log, and a hook
that may rewrite responses.

Owns :class:`BrokerProxy`. The tests use it where the broker alone cannot show what they
need: TLS termination (the local brokers speak plaintext only), the API *version* of
each request a client sent (librdkafka's request tracking records broker, API key and
time only: its ``rd_kafka_mock_request_t`` has no version field in 2.16), and answers a
broker would not give: a subclass that sets ``rewrites_responses`` gets each whole
response frame, with the API key and version of the request it answers, in
:meth:`BrokerProxy.rewrite_response` (corrupted data:
:class:`tests.brokers.corrupting_proxy.CorruptingProxy`; an aborted-transaction index:
``tests/integration/consumer/test_read_committed.py``).

Clients must talk to the proxy's address only: the Metadata the broker returns names the
broker's own address, so a client following it leaves the proxy (use a 1-broker cluster
and the ``bootstrap-0`` node). The request log reads the client->broker byte stream:
each size-prefixed frame's header (API key, version, correlation id, client id) is
recorded in arrival order; bodies are forwarded untouched.

:meth:`BrokerProxy.redirect` sends new connections to another upstream and drops the open
ones (a load balancer switched to a new backend); a proxy closed and made again with the
same ``port`` is an address that went away and came back (the three-node cluster's
proxied listeners, :class:`tests.brokers.maven_kafka.MavenKafkaCluster`).
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from typing import NamedTuple

from tests.threads import TestThread


class RecordedRequest(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


_HEADER = struct.Struct(">ihhi")  # size, api_key, api_version, correlation_id
_SIZE = struct.Struct(">i")


class BrokerProxy:
    """Forwards connections to ``upstream``; TLS on the client side with ``ssl_context``;
    listens on ``port`` (0: one the system picks)."""

    #: Whether responses go through :meth:`rewrite_response` (framed; otherwise the bytes
    #: pass as they come).
    rewrites_responses = False

    def rewrite_response(self, frame: bytes, api_key: int, api_version: int) -> bytes:
        """A whole response frame (size prefix, header and body) on its way to the client,
        answering a request of ``api_key`` at ``api_version``: what to send instead."""
        return frame

    def __init__(self, upstream: tuple[str, int], ssl_context: ssl.SSLContext | None = None,
                 port: int = 0) -> None:
        self.upstream = upstream
        self.context = ssl_context
        # SO_REUSEADDR (create_server's default here): a port given again binds even while
        # the connections of its previous proxy linger in TIME_WAIT.
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = self.listener.getsockname()[1]
        self.handshake_errors: list[BaseException] = []
        self.accepted = 0  # connections accepted so far (counted before their TLS handshake)
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._generation = 0  # redirects (and close) so far
        self._threads = [TestThread(target=self._accept)]
        self._threads[0].start()

    @property
    def bootstrap_servers(self) -> str:
        return "127.0.0.1:{}".format(self.port)

    def requests(self) -> list[RecordedRequest]:
        """Every request header the clients sent so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self._sockets.append(raw)
            self.accepted += 1
            thread = TestThread(target=self._serve, args=(raw,))
            self._threads.append(thread)
            thread.start()

    def redirect(self, upstream: tuple[str, int]) -> None:
        """New connections go to ``upstream``; the open ones are dropped (the client sees
        them closed), so none keeps talking to the old one."""
        with self._lock:
            self.upstream = upstream
            self._generation += 1
            sockets, self._sockets = self._sockets, []
        _shut(sockets)

    def _serve(self, raw: socket.socket) -> None:
        client: socket.socket = raw
        if self.context is not None:
            try:
                raw.settimeout(10)
                client = self.context.wrap_socket(raw, server_side=True)
                client.settimeout(None)
            except (ssl.SSLError, OSError) as exc:
                self.handshake_errors.append(exc)
                raw.close()
                return
        with self._lock:
            upstream, generation = self.upstream, self._generation
        try:
            up = socket.create_connection(upstream)
        except OSError:  # the broker is down: the client sees its connection closed
            client.close()
            return
        with self._lock:
            current = generation == self._generation
            if current:
                self._sockets += [client, up]
        if not current:  # redirected meanwhile: this one is dropped too
            _shut([client, up])
            return
        # The requests of this connection awaiting their answers: correlation id ->
        # (API key, version), for rewrite_response (both pumps, under self._lock).
        asked: dict[int, tuple[int, int]] = {}
        pump = TestThread(target=self._pump, args=(up, client, asked, False))
        self._threads.append(pump)
        pump.start()
        self._pump(client, up, asked, True)

    def _pump(self, src: socket.socket, dst: socket.socket, asked: dict[int, tuple[int, int]],
              requests: bool) -> None:
        """Client to broker (``requests``: each request recorded) or broker to client
        (each response rewritten, where the class does)."""
        framed = requests or self.rewrites_responses
        pending = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not framed:
                    dst.sendall(data)
                    continue
                pending += data
                # Whole frames only: a request header, or a marker a rewrite looks for,
                # may be split across reads.
                while len(pending) >= 4 and len(pending) >= 4 + _SIZE.unpack_from(pending)[0]:
                    end = 4 + _SIZE.unpack_from(pending)[0]
                    frame, pending = pending[:end], pending[end:]
                    if requests:
                        self._record(frame, asked)
                    else:
                        frame = self._rewrite_frame(frame, asked)
                    dst.sendall(frame)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _record(self, frame: bytes, asked: dict[int, tuple[int, int]] | None = None) -> None:
        """Log a whole request frame's header (and keep its API for the answer's rewrite)."""
        if len(frame) < _HEADER.size:
            return
        size, api_key, api_version, correlation_id = _HEADER.unpack_from(frame)
        client_id = None
        if size >= 10:
            (n,) = struct.unpack_from(">h", frame, 12)
            if n >= 0 and 14 + n <= 4 + size:
                client_id = frame[14:14 + n].decode("utf-8", "replace")
        with self._lock:
            self._requests.append(RecordedRequest(api_key, api_version, correlation_id, client_id))
            if asked is not None and self.rewrites_responses:
                asked[correlation_id] = (api_key, api_version)

    def _rewrite_frame(self, frame: bytes, asked: dict[int, tuple[int, int]]) -> bytes:
        if len(frame) < 8:
            return frame
        (correlation_id,) = _SIZE.unpack_from(frame, 4)
        with self._lock:
            request = asked.pop(correlation_id, None)
        return frame if request is None else self.rewrite_response(frame, *request)

    def close(self) -> None:
        with self._lock:
            self._generation += 1  # a connection still being set up is dropped too
            sockets, self._sockets = self._sockets, []
        _shut([self.listener, *sockets])
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> BrokerProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shut(sockets: list[socket.socket]) -> None:
    # shutdown() (not just close()) wakes threads blocked in accept()/recv().
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
