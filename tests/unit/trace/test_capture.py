"""Reading packet captures, sans-IO: synthetic pcap/pcapng bytes built here (captures.py)
carrying real Kafka frames (kproto.messages), through every link type and file variant the
reader knows, and through what captures really contain: segments out of order, repeated,
lost, a capture starting mid-stream, IPv6, TLS, other traffic; and hostile files
(truncated anywhere, garbage, absurd lengths) that must give a clear
``InvalidCaptureError`` or a report, never another exception.
"""

from __future__ import annotations

import io
import random
import struct

import pytest

from kproto import messages as m
from kproto.errors import InvalidCaptureError
from kproto.tools.trace.capture import read_capture
from kproto.tools.trace.report import format_line, time_key
from kproto.tools.trace.tcp_reassembly import StreamDirection
from tests.unit.trace.captures import (ACK, Conversation, Packet, ip_packet, link_frame, pcap,
                                       pcapng, request_frame, response_frame)

RECORDS = bytes(range(256)) * 16  # 4 KiB of record bytes: a response spanning segments


def _exchanges() -> list[tuple[bytes, bytes]]:
    """ApiVersions, Metadata and a Fetch whose answer spans several segments."""
    api_versions = (request_frame(m.ApiVersionsRequest(client_software_name="app",
                                                       client_software_version="1"), 3, 0),
                    response_frame(m.ApiVersionsResponse(api_keys=[
                        m.ApiVersionsResponse.ApiVersion(api_key=1, min_version=0, max_version=17)]),
                        3, 0))
    metadata = (request_frame(m.MetadataRequest(topics=None), 12, 1),
                response_frame(m.MetadataResponse(
                    brokers=[m.MetadataResponse.MetadataResponseBroker(node_id=7, host="10.0.0.2",
                                                                       port=9092)],
                    topics=[m.MetadataResponse.MetadataResponseTopic(name="t", partitions=[
                        m.MetadataResponse.MetadataResponsePartition(partition_index=0, leader_id=7)])]),
                    12, 1))
    fetch = (request_frame(m.FetchRequest(topics=[m.FetchRequest.FetchTopic(topic="t", partitions=[
        m.FetchRequest.FetchPartition(partition=0, fetch_offset=42)])]), 12, 2),
        response_frame(m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(
            topic="t", partitions=[m.FetchResponse.PartitionData(partition_index=0, high_watermark=99,
                                                                 records=RECORDS)])]), 12, 2))
    return [api_versions, metadata, fetch]


def _conversation(**kwargs) -> Conversation:
    conv = Conversation(**kwargs).handshake()
    for request, response in _exchanges():
        conv.send(True, request)
        conv.send(False, response)
    return conv.close()


def _read(data: bytes, ports=None) -> tuple[list[dict], object]:
    events: list[dict] = []
    stats = read_capture(io.BytesIO(data), events.append, ports)
    events.sort(key=time_key)
    return events, stats


def _exchanged(events: list[dict]) -> list[tuple]:
    return [(e["api"], e["correlation_id"], bool(e.get("unanswered")), tuple(e["errors"]))
            for e in events if e["kind"] == "exchange"]


ALL_THREE = [("ApiVersions", 0, False, ()), ("Metadata", 1, False, ()), ("Fetch", 2, False, ())]


def test_a_pcap_conversation_is_decoded_request_by_response():
    events, stats = _read(pcap(_conversation().packets))
    assert _exchanged(events) == ALL_THREE
    fetch = [e for e in events if e["kind"] == "exchange"][-1]
    assert fetch["summary"]["data"] == ["t-0 hw=99 4096B"]
    assert fetch["node"] == 7  # the broker's node id, from the Metadata answer
    assert (fetch["client"], fetch["broker"]) == ("10.0.0.1:50000", "10.0.0.2:9092")
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "open" and kinds[-1] == "close" and "skipped" not in kinds
    assert not any(e.get("mid_stream") for e in events)
    assert "closed by client" in format_line(events[-1])
    assert stats.retransmitted == stats.out_of_order == stats.lost_bytes == 0


@pytest.mark.parametrize("variant", [
    dict(fmt="pcap", linktype=1, big_endian=True),
    dict(fmt="pcap", linktype=113, nanoseconds=True),
    dict(fmt="pcap", linktype=276),
    dict(fmt="pcap", linktype=0),
    dict(fmt="pcap", linktype=108),
    dict(fmt="pcap", linktype=101),
    dict(fmt="pcapng", linktype=1),
    dict(fmt="pcapng", linktype=276, big_endian=True, tsresol=9),
    dict(fmt="pcapng", linktype=0, big_endian=True, tsresol=0x80 | 20, extra_interface=105),
    dict(fmt="pcapng", linktype=113, ipv6=True),
    dict(fmt="pcap", linktype=1, ipv6=True),
], ids=lambda v: "-".join(str(x) for x in v.values()))
def test_every_file_format_and_link_type(variant):
    variant = dict(variant)
    fmt, ipv6 = variant.pop("fmt"), variant.pop("ipv6", False)
    endpoints = dict(client=("fd00::1", 50000), broker=("fd00::2", 9092)) if ipv6 else {}
    conv = _conversation(**endpoints)
    data = (pcap if fmt == "pcap" else pcapng)(conv.packets, **variant)
    events, _ = _read(data)
    assert _exchanged(events) == ALL_THREE
    first = next(e for e in events if e["kind"] == "exchange")
    assert first["t"] == pytest.approx(conv.packets[3].t, abs=1e-5)  # the timestamps' units
    if ipv6:
        assert first["broker"] == "[fd00::2]:9092"


def test_out_of_order_and_retransmitted_segments_are_put_back_in_order():
    conv = Conversation().handshake()
    request, response = _exchanges()[2]
    conv.send(True, request, mss=10)
    body = conv.send(False, response, mss=700, ack=False)
    packets = conv.packets[:-len(body)]
    shuffled = body[:]
    random.Random(3).shuffle(shuffled)
    packets += shuffled + [body[1], body[0]]  # and two retransmissions
    packets.append(Packet(conv.t + 1, conv.client, conv.broker, conv.seq[conv.client],
                          conv.seq[conv.broker], ACK, b""))
    events, stats = _read(pcap(packets))
    assert _exchanged(events) == [("Fetch", 2, False, ())]
    assert stats.retransmitted == 2 and stats.out_of_order > 0 and stats.lost_bytes == 0


def test_a_retransmission_overlapping_new_bytes_gives_only_the_new_ones():
    direction = StreamDirection()
    direction.syn(99)
    assert direction.segment(100, b"abcdef") == [(0, b"abcdef")]
    assert direction.segment(103, b"defgh") == [(0, b"gh")]
    assert direction.segment(2**32 - 2, b"x") == []  # far behind: nothing new


def test_sequence_numbers_wrap_around():
    conv = _conversation(client_isn=2**32 - 300, broker_isn=2**32 - 5)
    events, _ = _read(pcap(conv.packets))
    assert _exchanged(events) == ALL_THREE


def test_a_capture_starting_mid_stream_resynchronises_on_the_next_frame():
    conv = _conversation()
    # Start inside the Metadata request: no SYN, half a frame, and no port given.
    start = next(i for i, p in enumerate(conv.packets) if p.payload.startswith(_exchanges()[1][0][:8]))
    packets = [p._replace(payload=p.payload[5:], seq=p.seq + 5) if i == start else p
               for i, p in enumerate(conv.packets) if i >= start]
    events, _ = _read(pcap(packets))
    # The cut request and its answer (to a request never seen) are skipped, and reported;
    # the Fetch after them is decoded.
    assert _exchanged(events) == [("Fetch", 2, False, ())]
    opened = next(e for e in events if e["kind"] == "open")
    assert opened["mid_stream"] and opened["broker"] == "10.0.0.2:9092"
    skipped = [e for e in events if e["kind"] == "skipped"]
    assert {e["direction"] for e in skipped} == {"request", "response"}
    assert all("mid-stream" in e["reason"] for e in skipped)
    assert "skipped" in format_line(skipped[0])


def test_bytes_the_capture_lost_are_reported_and_the_stream_resynchronises():
    conv = Conversation().handshake()
    exchanges = _exchanges()
    conv.send(True, exchanges[1][0])
    lost = conv.send(False, exchanges[1][1], mss=40)  # the client's ACK covers the lost piece
    conv.send(True, exchanges[2][0])
    conv.send(False, exchanges[2][1])
    conv.close()
    packets = [p for p in conv.packets if p is not lost[1]]
    events, stats = _read(pcap(packets))
    assert stats.lost_bytes == len(lost[1].payload)
    # The Metadata answer is gone (its request never answered), the Fetch after it decodes.
    assert _exchanged(events) == [("Fetch", 2, False, ()), ("Metadata", 1, True, ())] or \
        _exchanged(events) == [("Metadata", 1, True, ()), ("Fetch", 2, False, ())]
    assert [e["reason"] for e in events if e["kind"] == "skipped"] == [
        "the capture lost {} bytes".format(len(lost[1].payload))]


def test_broker_ports_given_leave_other_traffic_out():
    kafka = _conversation()
    other = Conversation(client=("10.0.0.1", 50001), broker=("10.0.0.3", 80), t=kafka.t).handshake()
    other.send(True, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    other.send(False, b"HTTP/1.1 200 OK\r\n\r\n")
    packets = sorted(kafka.packets + other.close().packets, key=lambda p: p.t)
    events, stats = _read(pcap(packets), ports={9092})
    assert {e["conn"] for e in events} == {"c1"} and _exchanged(events) == ALL_THREE
    # Without ports, the HTTP connection is recognised as not Kafka and only counted.
    events, stats = _read(pcap(packets))
    assert _exchanged(events) == ALL_THREE and stats.not_kafka == 1
    assert "connections carried no Kafka" in stats.text()


def test_a_tls_stream_is_reported_as_such():
    conv = Conversation(broker=("10.0.0.2", 9093)).handshake()
    conv.send(True, bytes.fromhex("160301012c010001280303") + bytes(280))
    conv.send(False, bytes.fromhex("160303007a020000760303") + bytes(100))
    events, _ = _read(pcap(conv.close().packets))
    tls = [e for e in events if e["kind"] == "undecodable"]
    assert len(tls) == 1 and tls[0]["tls"] and "TLS" in format_line(tls[0])
    assert _exchanged(events) == []


def test_a_request_pending_when_the_capture_ends_is_reported_unanswered():
    conv = Conversation().handshake()
    conv.send(True, _exchanges()[1][0])
    events, _ = _read(pcap(conv.packets))
    assert _exchanged(events) == [("Metadata", 1, True, ())]


def test_ports_reused_by_a_new_connection():
    first = _conversation()
    second = _conversation(t=first.t + 1, client_isn=77777, broker_isn=99999)
    events, _ = _read(pcap(first.packets + second.packets))
    assert _exchanged(events) == ALL_THREE * 2
    assert len({e["conn"] for e in events if e["kind"] == "exchange"}) == 2


# --- hostile files ---------------------------------------------------------------------------


def test_not_a_capture():
    for data in (b"", b"abc", b"GIF89a" + bytes(100), bytes(1000)):
        with pytest.raises(InvalidCaptureError, match="not a"):
            _read(data)


def test_a_record_claiming_a_huge_length_is_refused_at_once():
    data = bytearray(pcap(_conversation().packets))
    struct.pack_into("<I", data, 24 + 8, 0x7FFFFFFF)  # the first record's captured length
    with pytest.raises(InvalidCaptureError, match="2147483647 captured bytes"):
        _read(bytes(data))
    block = bytearray(pcapng(_conversation().packets))
    struct.pack_into("<I", block, 4, 0xFFFFFFF0)  # the section header's length
    with pytest.raises(InvalidCaptureError, match="block length"):
        _read(bytes(block))


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_a_capture_cut_anywhere_gives_a_report_or_a_clear_error(fmt):
    data = (pcap if fmt == "pcap" else pcapng)(_conversation().packets)
    for cut in range(0, len(data), 13):
        try:
            events, stats = _read(data[:cut])
        except InvalidCaptureError:
            continue
        assert all(e["kind"] in ("open", "close", "exchange", "skipped", "undecodable")
                   for e in events)
    events, stats = _read(data[:len(data) - 3])
    assert stats.truncated and "cut short" in stats.text()


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_flipped_bytes_never_crash_the_reader(fmt):
    data = (pcap if fmt == "pcap" else pcapng)(_conversation().packets)
    rng = random.Random(31)
    for _ in range(300):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        try:
            _read(bytes(mutated))
        except InvalidCaptureError:
            pass


def test_garbage_streams_give_no_exchanges_and_end():
    rng = random.Random(7)
    conv = Conversation().handshake()
    for _ in range(60):
        conv.send(True, rng.randbytes(20_000), mss=16_000)
        conv.send(False, rng.randbytes(5_000), mss=16_000)
    # And a stream that starts like Kafka, then claims a frame no capture could hold.
    conv.send(True, struct.pack(">ihhi", 0x7FFFFFF0, 1, 12, 5))
    events, _ = _read(pcap(conv.close().packets))
    assert _exchanged(events) == []


def test_a_stream_that_turns_to_zeros_is_reported_once_not_per_frame():
    conv = Conversation().handshake()
    request, response = _exchanges()[1]
    conv.send(True, request)
    conv.send(False, response)
    conv.send(True, bytes(200_000), mss=16_000)  # size prefixes of 0, again and again
    events, _ = _read(pcap(conv.close().packets))
    assert _exchanged(events) == [("Metadata", 1, False, ())]
    reports = [e for e in events if e["kind"] in ("undecodable", "skipped")]
    assert [(e["kind"], e["direction"]) for e in reports] == [("undecodable", "request"),
                                                              ("skipped", "request")]
    assert reports[0]["reason"] == "size prefix 0 is not a Kafka frame"
    assert reports[1]["bytes"] == 200_000


def test_obsolete_packet_blocks_are_read():
    conv = _conversation()
    data = bytearray(pcapng(conv.packets[:0]))  # the section and its interface
    for p in conv.packets:
        frame = link_frame(1, ip_packet(p))
        ts = round(p.t * 1e6)
        body = struct.pack("<HHIIII", 0, 0, ts >> 32, ts & 0xFFFFFFFF, len(frame), len(frame)) + frame
        body += b"\0" * (-len(body) % 4)
        data += struct.pack("<II", 2, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))
    events, _ = _read(bytes(data))
    assert _exchanged(events) == ALL_THREE
