"""TLS end to end: kproto -> a TLS server -> a real broker, against two TLS servers:

- ``kafka``: Kafka 4.4's own listeners (``secure_kafka``: SSL, and MTLS requiring client
  certificates; Java's TLS), one JVM for the session;
- ``proxy``: a TLS-terminating proxy (``tests.brokers.proxy``, a few threads with Python's
  ``ssl`` module on 127.0.0.1) in front of a 1-broker mock cluster; the requests go to the
  bootstrap node, which is the proxy (the brokers the metadata lists are plaintext and are
  not contacted).

The certificates are the session's (``pki``, made at test time with the ``openssl``
command); the server's names ``localhost`` only.
"""

from __future__ import annotations

import ssl

import pytest

from kproto import errors
from kproto.messages import MetadataRequest
from kproto.net.client import NetworkClient
from tests.brokers.proxy import BrokerProxy


@pytest.fixture
def proxy(mock_cluster_factory, pki):
    def start(*, require_client_cert: bool = False) -> BrokerProxy:
        cluster = mock_cluster_factory(1)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*pki["server"])
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(pki["client"][0])
        p = BrokerProxy(cluster.addresses[0], context)
        p.cluster = cluster  # type: ignore[attr-defined]
        started.append(p)
        return p

    started: list[BrokerProxy] = []
    yield start
    for p in started:
        p.close()


@pytest.fixture(params=["kafka", "proxy"])
def tls_server(request):
    """``start(require_client_cert=False) -> port`` of a TLS server of the kind."""
    if request.param == "kafka":
        kafka = request.getfixturevalue("secure_kafka")
        return lambda require_client_cert=False: kafka.ports["MTLS" if require_client_cert else "SSL"]
    start = request.getfixturevalue("proxy")
    return lambda require_client_cert=False: start(require_client_cert=require_client_cert).port


def roundtrip(client: NetworkClient):
    future = client.send("bootstrap-0", MetadataRequest(topics=[]))
    client.poll(20_000, future=future)
    assert future.is_done
    return future


def test_requests_and_responses_flow_through_tls(tls_server, pki):
    port = tls_server()
    client = NetworkClient(bootstrap_servers="localhost:{}".format(port),
                           security_protocol="SSL", ssl_cafile=pki["server"][0])
    try:
        future = roundtrip(client)
        assert future.succeeded(), future.exception
        assert [b.node_id for b in future.value.brokers] == [1]
        assert client.api_version(3, "bootstrap-0") is not None  # negotiated over TLS
    finally:
        client.close()


def test_verification_is_on_by_default(tls_server):
    port = tls_server()
    client = NetworkClient(bootstrap_servers="localhost:{}".format(port), security_protocol="SSL",
                           reconnect_backoff_ms=50)
    try:
        # A verdict, not a network blip: raised, never retried (test_net_tls_failures).
        with pytest.raises(errors.SslAuthenticationError, match="certificate verify failed"):
            roundtrip(client)
    finally:
        client.close()


def test_host_name_is_checked_unless_turned_off(tls_server, pki):
    port = tls_server()
    # The certificate names "localhost", not 127.0.0.1.
    strict = NetworkClient(bootstrap_servers="127.0.0.1:{}".format(port), security_protocol="SSL",
                           ssl_cafile=pki["server"][0])
    loose = NetworkClient(bootstrap_servers="127.0.0.1:{}".format(port), security_protocol="SSL",
                          ssl_cafile=pki["server"][0], ssl_check_hostname=False)
    try:
        with pytest.raises(errors.SslAuthenticationError, match="mismatch"):
            roundtrip(strict)
        assert roundtrip(loose).succeeded()
    finally:
        strict.close()
        loose.close()


def test_client_certificate_for_mutual_tls(tls_server, pki):
    port = tls_server(require_client_cert=True)
    without = NetworkClient(bootstrap_servers="localhost:{}".format(port), security_protocol="SSL",
                            ssl_cafile=pki["server"][0])
    with_cert = NetworkClient(bootstrap_servers="localhost:{}".format(port),
                              security_protocol="SSL", ssl_cafile=pki["server"][0],
                              ssl_certfile=pki["client"][0], ssl_keyfile=pki["client"][1])
    try:
        with pytest.raises(errors.SslAuthenticationError, match="refused our certificate"):
            roundtrip(without)
        assert roundtrip(with_cert).succeeded()
    finally:
        without.close()
        with_cert.close()


def test_a_given_ssl_context_is_used_as_is(tls_server, pki):
    port = tls_server()
    context = ssl.create_default_context(cafile=pki["server"][0])
    client = NetworkClient(bootstrap_servers="localhost:{}".format(port), security_protocol="SSL",
                           ssl_context=context)
    try:
        assert roundtrip(client).succeeded()
    finally:
        client.close()


def test_a_response_larger_than_one_read_burst_arrives_whole(proxy, pki, monkeypatch):
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
                           security_protocol="SSL", ssl_cafile=pki["server"][0])
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


@pytest.mark.parametrize("engine", ["classic", "consumer"])
@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_plaintext_client_at_a_tls_listener_raises_at_once(secure_kafka, listener, engine):
    """Kafka's TLS listener answers a plaintext ApiVersions request with a TLS alert
    record, which read as a frame size is 352 MB. Java's client calls that a disconnect and
    retries for ever (measured: poll() returns nothing, endOffsets times out); the answer
    cannot come from anything but a TLS listener, so kproto raises it as the TLS verdict
    it is, once, from poll() and from blocking calls."""
    from kproto import KafkaConsumer, TopicPartition

    port = secure_kafka.ports[listener]
    tp = TopicPartition("t", 0)
    consumer = KafkaConsumer(bootstrap_servers="localhost:{}".format(port), group_protocol=engine,
                             reconnect_backoff_max_ms=100)
    message = r"plaintext connection to node bootstrap-0 \(localhost:{}\): .*a TLS listener".format(port)
    try:
        consumer.assign([tp])
        with pytest.raises(errors.SslAuthenticationError, match=message) as raised:
            consumer.poll(timeout_ms=5_000)
        assert not raised.value.retriable
        with pytest.raises(errors.SslAuthenticationError, match=message):
            consumer.end_offsets([tp], timeout_ms=5_000)
    finally:
        consumer.close()


def test_tls_client_at_a_plaintext_listener_stays_retriable_with_a_hint(secure_kafka, pki):
    """Kafka's PLAINTEXT listener reads the ClientHello as a 369 MB frame size and closes:
    the client sees the connection end during its handshake, as a network blip would show
    it. Java keeps retrying (its warning names a listener without TLS as a cause); so does
    kproto, the hint in the connection error."""
    client = NetworkClient(bootstrap_servers=secure_kafka.bootstrap_servers, security_protocol="SSL",
                           ssl_cafile=pki["server"][0], ssl_check_hostname=False,
                           reconnect_backoff_ms=60_000, reconnect_backoff_max_ms=60_000)
    try:
        future = client.send("bootstrap-0", MetadataRequest(topics=[]))
        client.poll(5_000, future=future)  # raises nothing
        assert future.failed()
        assert isinstance(future.exception, errors.KafkaConnectionError), future.exception
        assert "ended during the TLS handshake" in str(future.exception)
        assert future.retriable() and client.authentication_exception("bootstrap-0") is None
    finally:
        client.close()
