"""Property tests of the sans-IO connection: any chunking gives the same responses, and
arbitrary bytes from a peer raise only kproto errors."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kproto import errors
from kproto.messages import HeartbeatRequest, HeartbeatResponse, MetadataRequest, MetadataResponse
from kproto.net.connection import Connection
from tests.unit.net.frames import drain, response_frame


def _exchange(conn: Connection, n: int):
    """n alternating Heartbeat v4 / Metadata v12 requests and their response frames."""
    sent, frames = [], []
    for i in range(n):
        if i % 2:
            ifr = conn.send(MetadataRequest(topics=[]), 12)
            reply = MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(
                node_id=i, host="h" * i, port=i)], topics=[])
            frames.append(response_frame(3, 12, ifr.correlation_id, reply))
        else:
            ifr = conn.send(HeartbeatRequest(group_id="g", generation_id=i), 4)
            frames.append(response_frame(12, 4, ifr.correlation_id, HeartbeatResponse(error_code=i)))
        sent.append(ifr)
    drain(conn)
    return sent, b"".join(frames)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 6), cuts=st.lists(st.integers(0, 2000), max_size=12))
def test_any_chunking_yields_the_same_responses_in_order(n, cuts):
    conn = Connection("n", max_in_flight_requests=6)
    sent, data = _exchange(conn, n)
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    got = []
    for a, b in zip(bounds, bounds[1:]):
        got += conn.receive(data[a:b])
    assert [ifr for ifr, _ in got] == sent
    for i, (_, response) in enumerate(got):
        if i % 2:
            assert response.brokers[0].node_id == i
        else:
            assert response.error_code == i
    assert conn.in_flight_count == 0


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200), prefix=st.booleans())
def test_arbitrary_peer_bytes_raise_only_kproto_errors(data, prefix):
    conn = Connection("n", receive_message_max_bytes=10_000)
    sent, _ = _exchange(conn, 2)
    if prefix:  # a well-formed frame header around garbage, so the decoders see it
        data = struct.pack(">ii", 4 + len(data), sent[0].correlation_id) + data
    try:
        conn.receive(data)
    except errors.KafkaError:
        pass


def _api_versions_bodies() -> list[bytes]:
    """Valid ApiVersions answers in every layout a peer may send: v0 and v3 (flexible)
    encodings, the KIP-511 fallback, and librdkafka's mock layout (one-byte count)."""
    from kproto.messages import ApiVersionsResponse

    entries = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=v)
               for k, v in ((0, 10), (1, 16), (3, 12), (18, 4))]
    mock = struct.pack(">hB", 0, 3) + b"".join(
        struct.pack(">hhh", *e) for e in ((0, 0, 10), (1, 0, 16), (18, 0, 3))) + b"\x00" * 4
    return [ApiVersionsResponse(error_code=0, api_keys=entries).encode(0),
            ApiVersionsResponse(error_code=0, api_keys=entries).encode(3),
            ApiVersionsResponse(error_code=35, api_keys=entries[-1:]).encode(0),
            bytes.fromhex("0023" "01" "0012" "0000" "0003" "00000000"),
            mock]


def _feed_api_versions(version: int, body: bytes) -> None:
    from kproto.messages import ApiVersionsRequest

    conn = Connection("n", receive_message_max_bytes=10_000)
    ifr = conn.send(ApiVersionsRequest(), version)
    drain(conn)
    try:
        for _, response in conn.receive(struct.pack(">ii", 4 + len(body), ifr.correlation_id)
                                        + body):
            # What the client reads from an answer it accepted must be plain numbers.
            for k in response.api_keys:
                assert all(isinstance(x, int) for x in (k.api_key, k.min_version, k.max_version))
    except errors.KafkaError:
        pass


def test_every_byte_flip_and_truncation_of_api_versions_answers():
    # The fallback paths (KIP-511 v0 body, the mock's layout) parse bytes a peer chose:
    # every mutation of a valid answer gives an answer or a kproto error, nothing else.
    for body in _api_versions_bodies():
        for version in (0, 3, 4):
            for i in range(len(body)):
                for flip in (0x01, 0x80, 0xFF):
                    mutated = bytearray(body)
                    mutated[i] ^= flip
                    _feed_api_versions(version, bytes(mutated))
                _feed_api_versions(version, body[:i])


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=120), version=st.sampled_from([0, 1, 2, 3, 4]))
def test_arbitrary_api_versions_answers_raise_only_kproto_errors(body, version):
    _feed_api_versions(version, body)
