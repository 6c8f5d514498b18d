"""The sans-IO Kafka connection: framing, correlation ids and the in-flight queue.

No sockets here (the h11 model): requests go in as message objects and come out as
bytes (``pending_output`` / ``advance_output``); bytes from the peer go in
(``receive``) and come out as ``(InFlightRequest, response)`` pairs. Byte-at-a-time
feeds, partial writes and several responses in one read all work the same way. The
network client wraps one of these around each socket (Java's ``KafkaChannel`` with
``NetworkSend``/``NetworkReceive`` and ``InFlightRequests``).

Invariants:
- responses arrive in request order on a connection, so the first frame received must
  answer the oldest request in flight; anything else is a ``CorrelationIdError``;
- a protocol error of the peer (a bad frame size, a correlation id out of order, a response
  that does not decode) moves the connection to ``ProtocolState.ERROR`` (h11's ERROR
  state): it keeps the error, and every later ``receive``/``send`` raises it again instead
  of reading on from a position inside a broken stream; the shell closes it;
- a frame whose size prefix is negative or over ``receive_message_max_bytes`` is refused
  as soon as its 4-byte prefix is read, before any of it is buffered;
- after ``close()`` nothing is sent or received and every request in flight is handed
  back to be failed.
"""

from __future__ import annotations

import collections
import enum
import struct
from typing import Any

from kproto import errors
from kproto.net import wire
from kproto.net.future import Future
from kproto.protocol import headers

_SIZE = struct.Struct(">i")
#: TLS record content types (RFC 8446 5.1), as the first byte of what a TLS server sends.
_TLS_RECORD_TYPES = {20: "change_cipher_spec", 21: "alert", 22: "handshake", 23: "application_data"}


def tls_record_kind(prefix: bytes) -> str | None:
    """The record type when the 4 bytes read as a frame size are a TLS record header
    (type, version 3.0-3.4, length high byte): what a TLS listener answers a plaintext
    client (Kafka 4.4's SSL listener sends an alert). Such a "size" is over 330 MB, so
    only an oversized frame is asked about."""
    if len(prefix) == 4 and prefix[1] == 3 and prefix[2] <= 4:
        return _TLS_RECORD_TYPES.get(prefix[0])
    return None
_INT16 = struct.Struct(">h")
_API_VERSIONS_KEY = 18

DEFAULT_RECEIVE_MESSAGE_MAX_BYTES = 100 * 1024 * 1024


class ProtocolState(enum.Enum):
    OPEN = "open"
    ERROR = "error"    # the peer broke the protocol: unusable, waiting for close()
    CLOSED = "closed"


class InFlightRequest:
    """A request written (or queued to be written) and waiting for its response."""

    __slots__ = ("correlation_id", "api_key", "api_version", "request", "future",
                 "send_time_ms", "deadline_ms", "size", "response_size")

    def __init__(self, correlation_id: int, api_key: int, api_version: int, request: Any,
                 future: Future, send_time_ms: float, deadline_ms: float, size: int) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.request = request
        self.future = future
        self.send_time_ms = send_time_ms
        self.deadline_ms = deadline_ms
        self.size = size  # the request frame's bytes, size prefix included
        self.response_size = 0  # the response frame's, once it arrived

    def __repr__(self) -> str:
        return "<InFlightRequest {} v{} corr={}>".format(
            type(self.request).__name__, self.api_version, self.correlation_id)


class Connection:
    """Protocol state of one broker connection, with no I/O."""

    def __init__(self, node_id: Any = None, *, client_id: str | None = "kproto",
                 max_in_flight_requests: int = 5,
                 receive_message_max_bytes: int = DEFAULT_RECEIVE_MESSAGE_MAX_BYTES,
                 first_correlation_id: int = 0, strict: bool = False) -> None:
        if max_in_flight_requests < 1:
            raise errors.IllegalArgumentError("max_in_flight_requests must be >= 1")
        self.node_id = node_id
        self.client_id = client_id
        self.max_in_flight_requests = max_in_flight_requests
        self.receive_message_max_bytes = receive_message_max_bytes
        # Java's client ignores bytes after a response's last field, and librdkafka's mock
        # cluster sends one extra byte after flexible Metadata responses; `strict` refuses them.
        self.strict = strict
        self.closed = False
        # The protocol error that moved the connection to ERROR (raised again by every
        # later receive/send), None while it is sound.
        self.error: errors.KafkaError | None = None
        self._next_correlation_id = first_correlation_id
        self._in_flight: collections.deque[InFlightRequest] = collections.deque()
        # Outgoing frames not yet (fully) written; _out_pos is how much of the first is sent.
        self._out: collections.deque[memoryview] = collections.deque()
        self._out_requests: collections.deque[InFlightRequest] = collections.deque()  # one per frame
        self._out_pos = 0
        # Incoming frame being assembled: 4-byte size prefix, then exactly `size` bytes.
        self._prefix = bytearray()
        # The frame being received and its declared size. The buffer grows with the bytes
        # that actually arrive (bytearray growth is amortized, and large blocks are
        # extended in place by realloc), not with the size a peer declares.
        self._frame: bytearray | None = None
        self._frame_size = 0

    @property
    def state(self) -> ProtocolState:
        if self.closed:
            return ProtocolState.CLOSED
        return ProtocolState.OPEN if self.error is None else ProtocolState.ERROR

    def _raise_error(self) -> None:
        error = self.error
        assert error is not None
        # Nothing was completed this time (the first raise carried the answers before it).
        error.completed = []  # type: ignore[attr-defined]
        raise error.with_traceback(None)

    # --- sending ------------------------------------------------------------------

    def can_send_more(self) -> bool:
        return (not self.closed and self.error is None
                and len(self._in_flight) < self.max_in_flight_requests)

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    def in_flight(self) -> list[InFlightRequest]:
        return list(self._in_flight)

    def send(self, request: Any, api_version: int, *, now_ms: float = 0.0,
             timeout_ms: float = float("inf"), future: Future | None = None) -> InFlightRequest:
        """Frame ``request`` at ``api_version`` and queue its bytes; track it in flight.
        In the ERROR state, raises the protocol error that put it there."""
        if self.closed:
            raise errors.IllegalStateError("connection to node {} is closed".format(self.node_id))
        if self.error is not None:
            self._raise_error()
        if len(self._in_flight) >= self.max_in_flight_requests:
            raise errors.TooManyInFlightRequests(
                "node {} has {} requests in flight".format(self.node_id, len(self._in_flight)))
        api_key = request.api_key
        if not request.min_version <= api_version <= request.max_version:
            raise errors.UnsupportedVersionError("{} has no version {}".format(
                type(request).__name__, api_version))
        correlation_id = self._next_correlation_id
        # Correlation ids are int32 on the wire; wrap instead of overflowing.
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        header = headers.encode_request_header(
            api_key, api_version, correlation_id, self.client_id,
            headers.request_header_version(api_key, api_version))
        body = request.encode(api_version)
        size = len(header) + len(body)
        self._out.append(memoryview(_SIZE.pack(size) + header + body))
        ifr = InFlightRequest(correlation_id, api_key, api_version, request,
                              future if future is not None else Future(), now_ms,
                              now_ms + timeout_ms, size + 4)
        self._in_flight.append(ifr)
        self._out_requests.append(ifr)
        wire.trace_request(self.node_id, correlation_id, request, api_version)
        return ifr

    def pending_output(self) -> memoryview:
        """The bytes to write next (empty when everything queued has been written)."""
        if not self._out:
            return memoryview(b"")
        return self._out[0][self._out_pos:]

    def has_pending_output(self) -> bool:
        return bool(self._out)

    def advance_output(self, n: int) -> list[InFlightRequest]:
        """``n`` bytes of ``pending_output()`` were written; returns the requests whose
        frames that completed (Java's completed sends: what request metrics count)."""
        sent: list[InFlightRequest] = []
        while n > 0 and self._out:
            left = len(self._out[0]) - self._out_pos
            if n < left:
                self._out_pos += n
                return sent
            n -= left
            self._out.popleft()
            sent.append(self._out_requests.popleft())
            self._out_pos = 0
        if n > 0:
            raise errors.IllegalStateError("advanced past the queued output")
        return sent

    # --- receiving ----------------------------------------------------------------

    def receive(self, data: bytes | bytearray | memoryview) -> list[tuple[InFlightRequest, Any]]:
        """Feed bytes read from the peer; return the responses they complete, in order.

        Raises ``InvalidReceiveError`` / ``CorrelationIdError`` / ``CorruptMessageError``
        when the peer broke the protocol, and moves to the ERROR state, where every later
        call raises the same error again; the caller closes the connection. The
        exception's ``completed`` attribute holds the pairs completed by earlier frames of
        the same data, so no answered request is lost; the request whose frame failed
        stays in flight (``close()`` hands it back).
        """
        if self.closed:
            raise errors.IllegalStateError("connection to node {} is closed".format(self.node_id))
        if self.error is not None:
            self._raise_error()
        done: list[tuple[InFlightRequest, Any]] = []
        try:
            self._receive(memoryview(data).cast("B"), done)
        except errors.KafkaError as exc:
            exc.completed = done  # type: ignore[attr-defined]
            self.error = exc
            raise
        return done

    def _receive(self, view: memoryview, done: list[Any]) -> None:
        pos, end = 0, len(view)
        while pos < end:
            if self._frame is None:
                take = min(4 - len(self._prefix), end - pos)
                self._prefix += view[pos:pos + take]
                pos += take
                if len(self._prefix) < 4:
                    break
                (size,) = _SIZE.unpack(self._prefix)
                prefix = bytes(self._prefix)
                self._prefix.clear()
                if size < 4 or size > self.receive_message_max_bytes:
                    record = tls_record_kind(prefix)
                    if record is not None:
                        raise errors.SslAuthenticationError(
                            "node {} answered in TLS (a {} record, {}): it is a TLS listener; "
                            "set security_protocol to SSL or SASL_SSL".format(
                                self.node_id, record, prefix.hex(" ")))
                    raise errors.InvalidReceiveError(
                        "node {} sent a frame of {} bytes (limit {})".format(
                            self.node_id, size, self.receive_message_max_bytes))
                self._frame = bytearray()
                self._frame_size = size
            take = min(self._frame_size - len(self._frame), end - pos)
            self._frame += view[pos:pos + take]
            pos += take
            if len(self._frame) == self._frame_size:
                frame, self._frame = self._frame, None
                done.append(self._complete(frame))

    def _complete(self, frame: bytearray) -> tuple[InFlightRequest, Any]:
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        if not self._in_flight:
            raise errors.CorrelationIdError("node {} sent a response (correlation id {}) with no "
                                            "request in flight".format(self.node_id, correlation_id))
        ifr = self._in_flight[0]
        if correlation_id != ifr.correlation_id:
            raise errors.CorrelationIdError(
                "node {} answered correlation id {} but the oldest request in flight is {}".format(
                    self.node_id, correlation_id, ifr.correlation_id))
        header_version = headers.response_header_version(ifr.api_key, ifr.api_version)
        _, offset = headers.decode_response_header(memoryview(frame), header_version)
        response = decode_response(ifr.request.response_class, memoryview(frame)[offset:],
                                   ifr.api_version, strict=self.strict)
        # Only now: a frame that fails to decode leaves its request in flight to be failed.
        self._in_flight.popleft()
        ifr.response_size = len(frame) + 4
        wire.trace_response(self.node_id, correlation_id, response, ifr.api_version)
        return ifr, response

    # --- timeouts and closing -----------------------------------------------------

    def expired(self, now_ms: float) -> list[InFlightRequest]:
        """Requests in flight whose deadline has passed (they stay tracked until close)."""
        return [ifr for ifr in self._in_flight if ifr.deadline_ms <= now_ms]

    def next_deadline_ms(self) -> float:
        return min((ifr.deadline_ms for ifr in self._in_flight), default=float("inf"))

    def close(self) -> list[InFlightRequest]:
        """Stop (from OPEN or ERROR); hand back every request still in flight (the caller
        fails their futures)."""
        self.closed = True
        pending = list(self._in_flight)
        self._in_flight.clear()
        self._out.clear()
        self._out_requests.clear()
        self._out_pos = 0
        self._frame = None
        self._prefix.clear()
        return pending


def decode_response(response_class: Any, body: memoryview, api_version: int, *,
                    strict: bool = False) -> Any:
    """Decode a response body, with the ApiVersions fallbacks.

    KIP-511: a broker that does not support the ApiVersions version it was sent answers
    with a v0-format body (error UNSUPPORTED_VERSION plus the versions it does support)
    whatever version was asked for. The error code is the first field in every version,
    so peek at it before choosing. librdkafka's mock cluster writes its own layout for
    both that fallback and its flexible (v3+) answers; see ``_decode_api_versions_loose``.
    """
    allow_trailing = not strict
    if response_class.api_key != _API_VERSIONS_KEY or api_version == 0 or len(body) < 2:
        return response_class.decode(body, api_version, allow_trailing=allow_trailing)
    (error_code,) = _INT16.unpack_from(body, 0)
    version = 0 if error_code == errors.ErrorCode.UNSUPPORTED_VERSION else api_version
    try:
        return response_class.decode(body, version, allow_trailing=allow_trailing)
    except errors.CorruptMessageError as exc:
        loose = _decode_api_versions_loose(response_class, body, error_code)
        if loose is None:
            raise exc from None
        return loose


def _decode_api_versions_loose(response_class: Any, body: memoryview, error_code: int) -> Any:
    """The ApiVersions body librdkafka's mock cluster sends (measured, librdkafka 2.x).

    Error code, the array count as ONE byte, entries of three int16 (api key, min, max)
    without tagged fields, then a 4-byte throttle time: neither v0 nor v3. Only layouts
    that account for every byte are accepted, so this cannot read arbitrary garbage as
    a version table. None if the body fits no layout.
    """
    data = bytes(body)
    if len(data) < 3:
        return None
    for count in dict.fromkeys((data[2], data[2] - 1)):  # raw count, or compact N+1
        for entry_size in (6, 7):  # without or with an (empty) tagged-field byte
            rest = len(data) - 3 - count * entry_size
            if count < 0 or rest not in (0, 4, 5):
                continue
            keys = []
            for i in range(count):
                key, low, high = struct.unpack_from(">hhh", data, 3 + i * entry_size)
                keys.append(response_class.ApiVersion(api_key=key, min_version=low,
                                                      max_version=high))
            return response_class(error_code=error_code, api_keys=keys)
    return None
