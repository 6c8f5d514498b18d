"""Kafka conversations in a packet capture: the same events the proxy reports, from a file.

Owns :class:`CaptureDecoder` (sans-IO: reassembled TCP stream events in, trace events out)
and :func:`read_capture` (a capture file through :mod:`.pcap`, :mod:`.packets` and
:mod:`.tcp_reassembly` into the decoder). Per connection:

- **Who is the broker.** The endpoint on a port given in ``broker_ports``; else one already
  known as a broker (an earlier connection, or a Metadata answer's broker list); else the
  side that received the SYN, confirmed by its peer's first frame decoding as a request;
  for a connection whose start was not captured, the side whose bytes first decode as a
  request is the client (bytes are held, up to ``max_undecided`` per side, until one does).
- **Frames.** Requests are split by their size prefix and decoded (:mod:`.decode`);
  responses are matched to their request by correlation id and decoded by its API and
  version. An exchange is reported when its answer is complete, stamped with the time of
  the packets that completed the request and the response.
- **Resynchronising.** A stream whose start was not captured, that lost bytes to the
  capture (a ``gap``), or that read a size prefix no Kafka frame has, searches for the next
  offset where a whole frame decodes: for requests, a known API key and version whose
  header and body decode; for responses, the correlation id of a pending request whose
  body decodes. The bytes skipped are reported once (``skipped`` event).
- **TLS.** A stream starting with a TLS record header is reported once as encrypted.

Events: ``open`` / ``close`` / ``exchange`` (:func:`~.exchange.exchange_event`) /
``undecodable`` (``tls: true`` for TLS) / ``skipped``. ``stats`` counts what the capture
held beyond them (packets that are not TCP, retransmissions, out-of-order segments, bytes
the capture lost, connections that carried no Kafka).
"""

from __future__ import annotations

import collections
import re
import struct
from typing import Any, BinaryIO, Callable, Optional

from kproto import messages
from kproto.protocol.headers import decode_request_header, request_header_version
from kproto.tools.trace.decode import DecodedRequest, decode_request, decode_response
from kproto.tools.trace.exchange import exchange_event
from kproto.tools.trace.frames import DEFAULT_MAX_FRAME_BYTES
from kproto.tools.trace.packets import tcp_segment
from kproto.tools.trace.pcap import CaptureReader
from kproto.tools.trace.summaries import TopicNames
from kproto.tools.trace.tcp_reassembly import Connection, ConnectionTable, StreamEvent

__all__ = ["CaptureDecoder", "read_capture", "CaptureStats"]

Sink = Callable[[dict[str, Any]], None]
_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_PRODUCE, _METADATA = 0, 3
DEFAULT_MAX_UNDECIDED = 1024 * 1024
# Where a request may start: a size prefix from 8 (a header) to 128 MiB, then an API key
# below 256 and a version below 64 (the regex engine skips runs of zeros, not Python).
_REQUEST_START = re.compile(
    rb"(?=(?:[\x01-\x07]...|\x00[\x01-\xff]..|\x00\x00[\x01-\xff].|\x00\x00\x00[\x08-\xff])"
    rb"\x00.\x00[\x00-\x3f])", re.S)


def _is_tls(data: bytes) -> bool:
    # A TLS record: content type 20-23, protocol major version 3, minor 0-4.
    return len(data) >= 3 and 20 <= data[0] <= 23 and data[1] == 3 and data[2] <= 4


def _port(endpoint: str) -> int:
    return int(endpoint.rpartition(":")[2])


def _addr(host: str, port: int) -> str:
    return "[{}]:{}".format(host, port) if ":" in host else "{}:{}".format(host, port)


class CaptureStats:
    """What the capture held besides the Kafka conversations."""

    def __init__(self) -> None:
        self.packets = 0
        self.skipped_packets: collections.Counter[str] = collections.Counter()
        self.retransmitted = 0
        self.out_of_order = 0
        self.lost_bytes = 0
        self.not_kafka = 0
        self.truncated: Optional[str] = None

    def text(self) -> str:
        parts = ["{} packets".format(self.packets)]
        if self.skipped_packets:
            parts.append("not TCP segments: " + ", ".join(
                "{} x{}".format(k, v) for k, v in self.skipped_packets.most_common()))
        parts.append("{} retransmitted and {} out-of-order segments".format(
            self.retransmitted, self.out_of_order))
        if self.lost_bytes:
            parts.append("{} bytes missing from the capture".format(self.lost_bytes))
        if self.not_kafka:
            parts.append("{} connections carried no Kafka".format(self.not_kafka))
        text = "kproto trace: capture of " + "; ".join(parts)
        if self.truncated:
            text += "\nkproto trace: the capture is cut short: " + self.truncated
        return text


class _Stream:
    """One direction's bytes on their way to frames; ``synced``: at a frame boundary."""

    __slots__ = ("buffer", "synced", "skipped", "why", "pieces", "t")

    def __init__(self, synced: bool) -> None:
        self.buffer = bytearray()
        self.synced = synced
        self.skipped = 0  # bytes dropped while searching for a frame
        self.why = "the capture starts mid-stream"
        self.pieces: list[tuple[float, bytes, int]] = []  # held while the roles are unknown
        self.t = 0.0


class _Conv:
    """A connection as a Kafka conversation."""

    def __init__(self, conn: Connection, number: int) -> None:
        self.conn = conn
        self.id = "c{}".format(number)
        self.client: Optional[str] = None
        self.broker: Optional[str] = None
        self.opened_at = 0.0
        self.streams = {conn.a: _Stream(conn.syn_seen), conn.b: _Stream(conn.syn_seen)}
        self.pending: dict[int, tuple[float, DecodedRequest, int]] = {}
        self.ignored = False  # TLS, or no Kafka in it
        self.requests_seen = False


class CaptureDecoder:
    """Reassembled streams of a capture in, trace events out (see the module docstring)."""

    def __init__(self, sink: Sink, broker_ports: Optional[set[int]] = None,
                 keep_trees: bool = False, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 max_undecided: int = DEFAULT_MAX_UNDECIDED) -> None:
        self.sink = sink
        self.broker_ports = broker_ports or set()
        self.keep_trees = keep_trees
        self.max_frame_bytes = max_frame_bytes
        self.max_undecided = max_undecided
        self.stats = CaptureStats()
        self.topic_names = TopicNames()
        self.brokers: set[str] = set()  # endpoints known to be brokers
        self.nodes: dict[str, int] = {}  # "host:port" -> node id (from Metadata answers)
        self._convs: dict[int, _Conv] = {}
        self._numbers = 0
        # Exchanges before the Metadata answer that named their broker's node id.
        self._nodeless: list[dict[str, Any]] = []

    # --- stream events -------------------------------------------------------------------

    def feed(self, ev: StreamEvent) -> None:
        conv = self._convs.get(id(ev.conn))
        if ev.kind == "open":
            self._numbers += 1
            conv = self._convs[id(ev.conn)] = _Conv(ev.conn, self._numbers)
            conv.opened_at = ev.t
            self._decide_by_ports(conv)
            return
        if conv is None or conv.ignored:
            if ev.kind == "close":
                self._convs.pop(id(ev.conn), None)
            return
        if ev.kind == "close":
            why = ev.reason
            if why in ("closed by", "reset by"):
                why += " " + self._side(conv, ev.src)
            self._close(conv, ev.t, why)
            return
        stream = conv.streams[ev.src]
        if ev.kind == "gap":
            self.stats.lost_bytes += ev.gap
            if conv.broker is None:
                stream.pieces.append((ev.t, b"", ev.gap))
            else:
                self._lose_sync(stream, "the capture lost {} bytes".format(ev.gap))
            return
        if conv.broker is None:
            if not stream.pieces and not stream.buffer and _is_tls(ev.data):
                self._tls(conv, ev.t, ev.src)
                return
            stream.pieces.append((ev.t, ev.data, 0))
            self._decide_by_requests(conv)
            return
        self._data(conv, ev.src, ev.t, ev.data)

    def finish(self, t: float) -> None:
        """The capture ended: report what is still open (unanswered requests included)."""
        for conv in list(self._convs.values()):
            if not conv.ignored:
                self._close(conv, t, None)
        # A whole capture is read before it is shown: node ids learnt later name them too.
        for event in self._nodeless:
            event["node"] = self._node(event["broker"])

    # --- roles ---------------------------------------------------------------------------

    def _decide_by_ports(self, conv: _Conv) -> None:
        a, b = conv.conn.a, conv.conn.b
        if self.broker_ports:
            if _port(b) in self.broker_ports:
                self._roles(conv, a, b)
            elif _port(a) in self.broker_ports:
                self._roles(conv, b, a)
            else:
                conv.ignored = True  # the user named the brokers: this is other traffic
        elif b in self.brokers or (conv.conn.syn_seen and a not in self.brokers):
            self._roles(conv, a, b)
        elif a in self.brokers:
            self._roles(conv, b, a)

    def _decide_by_requests(self, conv: _Conv) -> None:
        for side in (conv.conn.a, conv.conn.b):
            stream = conv.streams[side]
            data = b"".join(piece for _, piece, _ in stream.pieces)
            found = self._find_request(memoryview(data))
            if found is not None and found[1]:
                self._roles(conv, side, conv.conn.peer(side))
                return
        if all(sum(len(p) for _, p, _ in s.pieces) > self.max_undecided
               for s in conv.streams.values()):
            self.stats.not_kafka += 1
            conv.ignored = True

    def _roles(self, conv: _Conv, client: str, broker: str) -> None:
        conv.client, conv.broker = client, broker
        self.sink({"kind": "open", "t": conv.opened_at, "conn": conv.id, "client": client,
                   "broker": broker, "mid_stream": not conv.conn.syn_seen})
        # Requests first: a held response can only be matched to a request already read.
        for side in (client, broker):
            stream = conv.streams[side]
            pieces, stream.pieces = stream.pieces, []
            for t, data, gap in pieces:
                if conv.ignored:
                    return
                if gap:
                    self._lose_sync(stream, "the capture lost {} bytes".format(gap))
                elif data:
                    self._data(conv, side, t, data)

    def _side(self, conv: _Conv, endpoint: str) -> str:
        return "client" if endpoint == conv.client else "broker" if endpoint == conv.broker \
            else endpoint

    # --- frames --------------------------------------------------------------------------

    def _data(self, conv: _Conv, src: str, t: float, data: bytes) -> None:
        stream = conv.streams[src]
        requests = src == conv.client
        if stream.synced and not stream.buffer and stream.skipped == 0 and not conv.requests_seen \
                and requests and _is_tls(data):
            self._tls(conv, t, src)
            return
        stream.buffer += data
        stream.t = t
        while not conv.ignored:
            if not stream.synced and not self._resync(conv, stream, requests):
                return
            if len(stream.buffer) < 4:
                return
            (size,) = _SIZE.unpack_from(stream.buffer, 0)
            # Too short for a request header (8 bytes) or a correlation id: no frame either.
            if size < (8 if requests else 4) or size > self.max_frame_bytes:
                if requests and not conv.requests_seen:
                    self._not_kafka(conv, t, "the first request's size prefix is {}".format(size))
                    return
                self._undecodable(conv, t, "request" if requests else "response",
                                  bytes(stream.buffer[:32]), len(stream.buffer),
                                  "size prefix {} is not a Kafka frame".format(size))
                # Search again from the next byte: a frame may start inside these.
                stream.synced, stream.why = False, "after a size prefix no Kafka frame has"
                stream.skipped += 1
                del stream.buffer[:1]
                continue
            if len(stream.buffer) < 4 + size:
                return
            frame = memoryview(bytes(stream.buffer[:4 + size]))
            del stream.buffer[:4 + size]
            if requests:
                self._request(conv, t, frame)
            else:
                self._response(conv, t, frame)

    def _lose_sync(self, stream: _Stream, why: str) -> None:
        """Bytes are missing: what is buffered cannot be completed, search after the gap."""
        if stream.synced or stream.buffer:
            stream.why = why
        stream.synced = False
        stream.skipped += len(stream.buffer)
        stream.buffer.clear()

    def _resync(self, conv: _Conv, stream: _Stream, requests: bool) -> bool:
        """Drop bytes up to the next frame that decodes; False: wait for more bytes."""
        view = memoryview(bytes(stream.buffer))
        found = self._find_request(view) if requests else self._find_response(conv, view)
        if found is None:
            # Keep a possible frame start: at most a frame header's worth at the end.
            keep = min(len(view), 11) if requests else 0
            drop = len(view) - keep
            stream.skipped += drop
            del stream.buffer[:drop]
            return False
        at, complete = found
        stream.skipped += at
        del stream.buffer[:at]
        if not complete:
            return False
        stream.synced = True
        if stream.skipped:
            self.sink({"kind": "skipped", "t": stream.t, "conn": conv.id,
                       "direction": "request" if requests else "response",
                       "bytes": stream.skipped, "reason": stream.why})
            stream.skipped = 0
        return True

    def _find_request(self, view: memoryview) -> Optional[tuple[int, bool]]:
        """Where a request starts: ``(offset, True)`` for the first whole frame that
        decodes, else ``(offset, False)`` for the first that may, once more bytes came."""
        waiting: Optional[int] = None
        for match in _REQUEST_START.finditer(view):
            at = match.start()
            if len(view) - at < 12:
                return (waiting if waiting is not None else at), False
            size, api_key, version, correlation_id = _HEAD.unpack_from(view, at)
            if size < 8 or size > self.max_frame_bytes or correlation_id < 0:
                continue
            entry = messages.API_KEYS.get(api_key)
            if entry is None:
                continue
            cls: Any = entry[0]
            if not cls._first_version <= version < cls._first_version + len(cls._decoders):
                continue
            end = at + 4 + size
            if end > len(view):
                # Worth waiting for if its header decodes and it is not too big to hold
                # while the stream is not in step (a real big frame is lost then; the next
                # frame resynchronises).
                if waiting is None and size <= self.max_undecided:
                    try:
                        decode_request_header(view[at + 4:], request_header_version(api_key, version))
                        waiting = at
                    except Exception:
                        pass
                continue
            if decode_request(view[at:end]).error is None:
                return at, True
        return (waiting, False) if waiting is not None else None

    def _find_response(self, conv: _Conv, view: memoryview) -> Optional[tuple[int, bool]]:
        """As :meth:`_find_request`, for answers: a pending request's correlation id."""
        candidates = []
        data = view.tobytes()
        for cid in conv.pending:
            pos = data.find(_SIZE.pack(cid), 4)
            while pos >= 4:
                candidates.append(pos - 4)
                pos = data.find(_SIZE.pack(cid), pos + 1)
        waiting: Optional[int] = None
        for at in sorted(candidates):
            size, cid = struct.unpack_from(">ii", data, at)
            if size < 4 or size > self.max_frame_bytes:
                continue
            if at + 4 + size > len(data):
                if waiting is None and size <= self.max_undecided:
                    waiting = at
                continue
            _, req, _ = conv.pending[cid]
            if decode_response(view[at:at + 4 + size], req.api_key, req.api_version).error is None:
                return at, True
        return (waiting, False) if waiting is not None else None

    def _request(self, conv: _Conv, t: float, frame: memoryview) -> None:
        req = decode_request(frame)
        if req.api_key < 0 or (req.error and "unknown API key" in req.error):
            if not conv.requests_seen:  # the first frame is no Kafka request: other traffic
                self._not_kafka(conv, t, req.error or "?")
                return
            self._undecodable(conv, t, "request", bytes(frame[:32]), len(frame), req.error or "?")
            return
        if not conv.requests_seen:
            conv.requests_seen = True
            self.brokers.add(conv.broker or "")
        if req.api_key == _PRODUCE and req.message is not None and req.message.acks == 0:
            self._exchange(conv, t, t, req, len(frame), None, 0, one_way=True)
            return
        conv.pending[req.correlation_id] = (t, req, len(frame))

    def _response(self, conv: _Conv, t: float, frame: memoryview) -> None:
        cid = _SIZE.unpack_from(frame, 4)[0] if len(frame) >= 8 else None
        entry = conv.pending.pop(cid, None) if cid is not None else None
        if entry is None:
            self._undecodable(conv, t, "response", bytes(frame[:32]), len(frame),
                              "answers no pending request (correlation id {})".format(cid))
            return
        t0, req, req_size = entry
        resp = decode_response(frame, req.api_key, req.api_version)
        if resp.message is not None and req.api_key == _METADATA:
            self.topic_names.learn(resp.message)
            for b in resp.message.brokers:
                self.nodes[_addr(b.host, b.port)] = b.node_id
                self.brokers.add(_addr(b.host, b.port))
        self._exchange(conv, t0, t, req, req_size, resp, len(frame))

    # --- reports -------------------------------------------------------------------------

    def _node(self, broker: str) -> Optional[int]:
        node = self.nodes.get(broker)
        if node is None:  # advertised by name: the port alone, when only one broker has it
            port = ":" + broker.rpartition(":")[2]
            matches = {n for addr, n in self.nodes.items() if addr.endswith(port)}
            node = matches.pop() if len(matches) == 1 else None
        return node

    def _exchange(self, conv: _Conv, t: float, t_end: float, req: DecodedRequest, req_size: int,
                  resp: Any, resp_size: int, unanswered: bool = False, one_way: bool = False) -> None:
        event = exchange_event(
            conn=conv.id, client=conv.client or "?", broker=conv.broker or "?",
            node=self._node(conv.broker or ""), t=t, t_end=t_end, request=req, req_bytes=req_size,
            response=resp, resp_bytes=resp_size, names=self.topic_names,
            keep_trees=self.keep_trees, unanswered=unanswered, one_way=one_way)
        if event["node"] is None:
            self._nodeless.append(event)
        self.sink(event)

    def _undecodable(self, conv: _Conv, t: float, direction: str, head: bytes, size: int,
                     reason: str, **extra: Any) -> None:
        self.sink({"kind": "undecodable", "t": t, "conn": conv.id, "direction": direction,
                   "client": conv.client or conv.conn.a, "broker": conv.broker or conv.conn.b,
                   "bytes": size, "head": head.hex(), "reason": reason, **extra})

    def _not_kafka(self, conv: _Conv, t: float, reason: str) -> None:
        """A connection whose first bytes are no Kafka request: other traffic, counted (and
        reported when the user named its port as a broker's)."""
        self.stats.not_kafka += 1
        if self.broker_ports:
            self._undecodable(conv, t, "request", bytes(conv.streams[conv.client or ""].buffer[:32]),
                              len(conv.streams[conv.client or ""].buffer),
                              "not Kafka: " + reason)
        conv.ignored = True

    def _tls(self, conv: _Conv, t: float, src: str) -> None:
        client = conv.client or src
        conv.client, conv.broker = client, conv.conn.peer(client)
        self._undecodable(conv, t, "both", b"", 0, "TLS: the stream is encrypted, nothing to "
                          "decode (trace through the proxy with --upstream-tls instead)", tls=True)
        conv.ignored = True

    def _close(self, conv: _Conv, t: float, reason: Optional[str]) -> None:
        self._convs.pop(id(conv.conn), None)
        if conv.broker is None:
            if any(s.pieces for s in conv.streams.values()):
                self.stats.not_kafka += 1
            return
        for side, stream in conv.streams.items():
            leftover = stream.skipped + len(stream.buffer)
            if leftover and not conv.ignored:
                self.sink({"kind": "skipped", "t": t, "conn": conv.id,
                           "direction": "request" if side == conv.client else "response",
                           "bytes": leftover, "reason": "no whole frame decodes in the last "
                           "bytes ({})".format(stream.why if not stream.synced else
                                                "the capture ends mid-frame")})
        for cid, (t0, req, size) in sorted(conv.pending.items()):
            self._exchange(conv, t0, t, req, size, None, 0, unanswered=True)
        conv.pending.clear()
        if reason is not None:
            self.sink({"kind": "close", "t": t, "conn": conv.id, "reason": reason})


def read_capture(f: BinaryIO, sink: Sink, broker_ports: Optional[set[int]] = None,
                 keep_trees: bool = False) -> CaptureStats:
    """Every Kafka exchange of a pcap/pcapng file, to ``sink`` (in stream order; sort by time
    for a timeline; exchanges sent before a Metadata answer named their broker get its node
    id when the capture has been read). Raises :class:`~kproto.errors.InvalidCaptureError` for a file that is
    not a capture."""
    decoder = CaptureDecoder(sink, broker_ports, keep_trees)
    table = ConnectionTable()
    reader = CaptureReader(f)
    t = 0.0
    for packet in reader:
        decoder.stats.packets += 1
        t = max(t, packet.t)
        seg = tcp_segment(packet.linktype, packet.data)
        if isinstance(seg, str):
            decoder.stats.skipped_packets[seg] += 1
            continue
        for ev in table.feed(packet.t, seg):
            decoder.feed(ev)
    for ev in table.finish(t):
        decoder.feed(ev)
    decoder.finish(t)
    stats = decoder.stats
    stats.truncated = reader.truncated
    stats.retransmitted, stats.out_of_order = table.retransmitted, table.out_of_order
    return stats
