"""SASL end to end: kproto's consumer logs in, reads records an independent producer wrote,
and fails fast and clearly on bad credentials, with both group_protocol engines.

Two peers, both started here (module-scoped, stopped by pid):

- Tansu 0.6.0 with ``--authentication`` (a real broker requiring SASL). Its SaslHandshake
  accepts SCRAM-SHA-256/512 and closes the connection for any other mechanism (PLAIN
  included: not enabled in this build); with the memory storage no SCRAM user can be
  created (see ``tests/sasl_gateway.py``), so it serves the failure paths: unknown user,
  unknown mechanism.
- A plain Tansu behind ``SaslGateway``: SCRAM served by an independent implementation
  (scramp) with users ``alice`` (SCRAM-SHA-256) and ``bob`` (SCRAM-SHA-512). The data is
  seeded through it by confluent-kafka logging in with SCRAM, so the gateway is checked
  against librdkafka before kproto is checked against it.

Tansu does not speak KIP-848's ConsumerGroupHeartbeat, so the ``consumer`` engine runs in
assign() mode; the classic engine also runs a group. Kafka 4.4's own SASL listeners (every
mechanism, both engines in groups, the same refusals) are tested in ``test_kafka_sasl.py``;
Tansu and the gateway are the second implementation.
"""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from kproto.tools.embedded import TansuBroker
from tests.brokers.seeding import produce_records
from tests.sasl_gateway import SaslGateway
from tests.integration.security.sasl_checks import SCRAM_USERS, assert_first_poll_raises, consume_all

USERS = SCRAM_USERS  # the same accounts as Kafka's listeners
LOGINS = {"SCRAM-SHA-256": ("alice", "alice-secret"), "SCRAM-SHA-512": ("bob", "bob-secret")}
ENGINES = ["classic", "consumer"]
TOPIC = "sasl-topic"
N_RECORDS = 60


def librdkafka_sasl(mechanism: str) -> dict:
    user, password = LOGINS[mechanism]
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def kproto_sasl(mechanism: str, user: str | None = None, password: str | None = None) -> dict:
    default_user, default_password = LOGINS.get(mechanism, ("alice", "alice-secret"))
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": user or default_user,
            "sasl_plain_password": password or default_password}


@pytest.fixture(scope="module")
def auth_tansu():
    broker = TansuBroker(extra_args=("--authentication",)).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def gateway():
    pytest.importorskip("scramp")
    gw = SaslGateway(USERS)
    broker = TansuBroker(advertised_port=gw.port)
    try:
        broker.start()
        gw.upstream = ("127.0.0.1", broker.port)
        yield gw
    finally:
        gw.close()
        broker.stop()


@pytest.fixture(scope="module")
def seeded(gateway):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": gateway.bootstrap_servers, "broker.address.family": "v4",
                         **librdkafka_sasl("SCRAM-SHA-512")})
    for future in admin.create_topics([NewTopic(TOPIC, 2, 1)], operation_timeout=15).values():
        future.result(15)
    written = produce_records(gateway.bootstrap_servers, TOPIC, N_RECORDS, partitions=(0, 1),
                              producer_config=librdkafka_sasl("SCRAM-SHA-256"))
    assert ("SCRAM-SHA-256", "alice") in gateway.logins and ("SCRAM-SHA-512", "bob") in gateway.logins
    return written


@pytest.fixture(params=["kafka", "tansu"])
def refusing(request) -> tuple[str, str]:
    """(bootstrap servers, what an unknown user's refusal says) of a SCRAM server that
    refuses: Kafka 4.4's SASL_PLAINTEXT listener, or Tansu with ``--authentication`` (no
    user at all). Kafka does not tell an unknown user from a wrong password."""
    if request.param == "kafka":
        kafka = request.getfixturevalue("secure_kafka")
        return kafka.address("SASL_PLAINTEXT"), "invalid credentials with SASL mechanism SCRAM"
    return request.getfixturevalue("auth_tansu").bootstrap_servers, "unknown-user"


@pytest.fixture(params=["kafka", "gateway"])
def scram_server(request) -> tuple[str, str]:
    """(bootstrap servers, a seeded topic) of a SCRAM server that lets alice and bob in:
    Kafka 4.4's SASL_PLAINTEXT listener, or the gateway in front of Tansu."""
    if request.param == "kafka":
        kafka = request.getfixturevalue("secure_kafka")
        return kafka.address("SASL_PLAINTEXT"), request.getfixturevalue("secure_seed").topic
    request.getfixturevalue("seeded")
    return request.getfixturevalue("gateway").bootstrap_servers, TOPIC


def as_tuples(records) -> list[tuple]:
    return sorted((r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in records)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_assigned_consumer_reads_seeded_records_over_scram(gateway, seeded, mechanism, engine):
    before = len(gateway.logins)
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap_servers, group_protocol=engine,
                             auto_offset_reset="earliest", **kproto_sasl(mechanism))
    try:
        consumer.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
        got = consume_all(consumer, N_RECORDS)
    finally:
        consumer.close()
    expected = [(w.partition, w.offset, w.key, w.value, w.headers) for w in seeded]
    assert as_tuples(got) == sorted(expected)
    assert {(m, u) for m, u in gateway.logins[before:]} == {(mechanism, LOGINS[mechanism][0])}


def test_classic_group_over_scram_consumes_and_commits(gateway, seeded):
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=gateway.bootstrap_servers, group_id="sasl-group",
                             session_timeout_ms=6000, heartbeat_interval_ms=1000,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             **kproto_sasl("SCRAM-SHA-512"))
    try:
        got = consume_all(consumer, N_RECORDS)
        consumer.commit()
        committed = {p: consumer.committed(TopicPartition(TOPIC, p)) for p in (0, 1)}
    finally:
        consumer.close()
    assert len({(r.partition, r.offset) for r in got}) == N_RECORDS
    ends = {p: max(w.offset for w in seeded if w.partition == p) + 1 for p in (0, 1)}
    assert committed == ends


@pytest.mark.parametrize("engine", ENGINES)
def test_wrong_password_raises_from_poll_without_retry_loop(gateway, seeded, engine):
    before = len(gateway.failures)
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap_servers, group_protocol=engine,
                             reconnect_backoff_ms=1000, reconnect_backoff_max_ms=1000,
                             **kproto_sasl("SCRAM-SHA-256", "alice", "not-the-password"))
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        with pytest.raises(errors.SaslAuthenticationError, match="invalid credentials") as info:
            consumer.poll(timeout_ms=30_000)
        assert isinstance(info.value, errors.SaslAuthenticationFailedError)
        assert not info.value.retriable
    finally:
        consumer.close()
    # One login attempt per reconnect backoff, not a loop.
    assert 1 <= len(gateway.failures) - before <= 2


@pytest.mark.parametrize("engine", ENGINES)
def test_unknown_user_raises_from_poll(refusing, engine):
    servers, unknown_user = refusing
    consumer = KafkaConsumer(bootstrap_servers=servers, group_protocol=engine,
                             **kproto_sasl("SCRAM-SHA-512", "nobody", "secret"))
    assert_first_poll_raises(consumer, "t", errors.SaslAuthenticationError, match=unknown_user)


def test_blocking_calls_raise_the_authentication_error(refusing):
    servers, _ = refusing
    consumer = KafkaConsumer(bootstrap_servers=servers, group_id="g",
                             **kproto_sasl("SCRAM-SHA-256", "nobody", "secret"))
    try:
        with pytest.raises(errors.SaslAuthenticationError):
            consumer.partitions_for_topic("t")
        consumer.assign([TopicPartition("t", 0)])
        with pytest.raises(errors.SaslAuthenticationError):
            consumer.position(TopicPartition("t", 0), timeout_ms=30_000)
        with pytest.raises(errors.SaslAuthenticationError):
            consumer.committed(TopicPartition("t", 0), timeout_ms=30_000)
    finally:
        consumer.close()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("server", ["kafka", "gateway"])
def test_mechanism_the_broker_does_not_enable_names_its_mechanisms(request, server, engine):
    if server == "kafka":  # its SHORT_SESSION listener enables SCRAM-SHA-512 only
        servers, offered = request.getfixturevalue("secure_kafka").address("SHORT_SESSION"), "SCRAM-SHA-512"
    else:
        servers, offered = request.getfixturevalue("gateway").bootstrap_servers, "SCRAM-SHA-256, SCRAM-SHA-512"
    consumer = KafkaConsumer(bootstrap_servers=servers, group_protocol=engine,
                             **kproto_sasl("PLAIN", "alice", "alice-secret"))
    assert_first_poll_raises(consumer, TOPIC, errors.UnsupportedSaslMechanismError,
                             match="mechanism PLAIN; it offers: " + offered + "$")


def test_tansu_closing_on_an_unknown_mechanism_is_an_authentication_error(auth_tansu):
    consumer = KafkaConsumer(bootstrap_servers=auth_tansu.bootstrap_servers,
                             **kproto_sasl("PLAIN", "alice", "alice-secret"))
    assert_first_poll_raises(consumer, "t", errors.SaslAuthenticationError, match="closed the connection during PLAIN")


@pytest.mark.parametrize("engine", ENGINES)
def test_session_lifetime_renewed_by_a_new_connection(engine):
    """KIP-368: the broker gives the session a lifetime; kproto opens a fresh, newly
    authenticated connection before it ends, and consuming goes on."""
    import time

    pytest.importorskip("scramp")
    gw = SaslGateway(USERS, session_lifetime_ms=1500)
    broker = TansuBroker(advertised_port=gw.port)
    consumer = None
    try:
        broker.start()
        gw.upstream = ("127.0.0.1", broker.port)
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": gw.bootstrap_servers, "broker.address.family": "v4",
                             **librdkafka_sasl("SCRAM-SHA-256")})
        for future in admin.create_topics([NewTopic("renew", 1, 1)], operation_timeout=15).values():
            future.result(15)
        first = produce_records(gw.bootstrap_servers, "renew", 10, producer_config=librdkafka_sasl("SCRAM-SHA-256"))
        consumer = KafkaConsumer(bootstrap_servers=gw.bootstrap_servers, group_protocol=engine,
                                 auto_offset_reset="earliest", **kproto_sasl("SCRAM-SHA-512"))
        consumer.assign([TopicPartition("renew", 0)])
        got = consume_all(consumer, 10)
        logins_before = sum(1 for m, _ in gw.logins if m == "SCRAM-SHA-512")
        deadline = time.monotonic() + 3.5  # more than two session lifetimes of polling
        while time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                got.extend(batch)
        second = produce_records(gw.bootstrap_servers, "renew", 10, start_index=10,
                                 producer_config=librdkafka_sasl("SCRAM-SHA-256"))
        got += consume_all(consumer, 10)
    finally:
        if consumer is not None:
            consumer.close()
        gw.close()
        broker.stop()
    assert [(r.offset, r.value) for r in got] == [(w.offset, w.value) for w in first + second]
    assert sum(1 for m, _ in gw.logins if m == "SCRAM-SHA-512") > logins_before


@pytest.mark.parametrize("engine", ENGINES)
def test_unknown_user_in_group_mode_raises_from_poll(refusing, engine):
    """Subscribed: the failure comes from the coordinator lookup's connection (classic:
    on the application thread or the heartbeat thread; KIP-848: the background thread)."""
    servers, unknown_user = refusing
    consumer = KafkaConsumer("t", bootstrap_servers=servers, group_id="g-" + engine,
                             group_protocol=engine, **kproto_sasl("SCRAM-SHA-256", "nobody", "secret"))
    try:
        with pytest.raises(errors.SaslAuthenticationError, match=unknown_user):
            consumer.poll(timeout_ms=30_000)
    finally:
        # close() does not wait out its 30 s default for requests no broker will ever take
        # (KIP-848: the coordinator lookup fails with the authentication error at once).
        started = time.monotonic()
        consumer.close()
        assert time.monotonic() - started < 20


@pytest.mark.parametrize("engine", ENGINES)
def test_lookups_raise_the_authentication_error(refusing, engine):
    tp = TopicPartition("t", 0)
    consumer = KafkaConsumer(bootstrap_servers=refusing[0], group_protocol=engine,
                             **kproto_sasl("SCRAM-SHA-256", "nobody", "secret"))
    try:
        for lookup in (lambda: consumer.partitions_for_topic("t"),
                       lambda: consumer.end_offsets([tp], timeout_ms=30_000),
                       lambda: consumer.beginning_offsets([tp], timeout_ms=30_000),
                       lambda: consumer.offsets_for_times({tp: 0}, timeout_ms=30_000),
                       lambda: consumer.topics()):
            with pytest.raises(errors.SaslAuthenticationError):
                lookup()
    finally:
        consumer.close()


def test_network_client_queues_requests_until_authenticated(scram_server):
    """Kafka and the gateway close any connection that sends a request other than
    ApiVersions before authenticating, so an answer proves the Metadata request waited
    for SASL."""
    from kproto.messages import MetadataRequest
    from kproto.net.broker import ConnectionState
    from kproto.net.client import NetworkClient

    servers, topic = scram_server
    client = NetworkClient(bootstrap_servers=servers, **kproto_sasl("SCRAM-SHA-512"))
    try:
        future = client.send("bootstrap-0", MetadataRequest(topics=None))  # queued at once
        states = set()
        while not future.is_done:
            client.poll(timeout_ms=100)
            states.add(client.connection_state("bootstrap-0"))
        assert future.succeeded(), future.exception
        assert topic in {t.name for t in future.value.topics}
        assert ConnectionState.READY in states and client.authentication_exception("bootstrap-0") is None
    finally:
        client.close()


def test_network_client_authentication_failure_is_fatal_and_backed_off(refusing):
    from kproto.messages import MetadataRequest
    from kproto.net.client import NetworkClient

    client = NetworkClient(bootstrap_servers=refusing[0], reconnect_backoff_ms=5000,
                           reconnect_backoff_max_ms=5000, **kproto_sasl("SCRAM-SHA-256", "nobody", "pw"))
    try:
        future = client.send("bootstrap-0", MetadataRequest(topics=None))
        with pytest.raises(errors.SaslAuthenticationError) as raised:
            client.poll(timeout_ms=30_000, future=future)
        assert future.failed() and isinstance(future.exception, errors.SaslAuthenticationError)
        assert not future.retriable()
        assert client.authentication_exception("bootstrap-0") is raised.value
        assert client.connection_failed("bootstrap-0") is raised.value
        client.poll(timeout_ms=0)  # raised once, not on every poll
        again = client.send("bootstrap-0", MetadataRequest(topics=None))
        assert isinstance(again.exception, errors.NodeNotReadyError)  # backing off, no retry loop
    finally:
        client.close()
