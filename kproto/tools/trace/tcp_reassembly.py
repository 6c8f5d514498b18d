"""TCP reassembly, sans-IO: captured segments in, each direction's byte stream out, in order.

Owns :class:`StreamDirection` (one direction: sequence numbers to contiguous bytes) and
:class:`ConnectionTable` (segments to connections, each with its two directions). Segments
go in in capture order with their time; what comes out are :class:`StreamEvent` items:

- ``open`` when a connection is first seen (``syn``: whether its start was captured; when it
  was not, the side that sent the SYN is unknown and the streams start mid-way);
- ``data``: the next contiguous bytes of one direction, stamped with the time of the segment
  that made them contiguous (a retransmission carries nothing new; an out-of-order segment is
  held until the gap before it is filled);
- ``gap``: bytes that will never be seen (the capture dropped them): the peer acknowledged
  them, or more than ``max_held`` bytes wait behind the hole, or the capture ended;
- ``close`` on RST or once both sides sent FIN (a SYN on a closed connection's ports opens a new connection).

Sequence numbers compare modulo 2**32 (RFC 1982), so a stream may wrap. Memory is bounded
by ``max_held`` bytes held out of order per direction.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from kproto.tools.trace.packets import ACK, FIN, RST, SYN, Segment

__all__ = ["StreamDirection", "ConnectionTable", "Connection", "StreamEvent", "DEFAULT_MAX_HELD"]

DEFAULT_MAX_HELD = 8 * 1024 * 1024
_MOD = 1 << 32


def _after(a: int, b: int) -> int:
    """``a - b`` as a signed 32-bit distance (positive: ``a`` is later in the stream)."""
    d = (a - b) % _MOD
    return d - _MOD if d >= 1 << 31 else d


class StreamDirection:
    """One direction of a connection: segments in, ``(gap, data)`` pieces out."""

    __slots__ = ("next_seq", "held", "held_bytes", "max_held", "mid_stream", "retransmitted",
                 "out_of_order", "lost", "delivered", "fin_seq")

    def __init__(self, max_held: int = DEFAULT_MAX_HELD) -> None:
        self.next_seq: Optional[int] = None
        self.held: dict[int, bytes] = {}  # seq -> payload waiting for the bytes before it
        self.held_bytes = 0
        self.max_held = max_held
        self.mid_stream = False  # no SYN seen: the first byte is not the stream's first
        self.retransmitted = 0  # segments that carried nothing new
        self.out_of_order = 0  # segments that arrived ahead of a hole
        self.lost = 0  # bytes skipped over holes
        self.delivered = 0
        self.fin_seq: Optional[int] = None  # where the stream ends (its FIN's number)

    def fin(self, seq_end: int) -> None:
        self.fin_seq = seq_end % _MOD

    def syn(self, seq: int) -> None:
        self.next_seq = (seq + 1) % _MOD  # the SYN takes one sequence number
        self.held.clear()
        self.held_bytes = 0

    def segment(self, seq: int, payload: bytes) -> list[tuple[int, bytes]]:
        """Pieces made contiguous by this segment: ``(bytes lost before, data)``."""
        if not payload:
            return []
        if self.next_seq is None:
            self.next_seq = seq
            self.mid_stream = True
        d = _after(seq, self.next_seq)
        if d < 0:
            if d + len(payload) <= 0:
                self.retransmitted += 1
                return []
            payload, d = payload[-d:], 0  # a retransmission overlapping new bytes
        if d > 0:
            self.out_of_order += 1
            if len(self.held.get(seq, b"")) < len(payload):
                self.held_bytes += len(payload) - len(self.held.get(seq, b""))
                self.held[seq] = payload
            if self.held_bytes > self.max_held:
                return self._skip_to(min(self.held, key=lambda s: _after(s, self.next_seq or 0)))
            return []
        out = [(0, payload)]
        self._advance(len(payload))
        out += self._drain()
        return out

    def acked(self, ack: int) -> list[tuple[int, bytes]]:
        """The peer acknowledged everything before ``ack``: what is still missing was lost
        by the capture, not by the network."""
        if self.fin_seq is not None and _after(ack, self.fin_seq) > 0:
            ack = self.fin_seq  # the FIN takes a sequence number, not a byte
        if self.next_seq is None or _after(ack, self.next_seq) <= 0:
            return []
        if self.held:
            first = min(self.held, key=lambda s: _after(s, self.next_seq or 0))
            if _after(first, ack) < 0:
                return self._skip_to(first)
        return self._skip_to(ack)

    def flush(self) -> list[tuple[int, bytes]]:
        """The end of the capture: deliver what is held, over its holes."""
        out: list[tuple[int, bytes]] = []
        while self.held:
            out += self._skip_to(min(self.held, key=lambda s: _after(s, self.next_seq or 0)))
        return out

    def _skip_to(self, seq: int) -> list[tuple[int, bytes]]:
        assert self.next_seq is not None
        missing = _after(seq, self.next_seq)
        if missing <= 0:
            return self._drain()
        self.lost += missing
        self.next_seq = seq % _MOD
        drained = self._drain()
        if drained and drained[0][0] == 0:
            drained[0] = (missing, drained[0][1])
            return drained
        return [(missing, b"")] + drained

    def _advance(self, n: int) -> None:
        assert self.next_seq is not None
        self.next_seq = (self.next_seq + n) % _MOD
        self.delivered += n

    def _drain(self) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        progress = True
        while progress and self.held:
            progress = False
            for seq in list(self.held):
                assert self.next_seq is not None
                d = _after(seq, self.next_seq)
                if d > 0:
                    continue
                payload = self.held.pop(seq)
                self.held_bytes -= len(payload)
                if d + len(payload) > 0:
                    piece = payload[-d:] if d else payload
                    out.append((0, piece))
                    self._advance(len(piece))
                progress = True
        return out


class StreamEvent(NamedTuple):
    kind: str  # "open", "data", "gap", "close"
    t: float
    conn: Connection
    src: str  # the endpoint whose bytes these are ("open": the SYN's sender or the first seen)
    data: bytes = b""
    gap: int = 0
    reason: str = ""


class Connection:
    """Both directions of one TCP connection, keyed by its sending endpoint."""

    def __init__(self, number: int, first_src: str, first_dst: str, syn_seen: bool,
                 max_held: int) -> None:
        self.number = number
        self.a, self.b = first_src, first_dst
        self.syn_seen = syn_seen  # then ``a`` opened the connection: the client
        self.directions = {first_src: StreamDirection(max_held), first_dst: StreamDirection(max_held)}
        self.fins: list[str] = []  # the endpoints that sent a FIN, in order
        self.closed = False

    def peer(self, endpoint: str) -> str:
        return self.b if endpoint == self.a else self.a


class ConnectionTable:
    """Segments of any number of connections, in capture order, to :class:`StreamEvent`."""

    def __init__(self, max_held: int = DEFAULT_MAX_HELD) -> None:
        self.max_held = max_held
        self.connections: dict[frozenset[str], Connection] = {}
        self._count = 0
        self._retired = [0, 0]  # retransmitted, out-of-order segments of finished connections

    @property
    def retransmitted(self) -> int:
        return self._retired[0] + sum(d.retransmitted for c in self.connections.values()
                                      for d in c.directions.values())

    @property
    def out_of_order(self) -> int:
        return self._retired[1] + sum(d.out_of_order for c in self.connections.values()
                                      for d in c.directions.values())

    def feed(self, t: float, seg: Segment) -> list[StreamEvent]:
        key = frozenset((seg.src, seg.dst))
        conn = self.connections.get(key)
        out: list[StreamEvent] = []
        opening = bool(seg.flags & SYN) and not seg.flags & ACK
        if conn is not None and opening and (conn.closed or _restarted(conn, seg)):
            out += self._finish(t, conn, "ports reused")
            conn = None
        if conn is None:
            if seg.flags & RST and not seg.payload:
                return out  # a reset of a connection the capture never saw
            self._count += 1
            conn = Connection(self._count, seg.src, seg.dst, opening, self.max_held)
            self.connections[key] = conn
            out.append(StreamEvent("open", t, conn, seg.src))
        direction = conn.directions[seg.src]
        if seg.flags & SYN:
            direction.syn(seg.seq)
        for gap, data in direction.segment(seg.seq, seg.payload):
            out += self._pieces(t, conn, seg.src, gap, data)
        if seg.flags & ACK:
            other = conn.directions[seg.dst]
            for gap, data in other.acked(seg.ack):
                out += self._pieces(t, conn, seg.dst, gap, data)
        if seg.flags & FIN and not conn.closed:
            conn.fins.append(seg.src)
            direction.fin(seg.seq + len(seg.payload))
        if (seg.flags & RST or len(set(conn.fins)) == 2) and not conn.closed:
            # Closed once both sides said FIN (a half-closed side may still be answered).
            conn.closed = True
            out += self._flush(t, conn)
            if seg.flags & RST:
                out.append(StreamEvent("close", t, conn, seg.src, reason="reset by"))
            else:
                out.append(StreamEvent("close", t, conn, conn.fins[0], reason="closed by"))
        return out

    def finish(self, t: float) -> list[StreamEvent]:
        """The capture ended: what every open connection still holds."""
        out: list[StreamEvent] = []
        for conn in list(self.connections.values()):
            out += self._finish(t, conn, "")
        return out

    def _finish(self, t: float, conn: Connection, reason: str) -> list[StreamEvent]:
        out = self._flush(t, conn)
        if self.connections.pop(frozenset((conn.a, conn.b)), None) is not None:
            for d in conn.directions.values():
                self._retired[0] += d.retransmitted
                self._retired[1] += d.out_of_order
        if reason and not conn.closed:
            out.append(StreamEvent("close", t, conn, conn.a, reason=reason))
        return out

    def _flush(self, t: float, conn: Connection) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for src, direction in conn.directions.items():
            for gap, data in direction.flush():
                out += self._pieces(t, conn, src, gap, data)
        return out

    @staticmethod
    def _pieces(t: float, conn: Connection, src: str, gap: int, data: bytes) -> list[StreamEvent]:
        out = []
        if gap:
            out.append(StreamEvent("gap", t, conn, src, gap=gap))
        if data:
            out.append(StreamEvent("data", t, conn, src, data=data))
        return out


def _restarted(conn: Connection, seg: Segment) -> bool:
    """A SYN with a new initial sequence number: the ports were reused for a new connection."""
    direction = conn.directions[seg.src]
    return direction.next_seq is not None and _after(seg.seq + 1, direction.next_seq) != 0 \
        and direction.delivered > 0
