"""Packet capture files: the pcap and pcapng formats, read as a stream of packets.

Owns :func:`read_packets` and :class:`Packet`. Both of libpcap's formats are read
(tcpdump's and Wireshark's files): classic pcap in either byte order with microsecond or
nanosecond timestamps, and pcapng (section headers in either byte order, any number of
interfaces each with its own link type and ``if_tsresol``, enhanced, simple and obsolete
packet blocks; every other block is skipped by its length). What a packet carries above the
link layer is :mod:`.packets`' job.

The file is read incrementally (a capture may be larger than memory). A file that is not a
capture, a corrupt block header or a record claiming more bytes than any capture holds
raises :class:`~kproto.errors.InvalidCaptureError` at once, with the file position; a
capture cut short (tcpdump killed mid-write) ends the packets and says so in
``CaptureReader.truncated`` instead: everything before the cut is still worth reading.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Iterator, NamedTuple, Optional

from kproto.errors import InvalidCaptureError

__all__ = ["Packet", "CaptureReader", "read_packets", "MAX_RECORD_BYTES"]

# libpcap refuses records above 256 KiB (its MAXIMUM_SNAPLEN); pcapng blocks of a
# loopback capture stay far below this. Anything larger is a corrupt length, not a packet.
MAX_RECORD_BYTES = 16 * 1024 * 1024

_PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
               b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
_PCAPNG_SHB = 0x0A0D0D0A
_BYTE_ORDER_MAGIC = 0x1A2B3C4D
_IDB, _PB, _SPB, _EPB = 1, 2, 3, 6
_IF_TSRESOL = 9


class Packet(NamedTuple):
    """One captured packet: when, on which link type, the bytes captured."""

    t: float  # seconds since the epoch
    linktype: int  # LINKTYPE_* (1 Ethernet, 113 Linux cooked, 276 Linux cooked v2, 0 null...)
    data: bytes  # what was captured (may be shorter than the packet on the wire)
    orig_len: int  # the packet's length on the wire


class CaptureReader:
    """Iterate the packets of a capture file opened in binary mode.

    ``format`` is ``"pcap"`` or ``"pcapng"`` once iteration started; ``truncated`` says why
    the packets ended early (None when the file ended at a record boundary).
    """

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self._pos = 0
        self.format: Optional[str] = None
        self.truncated: Optional[str] = None
        self.packets = 0

    def _read(self, n: int) -> bytes:
        data = self._f.read(n)
        self._pos += len(data)
        return data

    def __iter__(self) -> Iterator[Packet]:
        head = self._read(4)
        if len(head) < 4:
            raise InvalidCaptureError("not a packet capture: the file has {} bytes".format(len(head)))
        if head in _PCAP_MAGIC:
            self.format = "pcap"
            packets = self._pcap(head)
        elif struct.unpack("<I", head)[0] == _PCAPNG_SHB:
            self.format = "pcapng"
            packets = self._pcapng(head)
        else:
            raise InvalidCaptureError(
                "not a pcap or pcapng capture (the file starts with {})".format(head.hex()), offset=0)
        for packet in packets:
            self.packets += 1
            yield packet

    # --- classic pcap --------------------------------------------------------------------

    def _pcap(self, magic: bytes) -> Iterator[Packet]:
        order, unit = _PCAP_MAGIC[magic]
        rest = self._read(20)
        if len(rest) < 20:
            raise InvalidCaptureError("pcap file header cut short ({} of 24 bytes)".format(4 + len(rest)))
        _major, _minor, _zone, _sigfigs, _snaplen, network = struct.unpack(order + "HHiIII", rest)
        linktype = network & 0x0FFFFFFF  # the upper bits carry FCS information
        record = struct.Struct(order + "IIII")
        while True:
            at = self._pos
            header = self._read(16)
            if not header:
                return
            if len(header) < 16:
                self.truncated = "the last record header is cut short (at byte {})".format(at)
                return
            seconds, fraction, captured, orig_len = record.unpack(header)
            if captured > MAX_RECORD_BYTES:
                raise InvalidCaptureError("a pcap record claims {} captured bytes".format(captured),
                                          offset=at)
            data = self._read(captured)
            if len(data) < captured:
                self.truncated = "the last packet is cut short ({} of {} bytes, at byte {})".format(
                    len(data), captured, at)
                return
            yield Packet(seconds + fraction * unit, linktype, data, orig_len)

    # --- pcapng --------------------------------------------------------------------------

    def _pcapng(self, first: bytes) -> Iterator[Packet]:
        order = "<"
        interfaces: list[tuple[int, float]] = []  # (linktype, seconds per timestamp unit)
        block_type: Optional[int] = struct.unpack("<I", first)[0]
        at = 0
        while True:
            if block_type is None:
                at = self._pos
                raw_type = self._read(4)
                if not raw_type:
                    return
                if len(raw_type) < 4:
                    self.truncated = "the last block header is cut short (at byte {})".format(at)
                    return
                block_type = struct.unpack(order + "I", raw_type)[0]
            raw_length = self._read(4)
            if len(raw_length) < 4:
                self.truncated = "the last block header is cut short (at byte {})".format(at)
                return
            if block_type == _PCAPNG_SHB:
                bom = self._read(4)
                if len(bom) < 4:
                    self.truncated = "the section header is cut short (at byte {})".format(at)
                    return
                if struct.unpack("<I", bom)[0] == _BYTE_ORDER_MAGIC:
                    order = "<"
                elif struct.unpack(">I", bom)[0] == _BYTE_ORDER_MAGIC:
                    order = ">"
                else:
                    raise InvalidCaptureError("pcapng section header with byte-order magic {}"
                                              .format(bom.hex()), offset=at)
                interfaces = []  # interface ids are per section
                length = struct.unpack(order + "I", raw_length)[0]
                self._check_length(length, at, minimum=28)
                body = self._read(length - 12)
            else:
                length = struct.unpack(order + "I", raw_length)[0]
                self._check_length(length, at, minimum=12)
                body = self._read(length - 8)
            kind, block_type = block_type, None
            if len(body) < length - (12 if kind == _PCAPNG_SHB else 8):
                self.truncated = "the last block is cut short (at byte {})".format(at)
                return
            body = body[:-4]  # the trailing copy of the length
            if kind == _IDB:
                interfaces.append(self._interface(body, order, at))
            elif kind in (_EPB, _PB):
                packet = self._packet_block(kind, body, order, interfaces, at)
                if packet is not None:
                    yield packet
            elif kind == _SPB:
                if not interfaces or len(body) < 4:
                    raise InvalidCaptureError("simple packet block without an interface", offset=at)
                orig_len = struct.unpack_from(order + "I", body, 0)[0]
                # No timestamp in a simple packet block: 0, and the caller orders by arrival.
                yield Packet(0.0, interfaces[0][0], body[4:4 + orig_len], orig_len)

    @staticmethod
    def _check_length(length: int, at: int, minimum: int) -> None:
        if length < minimum or length % 4 or length > MAX_RECORD_BYTES:
            raise InvalidCaptureError("pcapng block length {} is impossible".format(length),
                                      offset=at)

    @staticmethod
    def _interface(body: bytes, order: str, at: int) -> tuple[int, float]:
        if len(body) < 8:
            raise InvalidCaptureError("interface description block too short", offset=at)
        linktype = struct.unpack_from(order + "H", body, 0)[0]
        unit = 1e-6
        pos = 8
        while pos + 4 <= len(body):  # options: code, length, value padded to 4
            code, size = struct.unpack_from(order + "HH", body, pos)
            if code == 0:
                break
            if code == _IF_TSRESOL and size >= 1:
                resolution = body[pos + 4]
                exponent = resolution & 0x7F
                unit = 2.0 ** -exponent if resolution & 0x80 else 10.0 ** -exponent
            pos += 4 + size + (-size % 4)
        return linktype, unit

    @staticmethod
    def _packet_block(kind: int, body: bytes, order: str, interfaces: list[tuple[int, float]],
                      at: int) -> Optional[Packet]:
        if kind == _EPB:
            if len(body) < 20:
                raise InvalidCaptureError("enhanced packet block too short", offset=at)
            interface, high, low, captured, orig_len = struct.unpack_from(order + "IIIII", body, 0)
            start = 20
        else:  # the obsolete packet block: a 16-bit interface id and a drops count
            if len(body) < 20:
                raise InvalidCaptureError("packet block too short", offset=at)
            interface, _drops, high, low, captured, orig_len = struct.unpack_from(
                order + "HHIIII", body, 0)
            start = 20
        if interface >= len(interfaces):
            raise InvalidCaptureError("packet of interface {} which was never described"
                                      .format(interface), offset=at)
        if start + captured > len(body):
            raise InvalidCaptureError("packet of {} captured bytes in a {}-byte block".format(
                captured, len(body)), offset=at)
        linktype, unit = interfaces[interface]
        return Packet(((high << 32) | low) * unit, linktype, body[start:start + captured], orig_len)


def read_packets(f: BinaryIO) -> Iterator[Packet]:
    """The packets of a pcap or pcapng file (see :class:`CaptureReader` for what is kept)."""
    return iter(CaptureReader(f))
