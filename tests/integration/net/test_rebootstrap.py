"""Rebootstrap (KIP-899, KIP-1102) on librdkafka's mock cluster.

The client bootstraps through a :class:`~tests.brokers.proxy.BrokerProxy` in front of the
cluster's one broker, so the proxy's request log tells the two ways to the broker apart:
after the first Metadata answer the client talks to the broker's own port, and a Metadata
request through the proxy again means the client went back to ``bootstrap_servers``.

- Consumers of both engines read from a cluster whose broker is taken away while the
  bootstrap address now leads to another cluster (same topic, a broker with the same id on
  another port): with ``metadata_recovery_strategy="rebootstrap"`` they read the new
  cluster's records; with ``"none"`` they keep trying the gone broker and read nothing.
- A Metadata v13 answer with REBOOTSTRAP_REQUIRED sends the next Metadata request to the
  bootstrap servers (``"none"``: to the known broker again).
- Refreshes failing for longer than ``metadata_recovery_rebootstrap_trigger_ms`` do the
  same.
"""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from kproto.consumer.config import ConsumerConfig
from kproto.net.client import NetworkClient
from tests.brokers.proxy import BrokerProxy

METADATA = 3
REBOOTSTRAP_REQUIRED, REQUEST_TIMED_OUT = 129, 7


@pytest.fixture
def proxied_cluster(mock_cluster_factory):
    cluster = mock_cluster_factory(1)
    proxy = BrokerProxy(cluster.addresses[0])
    proxy.cluster = cluster  # type: ignore[attr-defined]
    yield proxy
    proxy.close()


def metadata_via_proxy(proxy: BrokerProxy) -> int:
    return sum(1 for r in proxy.requests() if r.api_key == METADATA)


def refresh(client: NetworkClient, timeout_s: float = 10.0):
    future = client.request_metadata_update()
    deadline = time.monotonic() + timeout_s
    while not future.is_done and time.monotonic() < deadline:
        client.poll(200, future=future)
    assert future.is_done
    return future


def poll_until(client: NetworkClient, condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        client.poll(100)
    return condition()


@pytest.mark.parametrize("strategy", ["rebootstrap", "none"])
def test_rebootstrap_required_sends_the_next_metadata_request_to_the_bootstrap_servers(proxied_cluster, strategy):
    proxy = proxied_cluster
    client = NetworkClient(bootstrap_servers=proxy.bootstrap_servers, metadata_recovery_strategy=strategy,
                           retry_backoff_ms=20, retry_backoff_max_ms=50)
    try:
        assert refresh(client).succeeded()
        assert refresh(client).succeeded()  # now from the broker's own port
        assert metadata_via_proxy(proxy) == 1
        proxy.cluster.push_request_errors(METADATA, [REBOOTSTRAP_REQUIRED])
        failed = refresh(client)
        assert isinstance(failed.exception, errors.RebootstrapRequiredError)
        assert refresh(client).succeeded()
        assert metadata_via_proxy(proxy) == (2 if strategy == "rebootstrap" else 1)
    finally:
        client.close()


@pytest.mark.parametrize("trigger_ms", [300, 300_000])
def test_refreshes_failing_longer_than_the_trigger_rebootstrap(proxied_cluster, trigger_ms):
    proxy = proxied_cluster
    client = NetworkClient(bootstrap_servers=proxy.bootstrap_servers, retry_backoff_ms=20, retry_backoff_max_ms=50,
                           metadata_recovery_rebootstrap_trigger_ms=trigger_ms)
    try:
        assert refresh(client).succeeded()
        assert refresh(client).succeeded()
        # The broker answers every Metadata request with an error for a while (its
        # connection stays up, so the KIP-899 "no node to try" rule does not apply).
        proxy.cluster.push_request_errors(METADATA, [REQUEST_TIMED_OUT] * 40)
        start = time.monotonic()
        client.request_metadata_update()
        rebootstrapped = poll_until(client, lambda: metadata_via_proxy(proxy) > 1, timeout_s=3.0)
        if trigger_ms == 300:
            assert rebootstrapped
            assert time.monotonic() - start >= trigger_ms / 1000 - 0.001  # the client counts whole ms
        else:
            assert not rebootstrapped
    finally:
        proxy.cluster.clear_request_errors(METADATA)
        client.close()


@pytest.mark.parametrize("key, value", [("metadata_recovery_strategy", "sometimes"),
                                        ("metadata_recovery_strategy", None),
                                        ("metadata_recovery_rebootstrap_trigger_ms", -1),
                                        ("metadata_recovery_rebootstrap_trigger_ms", "5")])
def test_bad_recovery_settings_are_refused(key, value):
    with pytest.raises(errors.KafkaConfigurationError, match=key):
        ConsumerConfig(bootstrap_servers="127.0.0.1:1", **{key: value})
    with pytest.raises(errors.KafkaConfigurationError, match=key):
        NetworkClient(bootstrap_servers="127.0.0.1:1", **{key: value})


def test_recovery_settings_default_to_java_4():
    config = ConsumerConfig(bootstrap_servers="127.0.0.1:1", metadata_recovery_strategy="NONE")
    assert config["metadata_recovery_strategy"] == "none"
    defaults = ConsumerConfig(bootstrap_servers="127.0.0.1:1")
    assert (defaults["metadata_recovery_strategy"], defaults["metadata_recovery_rebootstrap_trigger_ms"]) == (
        "rebootstrap", 300_000)


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
@pytest.mark.parametrize("strategy", ["rebootstrap", "none"])
def test_consumer_follows_the_bootstrap_address_to_a_new_cluster(mock_cluster_factory, group_protocol, strategy):
    old, new = mock_cluster_factory(1), mock_cluster_factory(1)
    topic = "moving"
    for cluster in (old, new):
        cluster.create_topic(topic, 1, 1)
    old.produce(topic, 3, tag="old")
    proxy = BrokerProxy(old.addresses[0])
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=proxy.bootstrap_servers, group_protocol=group_protocol,
                             auto_offset_reset="earliest", metadata_recovery_strategy=strategy,
                             reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
    try:
        consumer.assign([tp])
        values: list = []
        deadline = time.monotonic() + 15
        while len(values) < 3 and time.monotonic() < deadline:
            values += [r.value for batch in consumer.poll(timeout_ms=200).values() for r in batch]
        assert len(values) == 3 and all(v.startswith(b"old-") for v in values if v)
        # Every broker the metadata named is gone; only the bootstrap address leads on.
        old.broker_down(1)
        proxy.upstream = new.addresses[0]
        new.produce(topic, 6, tag="new")
        values = []
        deadline = time.monotonic() + (15 if strategy == "rebootstrap" else 3)
        while not values and time.monotonic() < deadline:
            values += [r.value for batch in consumer.poll(timeout_ms=200).values() for r in batch]
        if strategy == "rebootstrap":
            assert values and all(v.startswith(b"new-") for v in values if v)
        else:
            assert values == []
    finally:
        consumer.close()
        proxy.close()
