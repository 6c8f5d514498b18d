"""Synthetic packet captures for the capture-reader tests: Kafka frames over TCP, written as
pcap or pcapng bytes with any of the link types the reader knows.

Built from the file formats' and protocols' definitions (libpcap's pcap and pcapng, RFC 791,
RFC 8200, RFC 9293, Linux cooked captures), independently of kproto's reader: a
:class:`Conversation` keeps each side's sequence numbers and cuts what a side sends into
segments, which the tests may reorder, repeat or drop before writing the file.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Any, NamedTuple, Optional

from kproto.protocol import headers

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def request_frame(request: Any, version: int, correlation_id: int, client_id: str = "app") -> bytes:
    hv = headers.request_header_version(request.api_key, version)
    body = headers.encode_request_header(request.api_key, version, correlation_id, client_id, hv) \
        + request.encode(version)
    return struct.pack(">i", len(body)) + body


def response_frame(response: Any, version: int, correlation_id: int) -> bytes:
    head = struct.pack(">i", correlation_id)
    if headers.response_header_version(response.api_key, version) == 1:
        head += b"\x00"  # no tagged fields
    body = head + response.encode(version)
    return struct.pack(">i", len(body)) + body


class Packet(NamedTuple):
    t: float
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    ack: int
    flags: int
    payload: bytes


def _checksumless_tcp(p: Packet) -> bytes:
    return struct.pack(">HHIIBBHHH", p.src[1], p.dst[1], p.seq % 2**32, p.ack % 2**32, 5 << 4,
                       p.flags, 65535, 0, 0) + p.payload


def ip_packet(p: Packet) -> bytes:
    tcp = _checksumless_tcp(p)
    src, dst = ipaddress.ip_address(p.src[0]), ipaddress.ip_address(p.dst[0])
    if src.version == 4:
        return struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0,
                           src.packed, dst.packed) + tcp
    return struct.pack(">IHBB16s16s", 6 << 28, len(tcp), 6, 64, src.packed, dst.packed) + tcp


def link_frame(linktype: int, ip: bytes, big_endian_null: bool = False) -> bytes:
    v6 = ip[0] >> 4 == 6
    ethertype = 0x86DD if v6 else 0x0800
    if linktype == 1:  # Ethernet
        return b"\x02" * 6 + b"\x04" * 6 + struct.pack(">H", ethertype) + ip
    if linktype == 113:  # Linux cooked v1
        return struct.pack(">HHH8sH", 0, 772, 6, b"\0" * 8, ethertype) + ip
    if linktype == 276:  # Linux cooked v2
        return struct.pack(">HHIHBB8s", ethertype, 0, 1, 772, 0, 6, b"\0" * 8) + ip
    if linktype == 0:  # BSD null: the family in the capturing host's byte order
        family = 30 if v6 else 2
        return struct.pack(">I" if big_endian_null else "<I", family) + ip
    if linktype == 108:  # OpenBSD loop: network byte order
        return struct.pack(">I", 24 if v6 else 2) + ip
    if linktype in (101, 228, 229):
        return ip
    raise ValueError(linktype)


def pcap(packets: list[Packet], linktype: int = 1, big_endian: bool = False,
         nanoseconds: bool = False) -> bytes:
    order = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanoseconds else 0xA1B2C3D4
    out = bytearray(struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 262144, linktype))
    for p in packets:
        data = link_frame(linktype, ip_packet(p))
        seconds = int(p.t)
        fraction = round((p.t - seconds) * (1e9 if nanoseconds else 1e6))
        out += struct.pack(order + "IIII", seconds, fraction, len(data), len(data)) + data
    return bytes(out)


def _block(order: str, kind: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    length = 12 + len(body)
    return struct.pack(order + "II", kind, length) + body + struct.pack(order + "I", length)


def pcapng(packets: list[Packet], linktype: int = 1, big_endian: bool = False,
           tsresol: Optional[int] = None, extra_interface: Optional[int] = None) -> bytes:
    """An SHB, an interface (``tsresol``: the if_tsresol option byte; default microseconds)
    and enhanced packet blocks; ``extra_interface``: a first interface of another link type
    that carries nothing, so packets name interface 1."""
    order = ">" if big_endian else "<"
    out = bytearray(_block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1)))
    interface = 0
    if extra_interface is not None:
        out += _block(order, 1, struct.pack(order + "HHI", extra_interface, 0, 0))
        interface = 1
    options = b""
    per_second = 10 ** 6
    if tsresol is not None:
        options = struct.pack(order + "HH", 9, 1) + bytes([tsresol]) + b"\0\0\0" + b"\0\0\0\0"
        per_second = 2 ** (tsresol & 0x7F) if tsresol & 0x80 else 10 ** tsresol
    out += _block(order, 1, struct.pack(order + "HHI", linktype, 0, 0) + options)
    out += _block(order, 5, b"\0" * 12)  # an interface statistics block: skipped
    for p in packets:
        data = link_frame(linktype, ip_packet(p), big_endian_null=big_endian)
        ts = round(p.t * per_second)
        out += _block(order, 6, struct.pack(order + "IIIII", interface, ts >> 32, ts & 0xFFFFFFFF,
                                            len(data), len(data)) + data)
    return bytes(out)


class Conversation:
    """One TCP connection: what each side sends, as segments with consistent numbers."""

    def __init__(self, client: tuple[str, int] = ("10.0.0.1", 50000),
                 broker: tuple[str, int] = ("10.0.0.2", 9092), client_isn: int = 1000,
                 broker_isn: int = 5000, t: float = 1_700_000_000.0) -> None:
        self.client, self.broker = client, broker
        self.seq = {client: client_isn, broker: broker_isn}
        self.t = t
        self.packets: list[Packet] = []

    def _tick(self) -> float:
        self.t += 0.001
        return self.t

    def handshake(self) -> Conversation:
        c, b = self.client, self.broker
        self.packets.append(Packet(self._tick(), c, b, self.seq[c], 0, SYN, b""))
        self.seq[c] += 1
        self.packets.append(Packet(self._tick(), b, c, self.seq[b], self.seq[c], SYN | ACK, b""))
        self.seq[b] += 1
        self.packets.append(Packet(self._tick(), c, b, self.seq[c], self.seq[b], ACK, b""))
        return self

    def send(self, from_client: bool, data: bytes, mss: int = 1000, ack: bool = True) -> list[Packet]:
        """``data`` in segments of at most ``mss`` bytes, then the peer's ACK (``ack``)."""
        src, dst = (self.client, self.broker) if from_client else (self.broker, self.client)
        sent = []
        for i in range(0, len(data), mss):
            piece = data[i:i + mss]
            sent.append(Packet(self._tick(), src, dst, self.seq[src], self.seq[dst], PSH | ACK, piece))
            self.seq[src] += len(piece)
        self.packets += sent
        if ack:
            self.packets.append(Packet(self._tick(), dst, src, self.seq[dst], self.seq[src], ACK, b""))
        return sent

    def close(self) -> Conversation:
        c, b = self.client, self.broker
        self.packets.append(Packet(self._tick(), c, b, self.seq[c], self.seq[b], FIN | ACK, b""))
        self.seq[c] += 1
        self.packets.append(Packet(self._tick(), b, c, self.seq[b], self.seq[c], FIN | ACK, b""))
        self.seq[b] += 1
        self.packets.append(Packet(self._tick(), c, b, self.seq[c], self.seq[b], ACK, b""))
        return self
