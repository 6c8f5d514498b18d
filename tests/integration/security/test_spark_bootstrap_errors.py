"""The Spark source's first lookup against a listener it cannot use: the query stops at
planning, before any task, with one line naming the broker and the reason (issue: errors in
seconds, with the cause).

The planner's lookups are :class:`kproto.spark.resolver.OffsetResolver`'s, run here
directly against Kafka 4.4's listeners (:class:`tests.brokers.secure_kafka.SecureKafka`):
a client speaking the wrong security protocol, a TLS client that does not trust the
broker's certificate, and a SASL login with a wrong password. Without the fail-fast path the
first two waited out ``default.api.timeout.ms`` (60 s) and said only "no cluster metadata".
"""

from __future__ import annotations

import pytest

from kproto import errors
from kproto.spark.options import parse_options
from kproto.consumer.reachability import FAIL_FAST_MS
from kproto.spark.resolver import OffsetResolver

pytestmark = pytest.mark.broker


def plan(bootstrap: str, **kafka: str) -> list:
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": "t", "fetchOffset.numRetries": "0"}
    options.update({"kafka." + k: v for k, v in kafka.items()})
    with OffsetResolver(parse_options(options, streaming=False)) as resolver:
        return resolver.topic_partitions()


def test_a_plaintext_client_on_a_tls_listener_fails_at_once(secure_kafka):
    # The broker answers the first request with a TLS alert: fatal, named as such.
    address = secure_kafka.address("SSL")
    with pytest.raises(errors.SslAuthenticationError) as caught:
        plan(address)
    message = str(caught.value)
    assert "\n" not in message and address in message and "TLS listener" in message, message


def test_a_plaintext_client_on_a_sasl_listener_fails_fast_naming_the_broker(secure_kafka):
    # A SASL listener allows nothing but ApiVersions and the SASL handshake before a login:
    # it hangs up on the Metadata request, again and again; after FAIL_FAST_MS the planner
    # stops with what every bootstrap address answered.
    address = secure_kafka.address("SASL_PLAINTEXT")
    with pytest.raises(errors.NoBrokersAvailable) as caught:
        plan(address)
    message = str(caught.value)
    assert "\n" not in message, message
    assert "bootstrap servers {} ".format(address) in message and "within {} ms".format(FAIL_FAST_MS) in message
    assert "tried {} (".format(address) in message, message


def test_a_tls_client_on_a_plaintext_listener_fails_fast(secure_kafka):
    address = secure_kafka.address("PLAINTEXT")
    with pytest.raises(errors.NoBrokersAvailable) as caught:
        plan(address, **{"security.protocol": "SSL"})
    message = str(caught.value)
    assert "\n" not in message and "tried {} (".format(address) in message, message
    assert "listener without TLS" in message, message


def test_a_tls_client_that_does_not_trust_the_broker_fails_at_once(secure_kafka, pki):
    address = secure_kafka.address("SSL")
    with pytest.raises(errors.SslAuthenticationError) as caught:
        plan(address, **{"security.protocol": "SSL", "ssl.cafile": pki["stranger"][0]})
    message = str(caught.value)
    assert "certificate verify failed" in message and address.split(":")[1] in message, message


def test_a_refused_sasl_login_fails_at_once(secure_kafka):
    address = secure_kafka.address("SASL_PLAINTEXT")
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="carol" password="nope";'
    with pytest.raises(errors.AuthenticationError) as caught:
        plan(address, **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.jaas.config": jaas})
    message = str(caught.value)
    assert "\n" not in message and address in message and "refused the PLAIN login" in message, message
