"""Network-level consumer metrics (consumer-metrics, consumer-node-metrics) end to end on
librdkafka's mock cluster, both group protocols, through the public KafkaConsumer.

Seeded by confluent-kafka's producer. Waits poll a condition with a generous deadline;
nothing asserts on durations.
"""

from __future__ import annotations

import itertools
import math

import pytest

from kproto import KafkaConsumer, TopicPartition
from kproto.net.broker import ConnectionState
from kproto.net.client import NetworkClient
from kproto.messages import MetadataRequest
from kproto.metrics import MetricConfig, Metrics
from kproto.metrics.selector_metrics import SelectorMetrics
from tests.support.members import wait_for

pytestmark = [pytest.mark.broker]

PROTOCOLS = ["classic", "consumer"]
NET = "consumer-metrics"
NODE = "consumer-node-metrics"
_groups = itertools.count()


def net(consumer, name):
    return consumer.metrics()[NET][name]


def node_metrics(consumer, name):
    """``{node-id tag: value}`` of the per-node metric ``name``."""
    return {m.tags["node-id"]: metric.value() for m, metric in consumer.metrics(raw=True).items()
            if m.group == NODE and m.name == name}


def client_of(consumer, protocol) -> NetworkClient:
    delegate = consumer._delegate
    if protocol == "classic":
        return delegate.client
    return delegate.network_thread.resources.client


def ready_nodes(client):
    return {n for n in list(client._nodes) if client.connection_state(n) is ConnectionState.READY}


def _adds_up(consumer, name) -> bool:
    """The client-wide ``name`` read twice, unchanged, and equal to the per-node sum read between."""
    before = net(consumer, name)
    parts = sum(node_metrics(consumer, name).values())
    return before == net(consumer, name) == parts


def consume(consumer, n):
    seen = []

    def step():
        for records in consumer.poll(200).values():
            seen.extend(records)
        return len(seen) >= n
    wait_for(step, "{} records".format(n))
    return seen


def test_network_client_counts_every_frame_it_moves(mock_cluster):
    """The hook on a bare NetworkClient: bytes on the sockets are exactly the frames."""
    sizes = {"sent": [], "received": []}

    class Sizes(SelectorMetrics):
        def request_sent(self, node_id, api_key, nbytes):
            sizes["sent"].append(nbytes)
            super().request_sent(node_id, api_key, nbytes)

        def response_received(self, node_id, api_key, nbytes, latency_ms, throttle_time_ms):
            sizes["received"].append(nbytes)
            super().response_received(node_id, api_key, nbytes, latency_ms, throttle_time_ms)

    recorder = Sizes(Metrics(MetricConfig(tags={"client-id": "n"})))
    metrics = recorder.metrics
    client = NetworkClient(bootstrap_servers=mock_cluster.bootstrap_servers, network_listener=recorder)
    try:
        for _ in range(3):
            future = client.send("bootstrap-0", MetadataRequest(topics=None))
            client.poll(10_000, future=future)
            assert future.succeeded()
        # The client's own metadata refresh may still be out: let it finish.
        wait_for(lambda: client.poll(50) is not None and client.in_flight_request_count() == 0,
                 "nothing in flight")

        def value(name):
            return metrics.metric(metrics.metric_name(name, NET)).value()
        # ApiVersions and Metadata on each connection, all answered.
        assert value("request-total") == value("response-total") == len(sizes["sent"]) >= 4
        assert value("outgoing-byte-total") == sum(sizes["sent"])
        assert value("incoming-byte-total") == sum(sizes["received"])
        assert value("request-size-max") == max(sizes["sent"])
        ready = ready_nodes(client)
        assert "bootstrap-0" in ready
        assert value("connection-count") == len(ready) == value("connection-creation-total")
        assert sorted(map(str, recorder.nodes())) == sorted(map(str, ready))
        assert value("select-total") >= 1
    finally:
        client.close()
    assert metrics.metric(metrics.metric_name("connection-close-total", NET)).value() == len(ready)
    assert metrics.metric(metrics.metric_name("connection-count", NET)).value() == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_network_metrics_after_consuming(mock_cluster, protocol):
    n = 60
    topic = mock_cluster.new_topic(partitions=3)
    written = mock_cluster.produce(topic, n)
    tps = [TopicPartition(topic, p) for p in range(3)]
    consumer = KafkaConsumer(bootstrap_servers=mock_cluster.bootstrap_servers, group_protocol=protocol,
                             auto_offset_reset="earliest")
    try:
        consumer.assign(tps)
        consume(consumer, n)
        client = client_of(consumer, protocol)
        responses = net(consumer, "response-total")
        assert net(consumer, "request-total") >= responses > 0
        assert net(consumer, "incoming-byte-total") >= sum(len(w.value or b"") + len(w.key or b"") for w in written)
        assert net(consumer, "outgoing-byte-total") >= net(consumer, "request-size-max") > 0
        assert net(consumer, "network-io-total") > 0 and net(consumer, "select-total") > 0
        assert not math.isnan(net(consumer, "io-wait-time-ns-avg"))
        assert net(consumer, "connection-creation-total") >= net(consumer, "connection-count")
        # Idle now: no connection is being opened or closed, so the count is stable.
        wait_for(lambda: net(consumer, "connection-count") == len(ready_nodes(client)),
                 "connection-count to equal the ready connections")
        # Per-node metrics for every node connected to, kept after a close (bootstrap).
        tagged = node_metrics(consumer, "request-total")
        assert set(tagged) >= {"node-{}".format(n) for n in ready_nodes(client)}
        leaders = {client.cluster.leader_for_partition(tp) for tp in tps}
        for leader in leaders:
            tag = "node-{}".format(leader)
            assert tagged[tag] > 0
            assert node_metrics(consumer, "incoming-byte-total")[tag] > 0
            # The leaders served Fetches: their latency is recorded.
            assert not math.isnan(node_metrics(consumer, "request-latency-avg")[tag])
        # The per-node totals add up to the client-wide ones. KIP-848's background thread
        # keeps fetching (and recording) while these are read, so compare a snapshot taken
        # between two equal reads of the total: a response counted in one place only
        # never adds up, however often it is read.
        for name in ("response-total", "incoming-byte-total"):
            wait_for(lambda name=name: _adds_up(consumer, name), "per-node {} to add up to the total".format(name))
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_group_consumer_records_from_its_background_threads(mock_cluster, protocol):
    """Heartbeats (classic heartbeat thread, KIP-848 background thread) go to the
    coordinator's own connection, whose node metrics then exist."""
    topic = mock_cluster.new_topic(partitions=2)
    mock_cluster.produce(topic, 20)
    extra = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 100} if protocol == "classic" else {}
    consumer = KafkaConsumer(bootstrap_servers=mock_cluster.bootstrap_servers, group_protocol=protocol,
                             group_id="netmetrics-{}-{}".format(protocol, next(_groups)),
                             auto_offset_reset="earliest", enable_auto_commit=False, **extra)
    try:
        consumer.subscribe([topic])
        consume(consumer, 20)
        client = client_of(consumer, protocol)
        # The coordinator is node 2**31 - 1 - broker id (a connection of its own).
        coordinators = {"node-{}".format(n) for n in list(client._nodes) if isinstance(n, int) and n > 1000}
        assert coordinators, "no coordinator connection"
        before = {tag: v for tag, v in node_metrics(consumer, "request-total").items() if tag in coordinators}
        assert set(before) == coordinators and all(v > 0 for v in before.values())

        def heartbeat_counted():
            consumer.poll(100)
            now = node_metrics(consumer, "request-total")
            return any(now[tag] > count for tag, count in before.items())
        wait_for(heartbeat_counted, "a heartbeat on the coordinator connection")
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_broker_down_closes_connections(mock_cluster_factory, protocol):
    cluster = mock_cluster_factory(3)
    topic = cluster.new_topic(partitions=3)
    cluster.produce(topic, 30)
    tps = [TopicPartition(topic, p) for p in range(3)]
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_protocol=protocol,
                             auto_offset_reset="earliest", reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
    try:
        consumer.assign(tps)
        consume(consumer, 30)
        client = client_of(consumer, protocol)
        leader = client.cluster.leader_for_partition(tps[0])
        assert leader in ready_nodes(client)
        closed = net(consumer, "connection-close-total")
        cluster.broker_down(leader)

        def noticed():
            consumer.poll(100)
            return net(consumer, "connection-close-total") > closed
        wait_for(noticed, "the closed connection to node {} to be counted".format(leader))
        assert leader not in ready_nodes(client)
        wait_for(lambda: net(consumer, "connection-count") == len(ready_nodes(client)),
                 "connection-count to equal the ready connections")
        # The node's metrics stay (as Java keeps them).
        assert "node-{}".format(leader) in node_metrics(consumer, "request-total")
    finally:
        consumer.close()
