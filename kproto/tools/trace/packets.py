"""A captured packet's layers: link header, IPv4 or IPv6, TCP, down to the TCP segment.

Owns :func:`tcp_segment` and :class:`Segment`. Link types read: Ethernet (with 802.1Q/QinQ
tags), Linux cooked captures v1 and v2 (tcpdump ``-i any``), BSD loopback/null (the family
in host byte order) and OpenBSD loop (network byte order), and raw IP. Everything else (ARP,
UDP, IP fragments, an unknown link type) is not a TCP segment: ``tcp_segment`` answers why
in a word, so the capture's summary can count what it skipped. Nothing here raises on bad
bytes: a header cut short is a reason, never an exception.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import NamedTuple, Union

__all__ = ["Segment", "tcp_segment", "LINKTYPES", "FIN", "SYN", "RST", "ACK"]

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10

LINKTYPES = {0: "null", 1: "Ethernet", 101: "raw IP", 108: "loop", 113: "Linux cooked",
             228: "raw IPv4", 229: "raw IPv6", 276: "Linux cooked v2"}

_ETH_IPV4, _ETH_IPV6 = 0x0800, 0x86DD
_ETH_VLAN = (0x8100, 0x88A8, 0x9100)
# Address families of the null/loop header: AF_INET is 2 everywhere, AF_INET6 differs
# between the BSDs (24, 28, 30) and Linux (10).
_AF_INET, _AF_INET6 = {2}, {10, 24, 28, 30}
_U16 = struct.Struct(">H")


class Segment(NamedTuple):
    """A TCP segment: its endpoints, sequence number, flags and payload."""

    src: str  # "ip:port" ("[v6]:port" for IPv6)
    dst: str
    seq: int
    ack: int
    flags: int
    payload: bytes


def _endpoint(ip: bytes, port: int) -> str:
    if len(ip) == 4:
        return "{}:{}".format(ipaddress.IPv4Address(ip), port)
    return "[{}]:{}".format(ipaddress.IPv6Address(ip), port)


def tcp_segment(linktype: int, data: bytes) -> Union[Segment, str]:
    """The TCP segment in a captured packet, or a word saying why there is none."""
    ip = _network_layer(linktype, data)
    if isinstance(ip, str):
        return ip
    version, view = ip
    if version == 4:
        return _ipv4(view)
    return _ipv6(view)


def _network_layer(linktype: int, data: bytes) -> Union[tuple[int, memoryview], str]:
    view = memoryview(data)
    if linktype == 1:  # Ethernet
        pos = 12
        while len(view) >= pos + 2 and _U16.unpack_from(view, pos)[0] in _ETH_VLAN:
            pos += 4
        if len(view) < pos + 2:
            return "short link header"
        return _by_ethertype(_U16.unpack_from(view, pos)[0], view[pos + 2:])
    if linktype == 113:  # Linux cooked v1: the protocol is the last field of 16 bytes
        if len(view) < 16:
            return "short link header"
        return _by_ethertype(_U16.unpack_from(view, 14)[0], view[16:])
    if linktype == 276:  # Linux cooked v2: the protocol first, 20 bytes in all
        if len(view) < 20:
            return "short link header"
        return _by_ethertype(_U16.unpack_from(view, 0)[0], view[20:])
    if linktype in (0, 108):  # BSD null (host order) / OpenBSD loop (network order)
        if len(view) < 4:
            return "short link header"
        families = {struct.unpack_from(">I", view, 0)[0]}
        if linktype == 0:
            families.add(struct.unpack_from("<I", view, 0)[0])
        if families & _AF_INET:
            return 4, view[4:]
        if families & _AF_INET6:
            return 6, view[4:]
        return "not IP"
    if linktype in (101, 228, 229):  # raw IP: the version nibble says which
        if not view:
            return "empty packet"
        version = view[0] >> 4
        return (version, view) if version in (4, 6) else "not IP"
    return "link type {}".format(linktype)


def _by_ethertype(ethertype: int, rest: memoryview) -> Union[tuple[int, memoryview], str]:
    if ethertype == _ETH_IPV4:
        return 4, rest
    if ethertype == _ETH_IPV6:
        return 6, rest
    return "not IP"


def _ipv4(view: memoryview) -> Union[Segment, str]:
    if len(view) < 20 or view[0] >> 4 != 4:
        return "short IP header"
    header = (view[0] & 0x0F) * 4
    total = _U16.unpack_from(view, 2)[0]
    if header < 20 or len(view) < header:
        return "short IP header"
    if _U16.unpack_from(view, 6)[0] & 0x3FFF:  # more fragments, or a fragment offset
        return "IP fragment"
    if view[9] != 6:
        return "not TCP"
    # Ethernet pads short frames: the IP length says where the packet ends. A length of 0
    # is a TSO packet captured before segmentation: it runs to the end of the capture.
    end = total if header <= total <= len(view) else len(view)
    return _tcp(bytes(view[12:16]), bytes(view[16:20]), view[header:end])


def _ipv6(view: memoryview) -> Union[Segment, str]:
    if len(view) < 40 or view[0] >> 4 != 6:
        return "short IP header"
    payload = _U16.unpack_from(view, 4)[0]
    next_header, pos = view[6], 40
    end = 40 + payload if 0 < payload <= len(view) - 40 else len(view)
    # Extension headers: hop-by-hop, routing, destination options (length in 8-byte units).
    while next_header in (0, 43, 60):
        if len(view) < pos + 8:
            return "short IP header"
        next_header, pos = view[pos], pos + (view[pos + 1] + 1) * 8
    if next_header == 44:
        return "IP fragment"
    if next_header != 6:
        return "not TCP"
    if pos > end:
        return "short IP header"
    return _tcp(bytes(view[8:24]), bytes(view[24:40]), view[pos:end])


def _tcp(src_ip: bytes, dst_ip: bytes, view: memoryview) -> Union[Segment, str]:
    if len(view) < 20:
        return "short TCP header"
    sport, dport, seq, ack = struct.unpack_from(">HHII", view, 0)
    offset = (view[12] >> 4) * 4
    if offset < 20 or offset > len(view):
        return "short TCP header"
    return Segment(_endpoint(src_ip, sport), _endpoint(dst_ip, dport), seq, ack, view[13],
                   bytes(view[offset:]))
