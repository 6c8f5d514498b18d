"""SASL against Kafka 4.4's own listeners (:class:`tests.brokers.secure_kafka.SecureKafka`,
one JVM for the session): every mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
with Kafka's unsecured JWS validator) over SASL_PLAINTEXT and SASL_SSL, in both engines,
assigned and in groups (classic and KIP-848), and the refusals: wrong password, unknown
user, a mechanism the listener does not enable, a rejected token, a SASL client at a
PLAINTEXT listener.

librdkafka wrote the records with each mechanism on each listener first
(``secure_seed``), so every login kproto tries is known to work for an independent
client. The broker's own log counts refused logins (``Failed authentication with``).
``test_sasl_scram.py`` runs the refusals of blocking calls, lookups and group mode, an
unenabled mechanism and the queueing before login against these listeners and against
Tansu and the gateway (the second implementation).
"""

from __future__ import annotations

import logging
import time

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from tests.brokers._net import wait_until
from tests.brokers.secure_kafka import MECHANISMS, SASL_LISTENERS, SHORT_SESSION_MS, unsecured_jws
from tests.brokers.seeding import produce_records
from tests.integration.security.sasl_checks import (TokenProvider, assert_first_poll_raises,
                                                    consume_all, kproto_login,
                                                    librdkafka_login)

ENGINES = ["classic", "consumer"]


def as_tuples(records) -> list[tuple]:
    return sorted((r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in records)


def written_tuples(written) -> list[tuple]:
    return sorted((w.partition, w.offset, w.key, w.value, w.headers) for w in written)


def refused_logins(kafka) -> int:
    """How many logins the broker has refused so far (its own log's count)."""
    with open(kafka.node.log_path, errors="replace") as f:
        return sum("Failed authentication with" in line for line in f)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_assigned_consumer_reads_what_librdkafka_wrote(secure_kafka, secure_seed, pki, listener,
                                                       mechanism, engine):
    consumer = KafkaConsumer(bootstrap_servers=secure_kafka.address(listener), group_protocol=engine,
                             auto_offset_reset="earliest", **kproto_login(listener, mechanism, pki))
    try:
        consumer.assign([TopicPartition(secure_seed.topic, p) for p in (0, 1)])
        got = consume_all(consumer, len(secure_seed.written))
    finally:
        consumer.close()
    assert as_tuples(got) == written_tuples(secure_seed.written)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("listener, mechanism", [("SASL_SSL", "SCRAM-SHA-512"),
                                                 ("SASL_PLAINTEXT", "OAUTHBEARER")])
def test_group_consumes_and_commits(secure_kafka, secure_seed, pki, listener, mechanism, engine):
    """A group (classic: JoinGroup/SyncGroup; consumer: KIP-848 heartbeats) over the
    authenticated connections, coordinator included; the commit reads back."""
    topic = secure_seed.topic
    # KIP-848 takes its session timeout from the broker (Java refuses the client setting).
    classic = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000} if engine == "classic" else {}
    consumer = KafkaConsumer(topic, bootstrap_servers=secure_kafka.address(listener),
                             group_id="sasl-{}-{}-{}".format(listener, mechanism, engine),
                             group_protocol=engine, auto_offset_reset="earliest",
                             enable_auto_commit=False, **classic,
                             **kproto_login(listener, mechanism, pki))
    try:
        got = consume_all(consumer, len(secure_seed.written))
        consumer.commit()
        committed = {p: consumer.committed(TopicPartition(topic, p)) for p in (0, 1)}
    finally:
        consumer.close()
    assert as_tuples(got) == written_tuples(secure_seed.written)
    ends = {p: max(w.offset for w in secure_seed.written if w.partition == p) + 1 for p in (0, 1)}
    assert committed == ends


def test_oauthbearer_login_with_extensions(secure_kafka, secure_seed, pki):
    """Extensions ride along the token (Kafka's unsecured validator takes any name but
    ``auth``); the broker's log names the token's subject as the principal."""
    conf = kproto_login("SASL_PLAINTEXT", "OAUTHBEARER", pki)
    provider = TokenProvider(unsecured_jws("kproto-ext"), {"logicalCluster": "lkc-1"})
    conf["sasl_oauth_token_provider"] = provider
    consumer = KafkaConsumer(bootstrap_servers=secure_kafka.address("SASL_PLAINTEXT"),
                             auto_offset_reset="earliest", **conf)
    try:
        consumer.assign([TopicPartition(secure_seed.topic, 0)])
        got = consume_all(consumer, sum(w.partition == 0 for w in secure_seed.written))
    finally:
        consumer.close()
    assert provider.calls >= 1 and got
    with open(secure_kafka.node.log_path, errors="replace") as f:
        assert "Successfully validated token with principal kproto-ext" in f.read()


def test_scram_user_created_by_the_admin_api_logs_in(secure_kafka, secure_seed, pki):
    """AlterUserScramCredentials (confluent-kafka's admin client, over PLAINTEXT): the
    user can log in to the SASL listeners once the broker describes it."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)

    admin = AdminClient({"bootstrap.servers": secure_kafka.bootstrap_servers})
    upsert = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)

    # The answer only says the controller committed the credential: the broker applies the
    # metadata log afterwards (its authenticator and DescribeUserScramCredentials read what
    # it applied), so a login right away could still be refused as an unknown user.
    def described() -> bool:
        try:
            return bool(admin.describe_user_scram_credentials(["dave"])["dave"].result(30).scram_credential_infos)
        except KafkaException:  # RESOURCE_NOT_FOUND until the broker has applied it
            return False

    assert wait_until(described, timeout=60), "the broker never described the new SCRAM user"

    def read() -> list:
        consumer = KafkaConsumer(bootstrap_servers=secure_kafka.address("SASL_SSL"),
                                 auto_offset_reset="earliest", **kproto_login(
                                     "SASL_SSL", "SCRAM-SHA-256", pki, "dave", "dave-secret"))
        try:
            consumer.assign([TopicPartition(secure_seed.topic, 1)])
            return consume_all(consumer, sum(w.partition == 1 for w in secure_seed.written))
        finally:
            consumer.close()

    assert read()


CREDENTIAL_REFUSALS = {
    # (mechanism, user, password or token subject/lifetime, what the broker says)
    "wrong-password-scram256": ("SCRAM-SHA-256", "alice", "wrong",
                                "invalid credentials with SASL mechanism SCRAM-SHA-256"),
    "unknown-user-scram512": ("SCRAM-SHA-512", "nobody", "secret",
                              "invalid credentials with SASL mechanism SCRAM-SHA-512"),
    "wrong-password-plain": ("PLAIN", "carol", "wrong", "Invalid username or password"),
    "unknown-user-plain": ("PLAIN", "nobody", "secret", "Invalid username or password"),
    "expired-token": ("OAUTHBEARER", "kproto", None, r'\{"status":"invalid_token"\}'),
}


def refused_login(case: str, listener: str, pki) -> dict:
    mechanism, user, password, _ = CREDENTIAL_REFUSALS[case]
    conf = kproto_login(listener, mechanism, pki, user, password)
    if mechanism == "OAUTHBEARER":
        conf["sasl_oauth_token_provider"] = TokenProvider(unsecured_jws(user, lifetime_s=-60))
    return conf


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("listener", SASL_LISTENERS)
@pytest.mark.parametrize("case", sorted(CREDENTIAL_REFUSALS))
def test_refused_login_raises_from_poll_once_per_backoff(secure_kafka, secure_seed, pki, case,
                                                         listener, engine):
    message = CREDENTIAL_REFUSALS[case][3]
    before = refused_logins(secure_kafka)
    consumer = KafkaConsumer(bootstrap_servers=secure_kafka.address(listener), group_protocol=engine,
                             reconnect_backoff_ms=1000, reconnect_backoff_max_ms=1000,
                             **refused_login(case, listener, pki))
    try:
        consumer.assign([TopicPartition(secure_seed.topic, 0)])
        with pytest.raises(errors.SaslAuthenticationFailedError, match=message) as raised:
            consumer.poll(timeout_ms=30_000)
        assert not raised.value.retriable
    finally:
        consumer.close()
    # One login per reconnect backoff, not a loop (the broker's own count).
    assert 1 <= refused_logins(secure_kafka) - before <= 2


@pytest.mark.parametrize("engine", ENGINES)
def test_sasl_client_at_a_plaintext_listener_raises(secure_kafka, pki, engine):
    """The broker answers the SaslHandshake with ILLEGAL_SASL_STATE (no mechanism enabled);
    Java raises IllegalSaslStateException naming the mechanism and the (empty) list."""
    consumer = KafkaConsumer(bootstrap_servers=secure_kafka.bootstrap_servers, group_protocol=engine,
                             **kproto_login("SASL_PLAINTEXT", "PLAIN", pki))
    assert_first_poll_raises(consumer, "t", errors.IllegalSaslStateError,
                             match=r"mechanism PLAIN, enabled mechanisms are \[\]")


@pytest.mark.parametrize("engine", ENGINES)
def test_session_lifetime_renewed_before_the_broker_ends_it(secure_kafka, secure_seed, pki, engine,
                                                            caplog):
    """KIP-368: SHORT_SESSION gives each login SHORT_SESSION_MS; kproto opens a fresh,
    newly authenticated connection before it ends, so the broker never has to close an
    expired one, and consuming goes on."""
    topic = secure_kafka.new_topic(prefix="renew")
    login = librdkafka_login("SASL_PLAINTEXT", "SCRAM-SHA-256", pki)
    first = produce_records(secure_kafka.address("SASL_PLAINTEXT"), topic, 10, producer_config=login)
    consumer = KafkaConsumer(bootstrap_servers=secure_kafka.address("SHORT_SESSION"),
                             group_protocol=engine, auto_offset_reset="earliest",
                             **kproto_login("SHORT_SESSION", "SCRAM-SHA-512", pki))
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got = consume_all(consumer, 10)
        created = consumer.metrics()["consumer-metrics"]["connection-creation-total"]
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="kproto.net"):
            deadline = time.monotonic() + 2.5 * SHORT_SESSION_MS / 1000
            while time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=200).values():
                    got.extend(batch)
        renewed = consumer.metrics()["consumer-metrics"]["connection-creation-total"] - created
        second = produce_records(secure_kafka.address("SASL_PLAINTEXT"), topic, 10, start_index=10,
                                 producer_config=login)
        got += consume_all(consumer, 10)
    finally:
        consumer.close()
    assert [(r.offset, r.value) for r in got] == [(w.offset, w.value) for w in first + second]
    assert renewed >= 2
    closed = [r.getMessage() for r in caplog.records if "closed the connection" in r.getMessage()]
    assert not closed, closed
