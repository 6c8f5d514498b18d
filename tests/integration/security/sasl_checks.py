"""What the SASL tests share: the accounts of Kafka's SASL listeners and the settings that
log in to them (librdkafka's and kproto's), a token provider, the first poll() raising the
authentication error, and consuming everything through an authenticated connection."""

from __future__ import annotations

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.brokers._net import wait_until
from tests.brokers.secure_kafka import unsecured_jws

PLAIN_USERS = {"carol": "carol-secret"}
SCRAM_USERS = {"SCRAM-SHA-256": {"alice": "alice-secret"}, "SCRAM-SHA-512": {"bob": "bob-secret"}}
#: mechanism -> (user, password) a client logs in with (OAUTHBEARER: the token's subject).
LOGINS = {"PLAIN": ("carol", "carol-secret"), "SCRAM-SHA-256": ("alice", "alice-secret"),
          "SCRAM-SHA-512": ("bob", "bob-secret"), "OAUTHBEARER": ("kproto", "")}


class TokenProvider:
    """kafka-python's AbstractTokenProvider interface: token() and optional extensions()."""

    def __init__(self, token: str, extensions: dict | None = None) -> None:
        self._token, self._extensions = token, extensions or {}
        self.calls = 0

    def token(self) -> str:
        self.calls += 1
        return self._token

    def extensions(self) -> dict:
        return self._extensions


def librdkafka_login(listener: str, mechanism: str, pki) -> dict:
    """confluent-kafka settings logging in to a SASL listener of :class:`SecureKafka`
    (tests.brokers.secure_kafka) with ``mechanism``."""
    conf = {"security.protocol": listener, "sasl.mechanism": mechanism,
            "broker.address.family": "v4"}
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = pki["server"][0]
    if mechanism == "OAUTHBEARER":
        conf.update({"enable.sasl.oauthbearer.unsecure.jwt": True,
                     "sasl.oauthbearer.config": "principal=librdkafka"})
    else:
        conf.update(zip(("sasl.username", "sasl.password"), LOGINS[mechanism]))
    return conf


def kproto_login(listener: str, mechanism: str, pki, user: str | None = None,
                 password: str | None = None) -> dict:
    """kproto settings logging in to a SASL listener of :class:`SecureKafka`."""
    conf: dict = {"security_protocol": "SASL_SSL" if listener == "SASL_SSL" else "SASL_PLAINTEXT",
                  "sasl_mechanism": mechanism}
    if listener == "SASL_SSL":
        conf["ssl_cafile"] = pki["server"][0]
    if mechanism == "OAUTHBEARER":
        conf["sasl_oauth_token_provider"] = TokenProvider(unsecured_jws(user or LOGINS[mechanism][0]))
    else:
        default_user, default_password = LOGINS.get(mechanism, LOGINS["SCRAM-SHA-512"])
        conf.update(sasl_plain_username=user or default_user,
                    sasl_plain_password=password or default_password)
    return conf


def assert_first_poll_raises(consumer: KafkaConsumer, topic: str, error: type, match: str | None = None) -> None:
    """Assigned partition 0 of ``topic``, the consumer's first poll() raises ``error``
    (the login failed); the consumer is closed either way."""
    try:
        consumer.assign([TopicPartition(topic, 0)])
        with pytest.raises(error, match=match):
            consumer.poll(timeout_ms=30_000)
    finally:
        consumer.close()


def consume_all(consumer: KafkaConsumer, expected: int) -> list:
    got: list = []

    def step() -> bool:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(batch)
        return len(got) >= expected

    assert wait_until(step, timeout=60, interval=0), "consumed {} of {}".format(len(got), expected)
    return got
