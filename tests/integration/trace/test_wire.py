"""kproto trace, below the proxy loop: framing, address rewriting, garbage and backpressure.

The splitter and the rewriter are sans-IO and tested directly; the rewriting table is
checked against Kafka's schemas (spec/). TLS toward the upstream is checked through the
TLS-terminating test proxy in front of a mock broker. Garbage and backpressure run the real proxy
between a raw socket client and a raw socket peer started here (the peer only records and
sends bytes: what is under test is that the proxy passes bytes unchanged and bounds its
memory), then a real broker behind the same proxy still answers.
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import socket
import ssl
import struct
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.messages import ApiVersionsRequest, MetadataRequest, MetadataResponse
from kproto.protocol.base import add_unknown_tag
from kproto.tools.trace.decode import decode_response
from kproto.tools.trace.frames import FrameSplitter
from kproto.tools.trace.proxy import TraceProxy
from kproto.tools.trace.rewrite import ENDPOINT_FIELDS, NOT_CLIENT_ENDPOINTS, rewrite_response
from tests.brokers._net import recv_exact
from tests.brokers.proxy import BrokerProxy
from tests.brokers.raw import encode_frame, roundtrip
from tests.support.certs import make_cert

SPEC = pathlib.Path(__file__).resolve().parents[3] / "spec"


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=8), st.data())
def test_splitter_gives_the_same_frames_however_the_stream_is_cut(bodies, data):
    stream = b"".join(_frame(b) for b in bodies)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    splitter, got, last = FrameSplitter(), [], 0
    for cut in cuts + [len(stream)]:
        got += [(framed, bytes(view)) for framed, view in splitter.feed(stream[last:cut])]
        last = cut
    assert got == [(True, _frame(b)) for b in bodies]
    assert splitter.buffered == 0


def test_splitter_passes_an_unframeable_stream_through_raw():
    splitter = FrameSplitter(max_frame_bytes=1000)
    good = _frame(b"abc")
    pieces = splitter.feed(good + struct.pack(">i", -5) + b"garbage")
    assert [(f, bytes(v)) for f, v in pieces] == [(True, good), (False, struct.pack(">i", -5) + b"garbage")]
    assert "not a Kafka frame" in splitter.broken
    assert [(f, bytes(v)) for f, v in splitter.feed(b"more")] == [(False, b"more")]


def _spec_endpoint_apis() -> set[int]:
    """API keys whose response schema has a struct with both Host and Port fields."""
    found = set()

    def walk(fields) -> bool:
        names = {f["name"] for f in fields}
        hit = {"Host", "Port"} <= names
        for f in fields:
            hit = walk(f.get("fields", [])) or hit
        return hit

    for path in SPEC.glob("*Response.json"):
        schema = json.loads(re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M))
        if walk(schema.get("fields", [])) or any(walk(s.get("fields", []))
                                                 for s in schema.get("commonStructs", [])):
            found.add(schema["apiKey"])
    return found


def test_every_response_with_host_and_port_is_either_rewritten_or_explained():
    in_spec = _spec_endpoint_apis()
    assert in_spec == set(ENDPOINT_FIELDS) | set(NOT_CLIENT_ENDPOINTS)
    assert not set(ENDPOINT_FIELDS) & set(NOT_CLIENT_ENDPOINTS)


def _metadata_response() -> MetadataResponse:
    broker = MetadataResponse.MetadataResponseBroker(node_id=7, host="10.0.0.7", port=9092, rack="r1")
    add_unknown_tag(broker, 99, b"\x01\x02\x03")
    response = MetadataResponse(brokers=[broker], cluster_id="c", controller_id=7)
    add_unknown_tag(response, 42, b"keep me")
    return response


def test_rewriting_changes_only_the_addresses_and_keeps_unknown_tagged_fields():
    version = 12
    body = _metadata_response().encode(version) + b"\x00"  # a trailing byte, as the mock sends
    decoded = MetadataResponse.decode(body, version, allow_trailing=True)
    new_body, changes, problem = rewrite_response(3, version, decoded, memoryview(body),
                                                  lambda host, port: ("127.0.0.1", 40001))
    assert problem is None and changes == [("10.0.0.7:9092", "127.0.0.1:40001")]
    assert new_body.endswith(b"\x00")
    again = MetadataResponse.decode(new_body, version, allow_trailing=True)
    expected = _metadata_response()
    expected.brokers[0].host, expected.brokers[0].port = "127.0.0.1", 40001
    assert again == expected
    assert again._unknown_tagged_fields == [(42, b"keep me")]
    assert again.brokers[0]._unknown_tagged_fields == [(99, b"\x01\x02\x03")]


def test_an_answer_that_does_not_re_encode_to_its_bytes_is_left_alone():
    version = 12
    body = bytearray(_metadata_response().encode(version))
    decoded = MetadataResponse.decode(bytes(body), version)
    body[-1] ^= 0xFF  # what the broker "sent" differs from what decoding+encoding gives
    new_body, changes, problem = rewrite_response(3, version, decoded, memoryview(body),
                                                  lambda host, port: ("127.0.0.1", 1))
    assert new_body is None and changes == [] and "does not give back" in problem


def test_nothing_is_re_encoded_when_no_address_changes():
    version = 12
    body = _metadata_response().encode(version)
    decoded = MetadataResponse.decode(body, version)
    assert rewrite_response(3, version, decoded, memoryview(body), lambda h, p: (h, p)) == (None, [], None)


class _Peer:
    """A raw TCP peer on 127.0.0.1: records what it receives, sends what it is told to."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = self.server.getsockname()
        self.received = bytearray()
        self.sent = 0
        self.conn: socket.socket | None = None
        self.errors: list[BaseException] = []
        self._accepted = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            self.conn, _ = self.server.accept()
            self._accepted.set()
            while True:
                data = self.conn.recv(65536)
                if not data:
                    return
                self.received += data
        except OSError:
            return

    def send_all(self, data: bytes, chunk: int = 65536) -> None:
        assert self._accepted.wait(10)
        try:
            for i in range(0, len(data), chunk):
                self.conn.sendall(data[i:i + chunk])
                self.sent += len(data[i:i + chunk])
        except OSError as exc:
            self.errors.append(exc)

    def close(self) -> None:
        for s in (self.conn, self.server):
            if s is not None:
                s.close()


def _wait(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_garbage_frames_pass_through_unchanged_and_are_reported():
    peer = _Peer()
    events: list[dict] = []
    unknown_api = struct.pack(">hhi", 999, 0, 1) + b"\xff" * 10  # API key 999 does not exist
    truncated = struct.pack(">hhih", 1, 12, 2, -1) + b"\x00"  # Fetch v12 with a cut-off body
    valid = encode_frame(ApiVersionsRequest(), 3, correlation_id=3)
    broken = struct.pack(">i", -7) + b"not kafka at all"
    request_bytes = _frame(unknown_api) + _frame(truncated) + _frame(valid) + broken
    reply = _frame(struct.pack(">i", 3) + b"\x99\x99")  # answers the ApiVersions with junk
    with TraceProxy(peer.address, events.append) as proxy:
        client = socket.create_connection(("127.0.0.1", int(proxy.bootstrap_servers.rsplit(":", 1)[1])))
        for i in range(0, len(request_bytes), 7):  # in small pieces, frames split across reads
            client.sendall(request_bytes[i:i + 7])
        _wait(lambda: bytes(peer.received) == request_bytes)
        peer.send_all(reply + b"\x00\x00")  # and a partial frame left hanging
        assert recv_exact(client, len(reply)) == reply
        client.close()
        _wait(lambda: any(e["kind"] == "close" for e in events))
    peer.close()
    assert proxy.failure is None
    undecodable = [e for e in events if e["kind"] == "undecodable"]
    assert [e["direction"] for e in undecodable] == ["request", "request"]
    assert "unknown API key 999" in undecodable[0]["reason"]
    assert "not a Kafka frame" in undecodable[1]["reason"]
    exchanges = [e for e in events if e["kind"] == "exchange"]
    by_api = {e["api"]: e for e in exchanges}
    assert "CorruptMessageError" in by_api["Fetch"]["request_error"] and by_api["Fetch"]["unanswered"]
    assert "CorruptMessageError" in by_api["ApiVersions"]["response_error"]


def test_a_slow_client_makes_the_proxy_stop_reading_the_broker():
    peer = _Peer()
    limit = 512 * 1024
    frame = _frame(struct.pack(">i", 1) + bytes(range(256)) * 256)  # 64 KiB frames
    total = 48 * 1024 * 1024
    payload = frame * (total // len(frame))
    with TraceProxy(peer.address, lambda e: None, buffer_limit=limit) as proxy:
        client = socket.create_connection(("127.0.0.1", int(proxy.bootstrap_servers.rsplit(":", 1)[1])))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        client.sendall(_frame(encode_frame(ApiVersionsRequest(), 3, correlation_id=1)))
        _wait(lambda: len(peer.received) > 0)
        sender = threading.Thread(target=peer.send_all, args=(payload,), daemon=True)
        sender.start()
        # The client reads nothing: wait until the sender is stuck (no progress for a while).
        last, still = -1, 0
        while still < 20:
            time.sleep(0.05)
            still = still + 1 if peer.sent == last else 0
            last = peer.sent
        held = proxy.buffered_bytes()
        assert peer.sent < len(payload)
        # At most the bound plus one read and one frame being assembled.
        assert held <= limit + 256 * 1024 + len(frame)
        received = bytearray()
        while len(received) < len(payload):
            chunk = client.recv(1 << 20)
            assert chunk
            received += chunk
        sender.join(30)
        assert not peer.errors
        assert bytes(received) == payload
        client.close()
    peer.close()
    assert proxy.failure is None


def test_a_broker_behind_the_proxy_still_answers_after_garbage(mock_cluster):
    events: list[dict] = []
    with TraceProxy(mock_cluster.addresses[0], events.append) as proxy:
        address = ("127.0.0.1", int(proxy.bootstrap_servers.rsplit(":", 1)[1]))
        junk = socket.create_connection(address)
        junk.sendall(_frame(struct.pack(">hhi", 999, 0, 1)))
        junk.close()
        response = roundtrip(address, MetadataRequest(topics=[]), 12, allow_trailing=True)
    # The brokers named are the proxy's own ports, one per broker of the cluster.
    assert {b.port for b in response.brokers} == {
        int(a.rsplit(":", 1)[1]) for a in proxy.listeners.values()}
    assert len(proxy.listeners) == mock_cluster.broker_count
    metadata = [e for e in events if e["kind"] == "exchange" and e["api"] == "Metadata"]
    assert metadata and metadata[0]["rewritten"]
    assert any(e["kind"] == "undecodable" for e in events)


def test_response_decoding_reports_a_short_frame():
    assert decode_response(memoryview(b"\x00\x00\x00\x02\x00\x01"), 3, 12).error


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_toward_the_upstream(mock_cluster_factory, tmp_path):
    cert, key = make_cert(tmp_path, "localhost", "DNS:localhost")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    cluster = mock_cluster_factory(1)
    events: list[dict] = []
    with BrokerProxy(cluster.addresses[0], server) as terminator:
        client_side = ssl.create_default_context(cafile=cert)
        with TraceProxy(("localhost", terminator.port), events.append,
                        ssl_context=client_side) as proxy:
            address = ("127.0.0.1", int(proxy.bootstrap_servers.rsplit(":", 1)[1]))
            response = roundtrip(address, MetadataRequest(topics=[]), 12, allow_trailing=True)
    assert not terminator.handshake_errors
    # The request crossed TLS (the terminator saw it) and the answer came back decoded.
    assert [r.api_key for r in terminator.requests()] == [3]
    assert len(response.brokers) == 1
    (metadata,) = [e for e in events if e["kind"] == "exchange"]
    assert metadata["api"] == "Metadata" and not metadata.get("response_error")
