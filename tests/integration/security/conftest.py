"""The security tests' shared peers: the certificates of the session, and Kafka 4.4 with a
listener for every security mode (:class:`tests.brokers.secure_kafka.SecureKafka`, one JVM
for the session), seeded by librdkafka logging in with every mechanism on both SASL
listeners before kproto is checked."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import pytest

from tests.brokers.seeding import WrittenRecord, produce_records
from tests.brokers.secure_kafka import MECHANISMS, SASL_LISTENERS
from tests.support.certs import make_cert
from tests.integration.security.sasl_checks import PLAIN_USERS, SCRAM_USERS, librdkafka_login


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """Self-signed PEM certificates and keys: ``server`` (names localhost only), ``client``
    (trusted by the mutual-TLS peers) and ``stranger`` (trusted by nobody)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    directory = tmp_path_factory.mktemp("pki")
    return {"server": make_cert(directory, "localhost", "DNS:localhost"),
            "client": make_cert(directory, "kproto-client", "DNS:kproto-client"),
            "stranger": make_cert(directory, "stranger", "DNS:stranger")}


@dataclass
class SecureSeed:
    """What librdkafka wrote through the SASL listeners: ``topic`` (two partitions),
    ``written`` (sorted by partition and offset)."""

    topic: str
    written: list[WrittenRecord]


@pytest.fixture(scope="session")
def secure_kafka(pki):
    """Kafka 4.4 with SSL, MTLS, MTLS12, SASL_PLAINTEXT, SASL_SSL and SHORT_SESSION
    listeners beside PLAINTEXT, shared by the session, its TLS listeners checked with
    librdkafka first; skips without mvn and java."""
    from tests.brokers import maven
    from tests.brokers.secure_kafka import SecureKafka

    reason = maven.unavailable_reason()
    if reason is not None:
        pytest.skip("secure_kafka: {}".format(reason))
    kafka = SecureKafka(*pki["server"], pki["client"][0], PLAIN_USERS, SCRAM_USERS)
    try:
        _librdkafka_reaches_the_tls_listeners(kafka, pki)
        yield kafka
    finally:
        kafka.close()


def _librdkafka_reaches_the_tls_listeners(kafka, pki) -> None:
    """confluent-kafka reads the metadata through SSL, MTLS and MTLS12 (with the client
    certificate where one is required), so the listeners are known to work for an
    independent client before kproto is checked against them."""
    from confluent_kafka.admin import AdminClient

    for listener in ("SSL", "MTLS", "MTLS12"):
        conf = {"bootstrap.servers": kafka.address(listener), "security.protocol": "SSL",
                "ssl.ca.location": pki["server"][0], "broker.address.family": "v4"}
        if listener != "SSL":
            conf.update({"ssl.certificate.location": pki["client"][0],
                         "ssl.key.location": pki["client"][1]})
        brokers = AdminClient(conf).list_topics(timeout=30).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [
            ("localhost", kafka.ports[listener])], (listener, brokers)


@pytest.fixture(scope="session")
def secure_seed(secure_kafka, pki) -> SecureSeed:
    """A two-partition topic (created over PLAINTEXT) holding 8 records written by
    librdkafka with each mechanism on each SASL listener: each login is proven to work
    for an independent client before kproto tries it."""
    topic = secure_kafka.new_topic(partitions=2, prefix="sec")
    written: list[WrittenRecord] = []
    for listener in SASL_LISTENERS:
        for mechanism in MECHANISMS:
            written += produce_records(
                secure_kafka.address(listener), topic, 8, partitions=(0, 1),
                start_index=len(written), producer_config=librdkafka_login(
                    listener, mechanism, pki))
    return SecureSeed(topic, sorted(written, key=lambda w: (w.partition, w.offset)))
