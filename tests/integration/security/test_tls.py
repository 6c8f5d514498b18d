"""TLS end to end: kproto -> TLS-terminating proxy (started here) -> a real broker.

The proxy (``tests.brokers.proxy``) is a few threads with the ``ssl`` module on 127.0.0.1;
the certificates are made at test time with the ``openssl`` command. The broker is a 1-broker mock cluster; the
requests go to the bootstrap node, which is the proxy (the brokers the metadata lists are
plaintext and are not contacted).
"""

from __future__ import annotations

import shutil
import ssl

import pytest

from kproto import errors
from kproto.messages import MetadataRequest
from kproto.net.client import NetworkClient
from tests.brokers.proxy import BrokerProxy
from tests.integration.security.certs import make_cert

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    server = make_cert(directory, "localhost", "DNS:localhost")
    client = make_cert(directory, "kproto-client", "DNS:kproto-client")
    return {"server": server, "client": client}


@pytest.fixture
def proxy(mock_cluster_factory, certs):
    def start(*, require_client_cert: bool = False) -> BrokerProxy:
        cluster = mock_cluster_factory(1)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*certs["server"])
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(certs["client"][0])
        p = BrokerProxy(cluster.addresses[0], context)
        p.cluster = cluster  # type: ignore[attr-defined]
        started.append(p)
        return p

    started: list[BrokerProxy] = []
    yield start
    for p in started:
        p.close()


def roundtrip(client: NetworkClient):
    future = client.send("bootstrap-0", MetadataRequest(topics=[]))
    client.poll(20_000, future=future)
    assert future.is_done
    return future


def test_requests_and_responses_flow_through_tls(proxy, certs):
    p = proxy()
    client = NetworkClient(bootstrap_servers="localhost:{}".format(p.port),
                           security_protocol="SSL", ssl_cafile=certs["server"][0])
    try:
        future = roundtrip(client)
        assert future.succeeded(), future.exception
        assert [b.node_id for b in future.value.brokers] == [1]
        assert client.api_version(3, "bootstrap-0") is not None  # negotiated over TLS
    finally:
        client.close()


def test_verification_is_on_by_default(proxy):
    p = proxy()
    client = NetworkClient(bootstrap_servers="localhost:{}".format(p.port), security_protocol="SSL",
                           reconnect_backoff_ms=50)
    try:
        # A verdict, not a network blip: raised, never retried (test_net_tls_failures).
        with pytest.raises(errors.SslAuthenticationError, match="certificate verify failed"):
            roundtrip(client)
    finally:
        client.close()


def test_host_name_is_checked_unless_turned_off(proxy, certs):
    p = proxy()
    # The certificate names "localhost", not 127.0.0.1.
    strict = NetworkClient(bootstrap_servers="127.0.0.1:{}".format(p.port), security_protocol="SSL",
                           ssl_cafile=certs["server"][0])
    loose = NetworkClient(bootstrap_servers="127.0.0.1:{}".format(p.port), security_protocol="SSL",
                          ssl_cafile=certs["server"][0], ssl_check_hostname=False)
    try:
        with pytest.raises(errors.SslAuthenticationError, match="mismatch"):
            roundtrip(strict)
        assert roundtrip(loose).succeeded()
    finally:
        strict.close()
        loose.close()


def test_client_certificate_for_mutual_tls(proxy, certs):
    p = proxy(require_client_cert=True)
    without = NetworkClient(bootstrap_servers="localhost:{}".format(p.port), security_protocol="SSL",
                            ssl_cafile=certs["server"][0])
    with_cert = NetworkClient(bootstrap_servers="localhost:{}".format(p.port),
                              security_protocol="SSL", ssl_cafile=certs["server"][0],
                              ssl_certfile=certs["client"][0], ssl_keyfile=certs["client"][1])
    try:
        with pytest.raises(errors.SslAuthenticationError, match="refused our certificate"):
            roundtrip(without)
        assert roundtrip(with_cert).succeeded()
    finally:
        without.close()
        with_cert.close()


def test_a_given_ssl_context_is_used_as_is(proxy, certs):
    p = proxy()
    context = ssl.create_default_context(cafile=certs["server"][0])
    client = NetworkClient(bootstrap_servers="localhost:{}".format(p.port), security_protocol="SSL",
                           ssl_context=context)
    try:
        assert roundtrip(client).succeeded()
    finally:
        client.close()


def test_a_response_larger_than_one_read_burst_arrives_whole(proxy, certs, monkeypatch):
    """A Fetch answer of several MiB through TLS: one readiness event reads at most
    _MAX_READS_PER_EVENT TLS records (~1 MiB), then drains what the TLS layer already
    decrypted (``pending()``), and the rest arrives on later events."""
    import os

    from confluent_kafka import Producer

    from kproto.messages import FetchRequest
    from kproto.net import broker as broker_module
    from tests.brokers import raw

    p = proxy()
    cluster = p.cluster
    # The mock answers a Fetch with at most one producer batch (~1 MB) per partition:
    # three partitions make a ~3 MiB response. The long linger keeps each partition's
    # records together until the flush (with 50 ms a loaded machine made small batches and
    # the Fetch from offset 0 was 45 kB); the Fetch starts at each partition's largest
    # batch, since the first record can still leave on its own. The producer learns the
    # topic first: records queued before that are moved to their partition one by one,
    # and with the flush under way a partition's records then split anywhere (measured:
    # 40 records as [28, 12], [10, 30]; see tests.brokers.seeding).
    topic = cluster.new_topic(partitions=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 60_000,
                         "compression.type": "none"})
    producer.list_topics(topic, timeout=30)
    blob = os.urandom(1024)
    for i in range(2_700):  # ~0.9 MiB per partition, below the mock's ~5 MiB retention
        producer.produce(topic, value=blob[i % 512:] + blob[:i % 512], key=b"%d" % i,
                         partition=i % 3)
    assert producer.flush(30) == 0

    def largest_batch(partition: int) -> tuple[int, bytes]:
        """(offset, records bytes) of the partition's largest batch (one batch per Fetch)."""
        offset, best = 0, (0, b"")
        while offset < 900:
            data = raw.fetch_partition_bytes(cluster.bootstrap_servers, topic, partition, offset)
            header = raw.batch_headers(data)[0]
            best = max(best, (offset, data), key=lambda found: len(found[1]))
            offset = header.base_offset + header.last_offset_delta + 1
        return best

    starts, expected = zip(*(largest_batch(n) for n in range(3)))
    assert sum(map(len, expected)) > 2 * 1024 * 1024

    drains = []
    real_pending = ssl.SSLSocket.pending

    def counting_pending(sock):
        drains.append(1)
        return real_pending(sock)

    monkeypatch.setattr(ssl.SSLSocket, "pending", counting_pending)
    client = NetworkClient(bootstrap_servers="localhost:{}".format(p.port),
                           security_protocol="SSL", ssl_cafile=certs["server"][0])
    try:
        limit = 8 * 1024 * 1024
        request = FetchRequest(
            replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=limit, isolation_level=0,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                FetchRequest.FetchPartition(partition=n, fetch_offset=starts[n],
                                            partition_max_bytes=limit) for n in range(3)])])
        future = client.send("bootstrap-0", request, version=12)
        client.poll(30_000, future=future)
        assert future.succeeded(), future.exception
        parts = sorted(future.value.responses[0].partitions, key=lambda q: q.partition_index)
        assert [q.error_code for q in parts] == [0, 0, 0]
        assert [bytes(q.records) for q in parts] == list(expected)
        # More than one burst's worth of TLS records came in, so the cap was reached.
        assert sum(map(len, expected)) > broker_module._MAX_READS_PER_EVENT * 16 * 1024
        assert drains, "the read cap was never reached"
    finally:
        client.close()


def test_bad_tls_settings_are_configuration_errors(tmp_path):
    with pytest.raises(errors.KafkaConfigurationError, match="not supported"):
        NetworkClient(bootstrap_servers="localhost:1", security_protocol="TLS")
    with pytest.raises(errors.KafkaConfigurationError, match="sasl_mechanism"):
        NetworkClient(bootstrap_servers="localhost:1", security_protocol="SASL_SSL")
    with pytest.raises(errors.KafkaConfigurationError):
        NetworkClient(bootstrap_servers="localhost:1", security_protocol="SSL",
                      ssl_cafile=str(tmp_path / "missing.pem"))
