"""The sans-IO connection: framing, partial I/O, correlation, in-flight limits, the trace.

A tiny in-memory "broker" below reads request frames and writes response frames, so each
test is a deterministic byte-level exchange with no sockets.
"""

from __future__ import annotations

import logging
import struct

import pytest

from kproto import errors
from kproto.messages import (ApiVersionsRequest, ApiVersionsResponse, HeartbeatRequest,
                             HeartbeatResponse, MetadataRequest, MetadataResponse)
from kproto.net.connection import Connection, ProtocolState
from tests.unit.net.frames import drain, response_frame


def split_frames(data: bytes) -> list[bytes]:
    frames, pos = [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        frames.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    assert pos == len(data)
    return frames


def request_ids(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the first fields of every request header."""
    return struct.unpack_from(">hhi", frame, 0)


def heartbeat_response(code: int = 0) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=code)


def send_heartbeats(conn: Connection, n: int, version: int = 4) -> list:
    return [conn.send(HeartbeatRequest(group_id="g", generation_id=i, member_id="m"), version)
            for i in range(n)]


def test_request_frame_written_one_byte_at_a_time_is_the_whole_frame():
    conn = Connection("n1", client_id="kproto-test")
    conn.send(ApiVersionsRequest(client_software_name="kproto", client_software_version="1"), 3)
    whole = bytes(conn.pending_output())
    assert drain(conn, chunk=1) == whole
    assert not conn.has_pending_output()
    (frame,) = split_frames(whole)
    assert request_ids(frame) == (18, 3, 0)
    # v2 request header: client id is a (non-compact) string after the correlation id.
    (id_len,) = struct.unpack_from(">h", frame, 8)
    assert frame[10:10 + id_len] == b"kproto-test"


def test_response_fed_byte_at_a_time_completes_only_on_its_last_byte():
    conn = Connection("n1")
    ifr = conn.send(ApiVersionsRequest(), 3)
    drain(conn)
    reply = ApiVersionsResponse(error_code=0, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=1, min_version=4, max_version=17)])
    data = response_frame(18, 3, ifr.correlation_id, reply)
    for i in range(len(data) - 1):
        assert conn.receive(data[i:i + 1]) == []
    ((done, response),) = conn.receive(data[-1:])
    assert done is ifr
    assert response.api_keys[0].max_version == 17
    assert conn.in_flight_count == 0


def test_flexible_response_header_fed_byte_at_a_time():
    conn = Connection("n1")
    ifr = conn.send(MetadataRequest(topics=None), 12)
    drain(conn)
    reply = MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(
        node_id=3, host="h", port=9092)], topics=[])
    data = response_frame(3, 12, ifr.correlation_id, reply)
    got = []
    for b in data:
        got += conn.receive(bytes([b]))
    ((done, response),) = got
    assert done is ifr and response.brokers[0].node_id == 3


def test_several_responses_in_one_read_and_a_partial_one_after_them():
    conn = Connection("n1", max_in_flight_requests=5)
    sent = send_heartbeats(conn, 3)
    frames = split_frames(drain(conn))
    assert [request_ids(f)[2] for f in frames] == [0, 1, 2]
    data = b"".join(response_frame(12, 4, i, heartbeat_response(i)) for i in range(3))
    cut = len(data) - 3
    first = conn.receive(data[:cut])
    assert [ifr for ifr, _ in first] == sent[:2]
    assert [r.error_code for _, r in first] == [0, 1]
    ((last, response),) = conn.receive(data[cut:])
    assert last is sent[2] and response.error_code == 2


def test_response_to_a_newer_request_first_is_a_correlation_error():
    conn = Connection("n1")
    sent = send_heartbeats(conn, 2)
    drain(conn)
    with pytest.raises(errors.CorrelationIdError) as info:
        conn.receive(response_frame(12, 4, sent[1].correlation_id, heartbeat_response()))
    assert "oldest request in flight is 0" in str(info.value)
    assert isinstance(info.value, errors.ProtocolError)
    # The caller closes the connection; both requests come back to be failed.
    assert conn.close() == sent
    with pytest.raises(errors.IllegalStateError):
        conn.receive(b"\x00")
    with pytest.raises(errors.IllegalStateError):
        send_heartbeats(conn, 1)


def test_response_with_nothing_in_flight_is_a_correlation_error():
    conn = Connection("n1")
    with pytest.raises(errors.CorrelationIdError):
        conn.receive(response_frame(12, 4, 0, heartbeat_response()))


@pytest.mark.parametrize("size", [1001, 2**31 - 1, -1, 0, 3])
def test_bad_frame_size_is_refused_from_its_prefix_alone(size):
    conn = Connection("n1", receive_message_max_bytes=1000)
    send_heartbeats(conn, 1)
    drain(conn)
    # Only the 4-byte prefix is fed: the refusal cannot depend on buffering the body.
    with pytest.raises(errors.InvalidReceiveError):
        conn.receive(struct.pack(">i", size))


@pytest.mark.parametrize("record, kind", [
    # What Kafka 4.4's SSL listener answers a plaintext ApiVersions request (measured).
    (bytes.fromhex("15030300020250"), "alert"),
    (bytes.fromhex("160303007a02"), "handshake"),
    (bytes.fromhex("15030100020228"), "alert"),
])
def test_a_tls_record_where_a_frame_should_be_is_a_tls_listener(record, kind):
    """A plaintext connection to a TLS listener: the record header read as a frame size
    is hundreds of MB; the header says what it is (a verdict, never a network blip)."""
    conn = Connection("n1")
    send_heartbeats(conn, 1)
    drain(conn)
    with pytest.raises(errors.SslAuthenticationError,
                       match=r"node n1 answered in TLS \(a {} record, {}\): it is a TLS listener".format(
                           kind, record[:4].hex(" "))) as raised:
        conn.receive(record)
    assert isinstance(raised.value, errors.AuthenticationError) and not raised.value.retriable


@pytest.mark.parametrize("prefix", [b"\x15\x05\x00\x00", b"\x30\x03\x03\x00", b"\x16\x03\x09\x00"])
def test_an_oversized_frame_that_is_no_tls_record_stays_invalid_receive(prefix):
    conn = Connection("n1")
    send_heartbeats(conn, 1)
    drain(conn)
    with pytest.raises(errors.InvalidReceiveError):
        conn.receive(prefix)


def test_memory_follows_the_bytes_received_not_the_declared_size():
    import tracemalloc

    conn = Connection("n1")  # default limit: 100 MiB
    ifr = send_heartbeats(conn, 1)[0]
    drain(conn)
    tracemalloc.start()
    try:
        # A peer declares a 90 MiB frame and sends a few bytes of it, one at a time.
        conn.receive(struct.pack(">ii", 90 * 1024 * 1024, ifr.correlation_id))
        for _ in range(100):
            conn.receive(b"\x00")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024
    assert conn.in_flight_count == 1  # still waiting for the rest


def test_frame_at_the_limit_is_accepted():
    conn = Connection("n1", receive_message_max_bytes=1000)
    ifr = send_heartbeats(conn, 1)[0]
    drain(conn)
    data = response_frame(12, 4, ifr.correlation_id, heartbeat_response())
    conn.receive_message_max_bytes = len(data) - 4
    assert len(conn.receive(data)) == 1


def test_in_flight_limit():
    conn = Connection("n1", max_in_flight_requests=2)
    sent = send_heartbeats(conn, 2)
    assert not conn.can_send_more()
    with pytest.raises(errors.TooManyInFlightRequests):
        send_heartbeats(conn, 1)
    drain(conn)
    conn.receive(response_frame(12, 4, sent[0].correlation_id, heartbeat_response()))
    assert conn.can_send_more()
    (third,) = send_heartbeats(conn, 1)
    assert third.correlation_id == 2


def test_version_outside_the_message_class_is_refused():
    conn = Connection("n1")
    with pytest.raises(errors.UnsupportedVersionError):
        conn.send(HeartbeatRequest(group_id="g"), HeartbeatRequest.max_version + 1)
    assert conn.in_flight_count == 0 and not conn.has_pending_output()


def test_correlation_ids_wrap_at_int32():
    conn = Connection("n1", first_correlation_id=2**31 - 1)
    a, b = send_heartbeats(conn, 2)
    assert (a.correlation_id, b.correlation_id) == (2**31 - 1, 0)
    drain(conn)
    conn.receive(response_frame(12, 4, a.correlation_id, heartbeat_response()))
    ((done, _),) = conn.receive(response_frame(12, 4, 0, heartbeat_response()))
    assert done is b


def test_api_versions_answered_in_the_v0_format_is_decoded_kip_511():
    # A broker that lacks ApiVersions v3 answers in v0 format with UNSUPPORTED_VERSION and
    # the versions it has (what librdkafka's mock cluster and Kafka brokers do).
    conn = Connection("n1")
    ifr = conn.send(ApiVersionsRequest(client_software_name="kproto"), 3)
    drain(conn)
    fallback = ApiVersionsResponse(error_code=35, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)])
    body = fallback.encode(0)
    frame = struct.pack(">ii", 4 + len(body), ifr.correlation_id) + body  # header v0 always
    ((_, response),) = conn.receive(frame)
    assert response.error_code == 35
    assert [(k.api_key, k.max_version) for k in response.api_keys] == [(18, 2)]


def test_garbage_body_is_a_corrupt_message_error():
    conn = Connection("n1")
    ifr = conn.send(MetadataRequest(topics=None), 12)
    drain(conn)
    body = b"\xff" * 9
    with pytest.raises(errors.CorruptMessageError):
        conn.receive(struct.pack(">ii", 5 + len(body), ifr.correlation_id) + b"\x00" + body)


def test_expired_requests_and_next_deadline():
    conn = Connection("n1")
    a = conn.send(HeartbeatRequest(group_id="g"), 4, now_ms=1000, timeout_ms=500)
    b = conn.send(HeartbeatRequest(group_id="g"), 4, now_ms=1100, timeout_ms=100)
    assert conn.next_deadline_ms() == 1200
    assert conn.expired(1199) == []
    assert conn.expired(1200) == [b]
    assert conn.expired(1500) == [a, b]


def test_wire_trace_logs_field_trees(caplog):
    conn = Connection("n7")
    with caplog.at_level(logging.DEBUG, logger="kproto.wire"):
        ifr = conn.send(HeartbeatRequest(group_id="grp", generation_id=5, member_id="m-1"), 4)
        drain(conn)
        conn.receive(response_frame(12, 4, ifr.correlation_id, heartbeat_response(27)))
    out, back = [r.getMessage() for r in caplog.records if r.name == "kproto.wire"]
    assert out.startswith(">> node=n7 HeartbeatRequest v4 correlation_id=0")
    assert "'group_id': 'grp'" in out and "'generation_id': 5" in out
    assert back.startswith("<< node=n7 HeartbeatResponse v4 correlation_id=0")
    assert "'error_code': 27" in back


def test_wire_trace_is_silent_above_debug(caplog):
    conn = Connection("n7")
    with caplog.at_level(logging.INFO, logger="kproto.wire"):
        send_heartbeats(conn, 1)
    assert not [r for r in caplog.records if r.name == "kproto.wire"]


def test_librdkafka_mock_api_versions_layouts_are_decoded():
    # Bytes measured from librdkafka 2.x's mock cluster: error code, a one-byte array count,
    # entries of three int16 without tagged fields, a 4-byte throttle time.
    fallback = bytes.fromhex("0023" "01" "0012" "0000" "0003" "00000000")
    conn = Connection("n1")
    ifr = conn.send(ApiVersionsRequest(), 4)
    drain(conn)
    frame = struct.pack(">ii", 4 + len(fallback), ifr.correlation_id) + fallback
    ((_, response),) = conn.receive(frame)
    assert response.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 3)]
    # Its answer to v3 (when it supports v3) has the same layout with error 0.
    entries = [(0, 0, 10), (1, 0, 16), (18, 0, 3)]
    ok = struct.pack(">hB", 0, len(entries)) + b"".join(
        struct.pack(">hhh", *e) for e in entries) + b"\x00" * 4
    ifr = conn.send(ApiVersionsRequest(), 3)
    drain(conn)
    ((_, response),) = conn.receive(struct.pack(">ii", 4 + len(ok), ifr.correlation_id) + ok)
    assert response.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == entries


def test_unparseable_api_versions_body_is_still_a_corrupt_message_error():
    conn = Connection("n1")
    ifr = conn.send(ApiVersionsRequest(), 3)
    drain(conn)
    body = b"\x00\x00\x05\x01\x02"
    with pytest.raises(errors.CorruptMessageError):
        conn.receive(struct.pack(">ii", 4 + len(body), ifr.correlation_id) + body)


def test_trailing_bytes_after_a_response_are_refused_only_when_strict():
    for strict in (False, True):
        conn = Connection("n1", strict=strict)
        ifr = conn.send(HeartbeatRequest(group_id="g"), 4)
        drain(conn)
        frame = bytearray(response_frame(12, 4, ifr.correlation_id, heartbeat_response()))
        frame += b"\x00"
        frame[0:4] = struct.pack(">i", len(frame) - 4)
        if strict:
            with pytest.raises(errors.CorruptMessageError):
                conn.receive(bytes(frame))
        else:
            ((_, response),) = conn.receive(bytes(frame))
            assert response.error_code == 0


def test_reconnect_backoff_grows_with_jitter_inside_its_bounds():
    import random

    from kproto.net.broker import reconnect_backoff_ms

    rng = random.Random(4)
    for failures in range(1, 12):
        values = {reconnect_backoff_ms(failures, 50, 1000, rng) for _ in range(50)}
        assert all(50 <= v <= 1000 for v in values)
        if failures <= 3:
            assert len(values) > 1  # jittered, not a constant
    assert max(reconnect_backoff_ms(1, 50, 1000, rng) for _ in range(50)) <= 60
    assert min(reconnect_backoff_ms(10, 50, 1000, rng) for _ in range(50)) == 1000


def test_answers_before_a_bad_frame_are_not_lost():
    conn = Connection("n1")
    sent = send_heartbeats(conn, 3)
    drain(conn)
    good = response_frame(12, 4, sent[0].correlation_id, heartbeat_response(7))
    wrong = response_frame(12, 4, sent[2].correlation_id, heartbeat_response())
    with pytest.raises(errors.CorrelationIdError) as info:
        conn.receive(good + wrong)
    ((ifr, response),) = info.value.completed
    assert ifr is sent[0] and response.error_code == 7
    assert conn.close() == sent[1:]


def test_a_frame_that_fails_to_decode_leaves_its_request_in_flight():
    conn = Connection("n1")
    ifr = conn.send(MetadataRequest(topics=None), 12)
    drain(conn)
    body = b"\x00" + b"\xff" * 9
    with pytest.raises(errors.CorruptMessageError) as info:
        conn.receive(struct.pack(">ii", 4 + len(body), ifr.correlation_id) + body)
    assert info.value.completed == []
    assert conn.close() == [ifr]


# --- the ERROR state (h11's): a connection that hit a protocol error stays broken ----------

def _wrong_correlation(sent):
    return response_frame(12, 4, sent[1].correlation_id, heartbeat_response())


def _oversized_frame(sent):
    return struct.pack(">i", 2**31 - 1)


def _undecodable_body(sent):
    body = b"\xff" * 9  # not a Heartbeat v4 body
    return struct.pack(">ii", 5 + len(body), sent[0].correlation_id) + b"\x00" + body


@pytest.mark.parametrize("broken, error", [
    (_wrong_correlation, errors.CorrelationIdError),
    (_oversized_frame, errors.InvalidReceiveError),
    (_undecodable_body, errors.CorruptMessageError),
])
def test_a_protocol_error_moves_the_connection_to_error_for_good(broken, error):
    conn = Connection("n1")
    sent = send_heartbeats(conn, 2)
    drain(conn)
    assert conn.state is ProtocolState.OPEN
    with pytest.raises(error) as first:
        conn.receive(broken(sent))
    assert conn.state is ProtocolState.ERROR and conn.error is first.value
    assert not conn.can_send_more()
    # The answer the oldest request waits for, well formed: a sound connection would take
    # it, a broken one must not read on from wherever the bad frame left the stream.
    good = response_frame(12, 4, sent[0].correlation_id, heartbeat_response())
    for attempt in (lambda: conn.receive(good), lambda: conn.receive(b""),
                    lambda: send_heartbeats(conn, 1), lambda: conn.receive(good)):
        with pytest.raises(error) as again:
            attempt()
        assert again.value is first.value and again.value.completed == []
        assert conn.state is ProtocolState.ERROR
    assert not conn.has_pending_output()  # the refused send queued nothing
    # The shell closes it: every request it carried comes back to be failed.
    assert conn.close() == sent
    assert conn.state is ProtocolState.CLOSED
    with pytest.raises(errors.IllegalStateError):
        conn.receive(good)


def test_errors_of_the_caller_leave_the_connection_open():
    conn = Connection("n1", max_in_flight_requests=1)
    with pytest.raises(errors.UnsupportedVersionError):
        conn.send(HeartbeatRequest(group_id="g", generation_id=0, member_id="m"), 99)
    send_heartbeats(conn, 1)
    with pytest.raises(errors.TooManyInFlightRequests):
        send_heartbeats(conn, 1)
    assert conn.state is ProtocolState.OPEN and conn.error is None
