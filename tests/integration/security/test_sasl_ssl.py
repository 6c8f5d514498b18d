"""SASL_SSL: SCRAM inside TLS, end to end.

Tansu 0.6.0 cannot serve TLS here (its ``--cert`` and ``--key`` options refuse to be given
together), so TLS is terminated by ``tests.brokers.proxy.BrokerProxy`` (a self-signed
certificate made with openssl), which forwards to the SCRAM gateway (``tests.sasl_gateway``,
scramp), which forwards to a plain Tansu advertising the TLS port. confluent-kafka seeds
the topic over SASL_SSL first, so the chain is known to work for librdkafka. Kafka 4.4's
own SASL_SSL listener (every mechanism) is tested in ``test_kafka_sasl.py``; this chain is
the second implementation.
"""

from __future__ import annotations

import shutil
import ssl

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from kproto.tools.embedded import TansuBroker
from tests.brokers.proxy import BrokerProxy
from tests.brokers.seeding import produce_records
from tests.sasl_gateway import SaslGateway
from tests.support.certs import make_cert
from tests.integration.security.sasl_checks import assert_first_poll_raises, consume_all

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

TOPIC = "sasl-ssl-topic"


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    pytest.importorskip("scramp")
    cert, key = make_cert(tmp_path_factory.mktemp("sasl-tls"), "localhost", "IP:127.0.0.1,DNS:localhost")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    gateway = SaslGateway({"SCRAM-SHA-512": {"bob": "bob-secret"}})
    tls = BrokerProxy(("127.0.0.1", gateway.port), context)
    broker = TansuBroker(advertised_port=tls.port)
    try:
        broker.start()
        gateway.upstream = ("127.0.0.1", broker.port)
        from confluent_kafka.admin import AdminClient, NewTopic
        conf = {"bootstrap.servers": tls.bootstrap_servers, "broker.address.family": "v4",
                "security.protocol": "SASL_SSL", "ssl.ca.location": cert, "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bob", "sasl.password": "bob-secret"}
        admin = AdminClient(conf)  # kept referenced until the futures resolve
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=15).values():
            future.result(15)
        written = produce_records(tls.bootstrap_servers, TOPIC, 30, producer_config={
            k: v for k, v in conf.items() if k != "bootstrap.servers"})
        yield {"servers": tls.bootstrap_servers, "cafile": cert, "written": written, "gateway": gateway}
    finally:
        tls.close()
        gateway.close()
        broker.stop()


@pytest.mark.parametrize("engine", ["classic", "consumer"])
def test_consume_over_sasl_ssl(chain, engine):
    consumer = KafkaConsumer(bootstrap_servers=chain["servers"], group_protocol=engine,
                             auto_offset_reset="earliest", security_protocol="SASL_SSL",
                             ssl_cafile=chain["cafile"], sasl_mechanism="SCRAM-SHA-512",
                             sasl_plain_username="bob", sasl_plain_password="bob-secret")
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        got = consume_all(consumer, len(chain["written"]))
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value, tuple(r.headers)) for r in got] == [
        (w.offset, w.key, w.value, w.headers) for w in chain["written"]]


def test_sasl_ssl_wrong_password(chain):
    consumer = KafkaConsumer(bootstrap_servers=chain["servers"], security_protocol="SASL_SSL",
                             ssl_cafile=chain["cafile"], sasl_mechanism="SCRAM-SHA-512",
                             sasl_plain_username="bob", sasl_plain_password="wrong")
    assert_first_poll_raises(consumer, TOPIC, errors.SaslAuthenticationError)
