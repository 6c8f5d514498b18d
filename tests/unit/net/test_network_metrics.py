"""Network metrics without a broker: the sans-IO Connection's frame accounting, the
BrokerConnection hook sites over a socketpair, and SelectorMetrics on a fake clock."""

from __future__ import annotations

import inspect
import math
import socket
import struct

import pytest

from kproto.messages import FetchRequest, FetchResponse, MetadataRequest, MetadataResponse
from kproto.metrics import MetricConfig, Metrics
from kproto.metrics.selector_metrics import SelectorMetrics, selector_metrics
from kproto.metrics.stats import Avg
from kproto.net.broker import BrokerConnection, ConnectionState
from kproto.net.config import NetworkClientConfig
from kproto.net.connection import Connection
from kproto.net.network_listener import NetworkListener

from tests.support.clock import FakeClock

METADATA_V = 3  # not flexible: response header v0 (just the correlation id)
FETCH_V = 4


class Events(NetworkListener):
    """A listener that keeps every call, in order."""

    def __init__(self):
        self.calls = []

    def __getattribute__(self, name):
        if name in NetworkListener.__dict__ and not name.startswith("_"):
            calls = object.__getattribute__(self, "calls")
            return lambda *args: calls.append((name,) + args)
        return object.__getattribute__(self, name)

    def of(self, kind):
        return [c[1:] for c in self.calls if c[0] == kind]


def response_frame(correlation_id, response, version):
    body = struct.pack(">i", correlation_id) + response.encode(version)
    return struct.pack(">i", len(body)) + body


# --- sans-IO Connection -----------------------------------------------------------------

def test_advance_output_hands_back_requests_whose_frames_are_fully_written():
    conn = Connection(1)
    first = conn.send(MetadataRequest(topics=None), METADATA_V)
    second = conn.send(FetchRequest(max_wait_ms=5), FETCH_V)
    out = bytes(conn.pending_output())
    assert len(out) == first.size  # one frame at a time, size prefix included
    assert struct.unpack(">i", out[:4])[0] == first.size - 4
    assert conn.advance_output(first.size - 1) == []
    assert conn.advance_output(1) == [first]
    rest = bytes(conn.pending_output())
    assert len(rest) == second.size
    # Finishing one frame and starting the next in one write.
    assert conn.advance_output(second.size) == [second]
    assert conn.advance_output(0) == [] and not conn.has_pending_output()


def test_response_size_is_the_whole_frame():
    conn = Connection(1)
    ifr = conn.send(MetadataRequest(topics=None), METADATA_V)
    frame = response_frame(ifr.correlation_id, MetadataResponse(throttle_time_ms=7), METADATA_V)
    (got, response), = conn.receive(frame)
    assert got is ifr and got.response_size == len(frame)
    assert response.throttle_time_ms == 7


def test_closed_connection_forgets_unwritten_frames():
    conn = Connection(1)
    conn.send(MetadataRequest(topics=None), METADATA_V)
    conn.close()
    assert conn.advance_output(0) == [] and not conn.has_pending_output()


# --- BrokerConnection hook sites over a socketpair ----------------------------------------

@pytest.fixture
def wired():
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.settimeout(5)
    events = Events()
    node = BrokerConnection(7, "127.0.0.1", 0, NetworkClientConfig(), None)
    node.listener = events
    node.sock = ours
    node.connected(Connection(7), now_ms=1000.0)
    yield node, peer, events
    node.close(0.0, failed=False)
    peer.close()


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "peer closed"
        data += chunk
    return data


def test_bytes_and_frames_counted_where_the_socket_moves_them(wired):
    node, peer, events = wired
    assert events.calls == [("connection_created", 7)]
    metadata = node.proto.send(MetadataRequest(topics=None), METADATA_V, now_ms=1000.0)
    fetch = node.proto.send(FetchRequest(max_wait_ms=5), FETCH_V, now_ms=1000.0)
    node.write(1000.0)
    written = recv_exactly(peer, metadata.size + fetch.size)
    assert sum(n for _, n in events.of("bytes_sent")) == len(written)
    assert events.of("request_sent") == [(7, MetadataRequest.api_key, metadata.size),
                                         (7, FetchRequest.api_key, fetch.size)]

    frames = [response_frame(metadata.correlation_id, MetadataResponse(throttle_time_ms=3), METADATA_V),
              response_frame(fetch.correlation_id, FetchResponse(throttle_time_ms=5), FETCH_V)]
    peer.sendall(b"".join(frames))
    received = []
    while len(received) < 2:
        pairs, error = node.read(1250.0)
        assert error is None
        received.extend(pairs)
    assert sum(n for _, n in events.of("bytes_received")) == sum(map(len, frames))
    assert events.of("response_received") == [
        (7, MetadataResponse.api_key, len(frames[0]), 250.0, 3),
        (7, FetchResponse.api_key, len(frames[1]), 250.0, 5)]


def test_close_reports_only_established_connections(wired):
    node, peer, events = wired
    node.close(0.0, failed=True)
    node.close(0.0, failed=True)  # already closed: nothing more
    assert events.of("connection_closed") == [(7,)]
    never = BrokerConnection(8, "127.0.0.1", 0, NetworkClientConfig(), None)
    never.listener = events
    never.close(0.0, failed=True)  # a connection that was never established
    assert events.of("connection_closed") == [(7,)] and never.state is ConnectionState.DISCONNECTED


def test_bytes_read_before_a_broken_frame_are_counted(wired):
    node, peer, events = wired
    node.proto.send(MetadataRequest(topics=None), METADATA_V)
    bad = struct.pack(">i", -5)
    peer.sendall(bad)
    error = None
    while error is None:
        _, error = node.read(0.0)
    assert sum(n for _, n in events.of("bytes_received")) == len(bad)
    assert events.of("response_received") == []


# --- SelectorMetrics on a fake clock ------------------------------------------------------

@pytest.fixture
def recorder():
    clock = FakeClock()
    metrics = Metrics(MetricConfig(samples=2, time_window_ms=1000, tags={"client-id": "c"}), time_ms=clock)
    throttle = metrics.sensor("fetch-throttle-time")
    throttle.add(metrics.metric_name("fetch-throttle-time-avg", "consumer-fetch-manager-metrics"), Avg())
    return SelectorMetrics(metrics, "consumer", throttle), metrics, clock


def read(metrics, name, group="consumer-metrics", node=None):
    tags = {"client-id": "c"}
    if node is not None:
        tags["node-id"] = "node-{}".format(node)
    metric = metrics.metric(metrics.metric_name(name, group, tags=tags))
    assert metric is not None, "no metric {} {} {}".format(group, name, tags)
    return metric.value()


def test_selector_metrics_implements_the_listener_interface():
    for name, method in vars(NetworkListener).items():
        if callable(method) and not name.startswith("_"):
            mine = getattr(SelectorMetrics, name)
            assert inspect.signature(mine) == inspect.signature(method), name


def test_selector_metrics_is_none_without_a_registry():
    assert selector_metrics(None) is None


def test_connection_count_created_and_closed(recorder):
    rec, metrics, _ = recorder
    for node in (1, 2, 1):
        rec.connection_created(node)
    rec.connection_closed(1)
    assert read(metrics, "connection-count") == 2 == rec.connection_count
    assert read(metrics, "connection-creation-total") == 3
    assert read(metrics, "connection-close-total") == 1
    # Node metrics registered on first connection, kept after the close (as Java).
    assert sorted(rec.nodes()) == [1, 2]
    assert read(metrics, "request-total", "consumer-node-metrics", node=1) == 0


def test_requests_responses_and_bytes_client_wide_and_per_node(recorder):
    rec, metrics, _ = recorder
    rec.connection_created(1)
    rec.connection_created(2)
    for node, size in ((1, 100), (1, 300), (2, 50)):
        rec.request_sent(node, 3, size)
    rec.bytes_sent(1, 400)
    rec.bytes_sent(2, 50)
    rec.bytes_received(1, 900)
    rec.response_received(1, 3, 500, 12.0, 0)
    rec.response_received(1, 1, 400, 40.0, 0)
    assert read(metrics, "request-total") == 3
    assert read(metrics, "request-size-avg") == 150
    assert read(metrics, "request-size-max") == 300
    assert read(metrics, "outgoing-byte-total") == 450
    assert read(metrics, "incoming-byte-total") == 900
    assert read(metrics, "response-total") == 2
    assert read(metrics, "network-io-total") == 3  # three socket operations moved bytes
    node = "consumer-node-metrics"
    assert read(metrics, "request-total", node, 1) == 2 and read(metrics, "request-total", node, 2) == 1
    assert read(metrics, "request-size-max", node, 1) == 300
    assert read(metrics, "outgoing-byte-total", node, 2) == 50
    assert read(metrics, "incoming-byte-total", node, 1) == 900
    assert read(metrics, "response-total", node, 1) == 2
    # Node latency is the Fetch requests' (Java's consumer records it from the fetch path).
    assert read(metrics, "request-latency-avg", node, 1) == 40.0
    assert math.isnan(read(metrics, "request-latency-max", node, 2))


def test_bytes_for_a_node_without_a_connection_count_client_wide_only(recorder):
    rec, metrics, _ = recorder
    rec.bytes_received(9, 10)
    assert read(metrics, "incoming-byte-total") == 10 and rec.nodes() == []


def test_throttle_time_of_every_response_but_fetch_goes_to_the_fetch_sensor(recorder):
    rec, metrics, _ = recorder
    rec.response_received("bootstrap-0", 18, 10, 1.0, 30)
    rec.response_received(1, 1, 10, 1.0, 500)  # Fetch: the fetch pipeline records its own
    rec.response_received(1, 12, 10, 1.0, 10)
    assert read(metrics, "fetch-throttle-time-avg", "consumer-fetch-manager-metrics") == 20


def test_select_and_io_time(recorder):
    rec, metrics, clock = recorder
    rec.poll_done(600_000_000, 200_000_000)
    rec.poll_done(200_000_000, 0)
    assert read(metrics, "select-total") == 2
    assert read(metrics, "io-wait-time-ns-avg") == 400_000_000
    assert read(metrics, "io-wait-time-ns-total") == 800_000_000
    assert read(metrics, "io-time-ns-total") == 200_000_000
    # Ratios: seconds spent per second of window. Nothing has elapsed, so Rate pads the
    # window to samples - 1 = 1 whole window of 1000 ms.
    assert read(metrics, "io-wait-ratio") == pytest.approx(0.8)
    assert read(metrics, "io-ratio") == pytest.approx(0.2)
    clock.now += 500  # now 1500 ms: 500 elapsed plus the one padded window
    assert read(metrics, "io-ratio") == pytest.approx(0.2 / 1.5)
