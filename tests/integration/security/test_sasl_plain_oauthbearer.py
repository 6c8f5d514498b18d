"""SASL PLAIN and OAUTHBEARER end to end, through ``tests.sasl_gateway`` in front of Tansu.

Tansu 0.6.0 enables neither mechanism, so the gateway parses them (RFC 4616, RFC 7628 as
KIP-255/342 use it). librdkafka logs in with both first (PLAIN to create the topic and
seed it, OAUTHBEARER with its built-in unsecured JWT to write more), so what the gateway
accepts is what an independent client sends; then kproto reads everything back with each
mechanism and both engines (assign mode). Kafka 4.4's own listeners, with every mechanism,
are tested in ``test_kafka_sasl.py``; this gateway is the second implementation.
"""

from __future__ import annotations

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from kproto.tools.embedded import TansuBroker
from tests.brokers.seeding import produce_records
from tests.sasl_gateway import SaslGateway
from tests.integration.security.sasl_checks import TokenProvider, assert_first_poll_raises, consume_all

TOPIC = "plain-oauth"
LIBRDKAFKA_PLAIN = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": "carol", "sasl.password": "carol-secret"}
LIBRDKAFKA_OAUTH = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                    "enable.sasl.oauthbearer.unsecure.jwt": True,
                    "sasl.oauthbearer.config": "principal=librdkafka extension_traceId=abc"}


@pytest.fixture(scope="module")
def token_gateway():
    gw = SaslGateway({}, plain={"carol": "carol-secret"}, oauth_tokens={"kproto-token"},
                     oauth_principals={"librdkafka"})
    broker = TansuBroker(advertised_port=gw.port)
    try:
        broker.start()
        gw.upstream = ("127.0.0.1", broker.port)
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": gw.bootstrap_servers, "broker.address.family": "v4",
                             **LIBRDKAFKA_PLAIN})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=15).values():
            future.result(15)
        written = produce_records(gw.bootstrap_servers, TOPIC, 20, producer_config=LIBRDKAFKA_PLAIN)
        written += produce_records(gw.bootstrap_servers, TOPIC, 20, start_index=20,
                                   producer_config=LIBRDKAFKA_OAUTH)
        assert ("PLAIN", "carol") in gw.logins and ("OAUTHBEARER", "librdkafka") in gw.logins
        assert {"traceId": "abc"} in gw.oauth_extensions
        yield gw, written
    finally:
        gw.close()
        broker.stop()


def read_back(gateway: SaslGateway, engine: str, **sasl) -> list:
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap_servers, group_protocol=engine,
                             auto_offset_reset="earliest", security_protocol="SASL_PLAINTEXT", **sasl)
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        return consume_all(consumer, 40)
    finally:
        consumer.close()


def same_records(got: list, written: list) -> bool:
    return [(r.offset, r.key, r.value, tuple(r.headers)) for r in got] == [
        (w.offset, w.key, w.value, w.headers) for w in written]


@pytest.mark.parametrize("engine", ["classic", "consumer"])
def test_plain_login_reads_records(token_gateway, engine):
    gateway, written = token_gateway
    got = read_back(gateway, engine, sasl_mechanism="PLAIN", sasl_plain_username="carol",
                    sasl_plain_password="carol-secret")
    assert same_records(got, written)


@pytest.mark.parametrize("engine", ["classic", "consumer"])
def test_oauthbearer_login_with_extensions_reads_records(token_gateway, engine):
    gateway, written = token_gateway
    provider = TokenProvider("kproto-token", {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"})
    before = len(gateway.oauth_extensions)
    got = read_back(gateway, engine, sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=provider)
    assert same_records(got, written)
    assert provider.calls >= 1  # a token per connection, asked when it authenticates
    assert gateway.oauth_extensions[before:] and all(
        ext == {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"} for ext in gateway.oauth_extensions[before:])


def test_plain_wrong_password(token_gateway):
    gateway, _ = token_gateway
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="carol", sasl_plain_password="nope")
    assert_first_poll_raises(consumer, TOPIC, errors.SaslAuthenticationFailedError)


@pytest.mark.parametrize("engine", ["classic", "consumer"])
def test_oauthbearer_rejected_token_goes_through_the_error_challenge(token_gateway, engine):
    gateway, _ = token_gateway
    before = len(gateway.failures)
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap_servers, group_protocol=engine,
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                             sasl_oauth_token_provider=TokenProvider("expired-token"))
    assert_first_poll_raises(consumer, TOPIC, errors.SaslAuthenticationFailedError)
    # The gateway saw the client's %x01 answer to its JSON challenge (the second round).
    assert ("OAUTHBEARER", "token rejected") in gateway.failures[before:]
