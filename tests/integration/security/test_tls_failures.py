"""A TLS handshake that fails verification surfaces as ``SslAuthenticationError``.

Java raises ``SslAuthenticationException`` (non-retriable) from ``poll()`` and blocking
calls when the handshake fails: the broker's certificate does not verify (unknown CA, host
name mismatch) or the broker refuses ours. kproto does the same in both engines, naming the
broker and the reason, on the first connection attempt. Two TLS servers, each test run
against both: Kafka 4.4's own listeners (``secure_kafka``, Java's TLS: SSL, MTLS with
``ssl.client.auth=required``, MTLS12 the same under TLS 1.2 only) and TLS-terminating
proxies (``tests.brokers.proxy``, Python's ``ssl``) in front of the session mock cluster,
which no failing handshake ever reaches. Certificates are the session's (``pki``, made with
the ``openssl`` command). A server that requires client certificates refuses a missing or
foreign one after the client's TLS 1.3 handshake has completed (the alert arrives at the
client's first read), and during the handshake under TLS 1.2: both are covered. A TCP
refusal or a connection dropped before any TLS byte stays retriable.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import ssl
import subprocess
import sys
import threading

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from kproto.messages import MetadataRequest
from kproto.net.client import NetworkClient
from tests.brokers._net import closed_port
from tests.brokers.proxy import BrokerProxy

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

ENGINES = ["classic", "consumer"]
TP = TopicPartition("tls-topic", 0)
# The bound the issue names: every failure must surface well within it.
BOUND_MS = 5_000


@pytest.fixture(scope="module")
def proxies(pki, mock_cluster):
    def start(*, client_certs: bool = False, max_version: ssl.TLSVersion | None = None) -> BrokerProxy:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*pki["server"])
        if max_version is not None:
            context.maximum_version = max_version
        if client_certs:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(pki["client"][0])
        return BrokerProxy(mock_cluster.addresses[0], context)

    started = {"server-auth": start(), "mutual": start(client_certs=True),
               "mutual-tls12": start(client_certs=True, max_version=ssl.TLSVersion.TLSv1_2)}
    yield started
    for p in started.values():
        p.close()


#: The Kafka listener that plays each proxy's part.
KAFKA_LISTENERS = {"server-auth": "SSL", "mutual": "MTLS", "mutual-tls12": "MTLS12"}
PEERS = ["kafka", "proxy"]


@pytest.fixture(params=PEERS)
def peer(request):
    """The TLS server kind: ``kafka`` (Java's TLS, Kafka 4.4's listeners) or ``proxy``."""
    return request.param


def server_port(request, peer: str, name: str) -> int:
    if peer == "kafka":
        kafka = request.getfixturevalue("secure_kafka")
        return kafka.ports[KAFKA_LISTENERS[name]]
    return request.getfixturevalue("proxies")[name].port


# (server, host the client dials, client TLS settings, what the message must say from the
# proxy, and from Kafka where Java's TLS answers otherwise)
CASES = {
    "unknown-ca": ("server-auth", "localhost", lambda pki: {"ssl_cafile": pki["stranger"][0]},
                   r"certificate verify failed: self.signed certificate"),
    "host-name-mismatch": ("server-auth", "127.0.0.1",
                           lambda pki: {"ssl_cafile": pki["server"][0], "ssl_check_hostname": True},
                           r"certificate verify failed: IP address mismatch"),
    "no-client-cert-tls13": ("mutual", "localhost", lambda pki: {"ssl_cafile": pki["server"][0]},
                             r"refused our certificate \(tlsv13 alert certificate required\)"),
    "foreign-client-cert-tls13": ("mutual", "localhost",
                                  lambda pki: {"ssl_cafile": pki["server"][0], "ssl_certfile": pki["stranger"][0],
                                               "ssl_keyfile": pki["stranger"][1]},
                                  r"refused our certificate \(tlsv1 alert unknown ca\)"),
    "no-client-cert-tls12": ("mutual-tls12", "localhost", lambda pki: {"ssl_cafile": pki["server"][0]},
                             r"refused the handshake \(sslv3 alert handshake failure\)"),
}
#: What Java's TLS (Kafka's listeners) answers where it differs from Python's.
KAFKA_REASONS = {
    "no-client-cert-tls13": r"refused our certificate \(sslv3 alert bad certificate\)",
    "foreign-client-cert-tls13": r"refused our certificate \(sslv3 alert certificate unknown\)",
    "no-client-cert-tls12": r"refused our certificate \(sslv3 alert bad certificate\)",
}


@pytest.fixture(params=sorted(CASES))
def case(request, pki, peer):
    """(proxy or None, consumer settings, regex the error message matches: broker and
    reason)."""
    name, host, settings, reason = CASES[request.param][:4]
    if peer == "kafka":
        reason = KAFKA_REASONS.get(request.param, reason)
    port = server_port(request, peer, name)
    config = {"bootstrap_servers": "{}:{}".format(host, port), "security_protocol": "SSL",
              # The bound of the calls that take no timeout (partitions_for_topic, topics).
              "default_api_timeout_ms": BOUND_MS, **settings(pki)}
    proxy = request.getfixturevalue("proxies")[name] if peer == "proxy" else None
    return proxy, config, r"node bootstrap-0 \({}:{}\): .*{}".format(host, port, reason)


def check(error: BaseException) -> None:
    assert isinstance(error, errors.SslAuthenticationError)
    assert isinstance(error, errors.AuthenticationError) and not error.retriable


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["assign", "subscribe"])
def test_poll_raises_on_the_first_connection_attempt(case, engine, mode):
    p, config, message = case
    before = p.accepted if p is not None else 0
    # A retry could not happen within the bound: what surfaces comes from the first
    # connection attempt.
    consumer = KafkaConsumer(group_protocol=engine, group_id="tls-" + engine, reconnect_backoff_ms=60_000,
                             reconnect_backoff_max_ms=60_000, **config)
    try:
        if mode == "assign":
            consumer.assign([TP])
        else:
            consumer.subscribe([TP.topic])
        with pytest.raises(errors.SslAuthenticationError, match=message) as raised:
            consumer.poll(timeout_ms=BOUND_MS)
        check(raised.value)
        if p is not None:  # the proxy counts connections
            assert p.accepted - before == 1
    finally:
        consumer.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_raised_and_not_warned_about(request, pki, peer, engine, caplog):
    """The failure is the application's to report (the CLI prints it as its one line): the
    consumer logs no warning of its own, even when close() finds a copy of it reported by
    another of the KIP-848 engine's managers (the network step, the coordinator lookup)."""
    port = server_port(request, peer, "server-auth")
    consumer = KafkaConsumer(bootstrap_servers="localhost:{}".format(port), security_protocol="SSL",
                             ssl_cafile=pki["stranger"][0], group_protocol=engine, group_id="tls-quiet-" + engine,
                             reconnect_backoff_ms=60_000, reconnect_backoff_max_ms=60_000)
    try:
        consumer.assign([TP])
        with pytest.raises(errors.SslAuthenticationError):
            consumer.poll(timeout_ms=BOUND_MS)
    finally:
        consumer.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@pytest.mark.parametrize("engine", ENGINES)
def test_blocking_calls_raise(case, engine):
    _, config, message = case
    # Each call makes its own connection attempt (no backoff growing to seconds between).
    consumer = KafkaConsumer(group_protocol=engine, group_id="tls-" + engine, reconnect_backoff_max_ms=100,
                             **config)
    try:
        consumer.assign([TP])
        for call in (lambda: consumer.end_offsets([TP], timeout_ms=BOUND_MS),
                     lambda: consumer.beginning_offsets([TP], timeout_ms=BOUND_MS),
                     lambda: consumer.offsets_for_times({TP: 0}, timeout_ms=BOUND_MS),
                     lambda: consumer.committed(TP, timeout_ms=BOUND_MS),
                     lambda: consumer.position(TP, timeout_ms=BOUND_MS),
                     lambda: consumer.partitions_for_topic(TP.topic),
                     lambda: consumer.topics(),
                     lambda: consumer.commit({TP: 0}, timeout_ms=BOUND_MS)):
            with pytest.raises(errors.SslAuthenticationError, match=message) as raised:
                call()
            check(raised.value)
    finally:
        consumer.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_iteration_raises(case, engine):
    _, config, message = case
    # Without the error, iteration would stop quietly after consumer_timeout_ms.
    consumer = KafkaConsumer(TP.topic, group_protocol=engine, group_id="tls-it-" + engine,
                             consumer_timeout_ms=BOUND_MS, **config)
    try:
        with pytest.raises(errors.SslAuthenticationError, match=message):
            next(iter(consumer))
    finally:
        consumer.close()


def test_network_client_raises_once_and_fails_the_request(case):
    _, config, message = case
    client = NetworkClient(reconnect_backoff_ms=60_000, reconnect_backoff_max_ms=60_000, **config)
    try:
        future = client.send("bootstrap-0", MetadataRequest(topics=[]))
        with pytest.raises(errors.SslAuthenticationError, match=message) as raised:
            client.poll(BOUND_MS, future=future)
        assert future.exception is raised.value and not future.retriable()
        assert client.authentication_exception("bootstrap-0") is raised.value
        client.poll(0)  # raised once, not on every poll
    finally:
        client.close()


def _closing_server() -> tuple[socket.socket, threading.Thread]:
    """A listener that accepts and closes at once, before any TLS byte (a reset when the
    client's ClientHello is already in flight)."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


def _stop(server: socket.socket, thread: threading.Thread) -> None:
    try:
        server.shutdown(socket.SHUT_RDWR)  # wakes the accept() (closing alone does not)
    except OSError:
        pass
    server.close()
    thread.join(10)
    assert not thread.is_alive()


@pytest.mark.parametrize("peer", ["refused", "closed-before-tls"])
def test_no_tls_verdict_stays_a_retriable_connection_error(pki, peer):
    with contextlib.ExitStack() as stack:
        if peer == "refused":
            port = stack.enter_context(closed_port())  # nothing listens on the port
        else:
            server, thread = _closing_server()
            stack.callback(_stop, server, thread)
            port = server.getsockname()[1]
        client = NetworkClient(bootstrap_servers="127.0.0.1:{}".format(port), security_protocol="SSL",
                               ssl_cafile=pki["server"][0], reconnect_backoff_ms=60_000,
                               reconnect_backoff_max_ms=60_000)
        try:
            future = client.send("bootstrap-0", MetadataRequest(topics=[]))
            client.poll(BOUND_MS, future=future)  # raises nothing
            assert future.failed()
            assert isinstance(future.exception, errors.KafkaConnectionError), future.exception
            assert future.retriable() and client.authentication_exception("bootstrap-0") is None
        finally:
            client.close()


@pytest.mark.parametrize("group", [[], ["--group", "tls-cli", "--group-protocol", "consumer"]])
def test_cli_prints_one_line(request, pki, peer, group):
    port = server_port(request, peer, "mutual")
    result = subprocess.run(
        [sys.executable, "-m", "kproto", "consume", "--bootstrap-server", "localhost:{}".format(port),
         "--topic", TP.topic, "--timeout-ms", str(BOUND_MS), *group,
         "--consumer-property", "security.protocol=SSL",
         "--consumer-property", "ssl.cafile=" + pki["server"][0]],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    # One error line, beside kafka-console-consumer's count of what was processed.
    lines = [line for line in result.stderr.strip().splitlines()
             if not line.startswith("Processed a total of ")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kproto: error: SslAuthenticationError: ")
    assert "localhost:{}".format(port) in lines[0] and "refused our certificate" in lines[0]


def test_spark_planning_raises(request, pki, peer):
    pytest.importorskip("pyspark", reason="the Spark data source needs pyspark>=4.0")
    from kproto.spark.options import parse_options
    from kproto.spark.source import KafkaBatchReader, KafkaStreamReader

    port = server_port(request, peer, "server-auth")
    opts = {"kafka.bootstrap.servers": "localhost:{}".format(port), "subscribe": TP.topic,
            "kafka.security.protocol": "SSL", "kafka.ssl.cafile": pki["stranger"][0],
            "kafka.request.timeout.ms": str(BOUND_MS), "kafka.default.api.timeout.ms": str(BOUND_MS)}
    message = r"localhost:{}\): certificate verify failed".format(port)
    with pytest.raises(errors.SslAuthenticationError, match=message):
        KafkaBatchReader(parse_options(opts, streaming=False)).partitions()
    stream = KafkaStreamReader(parse_options(opts, streaming=True))
    try:
        with pytest.raises(errors.SslAuthenticationError, match=message):
            stream.initialOffset()
    finally:
        stream.stop()
