"""The tracing proxy: one selector thread forwarding Kafka connections and reporting them.

Owns :class:`TraceProxy`. Clients connect to a listening port; each connection gets its
own upstream connection (TLS where ``ssl_context`` is given) and becomes a link: requests
are split into frames (:mod:`.frames`), decoded by their header (:mod:`.decode`) and
forwarded untouched; responses are matched to their request by correlation id, answers
naming brokers are rewritten to point at the proxy (:mod:`.rewrite`, one listening port per
broker address, opened on first sight), and each request/response pair is reported to the
``sink`` as one ``exchange`` event (a dict, see :mod:`.exchange`). A frame that does not decode
is forwarded as it came and reported with its reason.

Resources are bounded: bytes waiting to be written to one side are capped at
``buffer_limit``; above it the proxy stops reading the other side (TCP backpressure then
slows the sender), so a slow client cannot make the proxy buffer a fast broker's answers
without end. Frames are forwarded as ``memoryview`` slices of what was read.
"""

from __future__ import annotations

import collections
import itertools
import selectors
import socket
import ssl
import struct
import threading
import time
from typing import Any, Callable, Iterator, Optional, Sequence

from kproto.tools.trace.decode import decode_request, decode_response
from kproto.tools.trace.exchange import exchange_event
from kproto.tools.trace.frames import DEFAULT_MAX_FRAME_BYTES, FrameSplitter
from kproto.tools.trace.rewrite import ENDPOINT_FIELDS, rewrite_response
from kproto.tools.trace.summaries import TopicNames

__all__ = ["TraceProxy", "Sink", "DEFAULT_BUFFER_LIMIT"]

Sink = Callable[[dict[str, Any]], None]
DEFAULT_BUFFER_LIMIT = 4 * 1024 * 1024
_RECV_BYTES = 256 * 1024
_SIZE = struct.Struct(">i")
_PRODUCE, _METADATA = 0, 3


def _addr(host: str, port: int) -> str:
    return "{}:{}".format(host, port)


class _Side:
    """One socket of a link and the bytes waiting to be written to it."""

    __slots__ = ("sock", "out", "out_bytes", "connecting", "handshaking", "hs_want", "tls")

    def __init__(self, sock: socket.socket, connecting: bool = False, tls: bool = False) -> None:
        self.sock = sock
        self.out: collections.deque[memoryview] = collections.deque()
        self.out_bytes = 0
        self.connecting = connecting
        self.handshaking = tls
        self.hs_want = selectors.EVENT_WRITE  # what the TLS handshake waits for
        self.tls = tls

    def queue(self, data: memoryview) -> None:
        if data:
            self.out.append(data)
            self.out_bytes += len(data)


class _Link:
    """A client connection and its upstream connection."""

    def __init__(self, conn_id: str, client: _Side, upstream: _Side, client_addr: str,
                 broker: str, listen: str, max_frame_bytes: int) -> None:
        self.id = conn_id
        self.client = client
        self.upstream = upstream
        self.client_addr = client_addr
        self.broker = broker
        self.listen = listen
        self.requests = FrameSplitter(max_frame_bytes)
        self.responses = FrameSplitter(max_frame_bytes)
        self.pending: dict[int, tuple[float, Any, int]] = {}
        self.client_id: Optional[str] = None
        self.closed = False
        self.registered: dict[int, int] = {}
        # Directions whose stream stopped being Kafka framing: reported once, then passed on.
        self.unframed_reported: set[str] = set()


class TraceProxy:
    """A decoding proxy in front of ``upstream`` (the bootstrap broker).

    ``listen`` is the bootstrap listening address (port 0: any free port); brokers found in
    answers get listeners on the same host, advertised as ``advertise_host`` (default: the
    listening host). ``sink(event)`` runs on the proxy thread: keep it quick.
    """

    def __init__(self, upstream: tuple[str, int], sink: Sink, *,
                 listen: tuple[str, int] = ("127.0.0.1", 0),
                 advertise_host: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None, keep_trees: bool = False,
                 buffer_limit: int = DEFAULT_BUFFER_LIMIT,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.sink = sink
        self.ssl_context = ssl_context
        self.keep_trees = keep_trees
        self.buffer_limit = buffer_limit
        self.max_frame_bytes = max_frame_bytes
        self.listen_host = listen[0]
        self.advertise_host = advertise_host or (listen[0] if listen[0] not in ("", "0.0.0.0", "::")
                                                 else "127.0.0.1")
        self.topic_names = TopicNames()
        self.nodes: dict[str, int] = {}  # upstream "host:port" -> node id (from Metadata)
        self._sel = selectors.DefaultSelector()
        self._listeners: dict[tuple[str, int], tuple[socket.socket, int]] = {}
        self._links: list[_Link] = []
        self._ids = itertools.count(1)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._stopping = False
        self._thread: Optional[threading.Thread] = None
        self.failure: Optional[BaseException] = None
        # Events raised while an answer is handled, emitted after its exchange so that the
        # lines stay in time order (the exchange is stamped when the answer came).
        self._held: Optional[list[dict[str, Any]]] = None
        self._bootstrap_port = self._listen_for(upstream, listen[1])

    # --- public ---------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return _addr(self.advertise_host, self._bootstrap_port)

    @property
    def listeners(self) -> dict[str, str]:
        """Upstream broker address -> the proxy address clients are given for it."""
        return {_addr(*up): _addr(self.advertise_host, port)
                for up, (_, port) in self._listeners.items()}

    def buffered_bytes(self) -> int:
        """Bytes held in memory for all connections (waiting to be written, or partial frames)."""
        return sum(link.client.out_bytes + link.upstream.out_bytes + link.requests.buffered
                   + link.responses.buffered for link in list(self._links))

    def start(self) -> TraceProxy:
        self._thread = threading.Thread(target=self._run, name="kproto-trace-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> TraceProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- listeners --------------------------------------------------------------------

    def _listen_for(self, upstream: tuple[str, int], port: int = 0) -> int:
        sock = socket.create_server((self.listen_host, port))
        sock.setblocking(False)
        local = sock.getsockname()[1]
        self._listeners[upstream] = (sock, local)
        self._sel.register(sock, selectors.EVENT_READ, ("listen", upstream))
        event = {"kind": "listen", "t": time.time(), "listen": _addr(self.advertise_host, local),
                 "upstream": _addr(*upstream)}
        if self._held is not None:
            self._held.append(event)  # opened for an answer being rewritten: after its line
        else:
            self._emit(event)
        return local

    def _translate(self, host: str, port: int) -> Optional[tuple[str, int]]:
        entry = self._listeners.get((host, port))
        local = entry[1] if entry is not None else self._listen_for((host, port))
        return self.advertise_host, local

    # --- the loop -----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                ready = self._sel.select(timeout=0 if self._tls_pending() else 1.0)
                for key, mask in ready:
                    data = key.data
                    if data is None:
                        self._wake_r.recv(64)
                    elif data[0] == "listen":
                        self._accept(key.fileobj, data[1])  # type: ignore[arg-type]
                    else:
                        self._service(data[1], data[2], mask)
                for link in self._tls_readable():
                    self._service(link, link.upstream, selectors.EVENT_READ)
        except BaseException as exc:  # the proxy must not die silently
            self.failure = exc
            raise
        finally:
            for link in list(self._links):
                self._close(link, "proxy stopped")
            for sock, _ in self._listeners.values():
                sock.close()
            self._sel.close()
            self._wake_r.close()
            self._wake_w.close()

    def _tls_pending(self) -> bool:
        return any(True for _ in self._tls_readable())

    def _tls_readable(self) -> Iterator[_Link]:
        # Decrypted bytes an SSL socket already holds wake no selector: read them here.
        for link in self._links:
            up = link.upstream
            if isinstance(up.sock, ssl.SSLSocket) and not up.handshaking and not link.closed \
                    and link.client.out_bytes < self.buffer_limit and up.sock.pending():
                yield link

    def _accept(self, listener: socket.socket, upstream: tuple[str, int]) -> None:
        try:
            raw, peer = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        raw.setblocking(False)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up = socket.socket(socket.AF_INET6 if ":" in upstream[0] else socket.AF_INET)
        up.setblocking(False)
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up.connect_ex(upstream)
        tls = self.ssl_context is not None
        if tls:
            up = self.ssl_context.wrap_socket(up, server_hostname=upstream[0],  # type: ignore[union-attr]
                                              do_handshake_on_connect=False)
        link = _Link("c{}".format(next(self._ids)), _Side(raw), _Side(up, connecting=True, tls=tls),
                     _addr(peer[0], peer[1]), _addr(*upstream),
                     _addr(self.advertise_host, listener.getsockname()[1]), self.max_frame_bytes)
        self._links.append(link)
        self._emit({"kind": "open", "t": time.time(), "conn": link.id, "client": link.client_addr,
                    "listen": link.listen, "broker": link.broker})
        self._update_interest(link)

    def _update_interest(self, link: _Link) -> None:
        if link.closed:
            return
        c, u = link.client, link.upstream
        want_c = 0
        if u.out_bytes < self.buffer_limit:
            want_c |= selectors.EVENT_READ
        if c.out_bytes:
            want_c |= selectors.EVENT_WRITE
        if u.connecting:
            want_u = selectors.EVENT_WRITE
        elif u.handshaking:
            want_u = u.hs_want
        else:
            want_u = 0
            if c.out_bytes < self.buffer_limit:
                want_u |= selectors.EVENT_READ
            if u.out_bytes:
                want_u |= selectors.EVENT_WRITE
        for side, want in ((c, want_c), (u, want_u)):
            fd = side.sock.fileno()
            had = link.registered.get(fd, 0)
            if want == had:
                continue
            if had and want:
                self._sel.modify(side.sock, want, ("link", link, side))
            elif want:
                self._sel.register(side.sock, want, ("link", link, side))
            else:
                self._sel.unregister(side.sock)
            link.registered[fd] = want

    def _service(self, link: _Link, side: _Side, mask: int) -> None:
        if link.closed:
            return
        try:
            if side is link.upstream and side.connecting:
                err = side.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise ConnectionError("connecting to {}: {}".format(link.broker, err))
                side.connecting = False
            if side.handshaking:
                try:
                    side.sock.do_handshake()  # type: ignore[attr-defined]
                    side.handshaking = False
                except ssl.SSLWantReadError:
                    side.hs_want = selectors.EVENT_READ
                except ssl.SSLWantWriteError:
                    side.hs_want = selectors.EVENT_WRITE
            elif mask & selectors.EVENT_READ:
                self._read(link, side)
            if not link.closed and not side.handshaking and (mask & selectors.EVENT_WRITE or side.out):
                self._write(side)
            other = link.upstream if side is link.client else link.client
            if not link.closed and other.out and not other.connecting and not other.handshaking:
                self._write(other)
        except (OSError, ConnectionError) as exc:
            self._close(link, str(exc) or type(exc).__name__)
            return
        except Exception as exc:  # a bug in decoding must not take other connections down
            self._emit({"kind": "error", "t": time.time(), "conn": link.id,
                        "error": "{}: {}".format(type(exc).__name__, exc)})
            self._close(link, "internal error")
            return
        self._update_interest(link)

    def _read(self, link: _Link, side: _Side) -> None:
        try:
            data = side.sock.recv(_RECV_BYTES)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
            return
        if not data:
            self._close(link, "closed by " + ("client" if side is link.client else "broker"))
            return
        if side is link.client:
            for framed, view in link.requests.feed(data):
                self._on_request(link, framed, view)
        else:
            for framed, view in link.responses.feed(data):
                self._on_response(link, framed, view)

    def _write(self, side: _Side) -> None:
        while side.out:
            head = side.out[0]
            try:
                sent = side.sock.send(head)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                return
            side.out_bytes -= sent
            if sent < len(head):
                side.out[0] = head[sent:]
                return
            side.out.popleft()

    def _close(self, link: _Link, reason: str) -> None:
        if link.closed:
            return
        link.closed = True
        for side in (link.client, link.upstream):
            if side.out and not side.connecting and not side.handshaking:
                try:  # best effort: what one side sent before closing still reaches the other
                    self._write(side)
                except OSError:
                    pass
        for side in (link.client, link.upstream):
            if link.registered.get(side.sock.fileno()):
                self._sel.unregister(side.sock)
            try:
                side.sock.close()
            except OSError:
                pass
        self._links.remove(link)
        now = time.time()
        for cid, (t, req, size) in sorted(link.pending.items()):
            self._report(link, t, now, req, size, None, 0, unanswered=True)
        link.pending.clear()
        self._emit({"kind": "close", "t": now, "conn": link.id, "reason": reason})

    # --- frames -------------------------------------------------------------------------

    def _on_request(self, link: _Link, framed: bool, frame: memoryview) -> None:
        link.upstream.queue(frame)
        now = time.time()
        if not framed:
            self._unframed(link, "request", frame, link.requests.broken, now)
            return
        req = decode_request(frame)
        if req.api_key < 0 or (req.error and "unknown API key" in req.error):
            self._undecodable(link, "request", frame, req.error or "?", now)
            return
        if req.client_id is not None:
            link.client_id = req.client_id
        if req.api_key == _PRODUCE and req.message is not None and req.message.acks == 0:
            self._report(link, now, now, req, len(frame), None, 0, one_way=True)
            return
        link.pending[req.correlation_id] = (now, req, len(frame))

    def _on_response(self, link: _Link, framed: bool, frame: memoryview) -> None:
        now = time.time()
        if not framed:
            link.client.queue(frame)
            self._unframed(link, "response", frame, link.responses.broken, now)
            return
        cid = _SIZE.unpack_from(frame, 4)[0] if len(frame) >= 8 else None
        entry = link.pending.pop(cid, None) if cid is not None else None
        if entry is None:
            link.client.queue(frame)
            self._undecodable(link, "response", frame,
                              "answers no pending request (correlation id {})".format(cid), now)
            return
        t, req, req_size = entry
        resp = decode_response(frame, req.api_key, req.api_version)
        rewritten: list[tuple[str, str]] = []
        problem = None
        if resp.message is not None and req.api_key == _METADATA:
            # Before rewriting: the brokers' own addresses name the lanes.
            self.topic_names.learn(resp.message)
            for b in resp.message.brokers:
                self.nodes[_addr(b.host, b.port)] = b.node_id
        held: list[dict[str, Any]] = []
        if resp.message is not None and req.api_key in ENDPOINT_FIELDS:
            start = 4 + resp.body_offset
            self._held = held
            try:
                new_body, rewritten, problem = rewrite_response(
                    req.api_key, req.api_version, resp.message, frame[start:], self._translate)
            finally:
                self._held = None
            if new_body is not None:
                head = bytes(frame[4:start])
                frame = memoryview(_SIZE.pack(len(head) + len(new_body)) + head + new_body)
        link.client.queue(frame)
        self._report(link, t, now, req, req_size, resp, len(frame), rewritten=rewritten,
                     problem=problem)
        for event in held:
            self._emit(event)

    def _report(self, link: _Link, t: float, t_end: float, req: Any, req_size: int, resp: Any,
                resp_size: int, *, rewritten: Sequence[Any] = (), problem: Optional[str] = None,
                unanswered: bool = False, one_way: bool = False) -> None:
        self._emit(exchange_event(
            conn=link.id, client=link.client_addr, broker=link.broker, node=self._node_of(link),
            t=t, t_end=t_end, request=req, req_bytes=req_size, response=resp,
            resp_bytes=resp_size, names=self.topic_names, keep_trees=self.keep_trees,
            rewritten=rewritten, problem=problem, unanswered=unanswered, one_way=one_way))

    def _node_of(self, link: _Link) -> Optional[int]:
        return self.nodes.get(link.broker)

    def _unframed(self, link: _Link, direction: str, chunk: memoryview, reason: Optional[str],
                  now: float) -> None:
        # Once a direction is not Kafka framing, every later read is a raw chunk of the same
        # stream: report the stream once, however the socket happened to cut it.
        if direction not in link.unframed_reported:
            link.unframed_reported.add(direction)
            self._undecodable(link, direction, chunk, reason or "not framed", now)

    def _undecodable(self, link: _Link, direction: str, frame: memoryview, reason: str,
                     now: float) -> None:
        self._emit({"kind": "undecodable", "t": now, "conn": link.id, "direction": direction,
                    "client": link.client_addr, "broker": link.broker, "bytes": len(frame),
                    "head": bytes(frame[:32]).hex(), "reason": reason})

    def _emit(self, event: dict[str, Any]) -> None:
        self.sink(event)
