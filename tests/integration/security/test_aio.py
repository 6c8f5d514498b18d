"""kproto.aio over Kafka 4.4's TLS and SASL listeners: the loop drives the same TLS
handshake and SASL exchange as the blocking consumer, coordinator connection included."""

from __future__ import annotations

import asyncio

import pytest

from kproto.aio import AIOKafkaConsumer, TopicPartition
from tests.support.aio_harness import drain, run
from tests.integration.security.sasl_checks import kproto_login


def _tuples(records) -> list[tuple]:
    return sorted((r.partition, r.offset, r.key, r.value) for r in records)


@pytest.mark.parametrize("listener, mechanism", [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")])
def test_group_consumes_and_commits_over_sasl(secure_kafka, secure_seed, pki, listener, mechanism) -> None:
    topic = secure_seed.topic

    async def main() -> None:
        async with AIOKafkaConsumer(topic, bootstrap_servers=secure_kafka.address(listener),
                                    group_id="aio-{}-{}".format(listener, mechanism), auto_offset_reset="earliest",
                                    enable_auto_commit=False, **kproto_login(listener, mechanism, pki)) as consumer:
            got = await drain(consumer, len(secure_seed.written))
            assert _tuples(got.values()) == sorted((w.partition, w.offset, w.key, w.value)
                                                   for w in secure_seed.written)
            await consumer.commit()
            ends = {p: max(w.offset for w in secure_seed.written if w.partition == p) + 1 for p in (0, 1)}
            assert {p: await consumer.committed(TopicPartition(topic, p)) for p in (0, 1)} == ends

    run(main)


def test_assigned_consumer_over_mutual_tls(secure_kafka, secure_seed, pki) -> None:
    async def main() -> None:
        async with AIOKafkaConsumer(bootstrap_servers=secure_kafka.address("MTLS"), security_protocol="SSL",
                                    ssl_cafile=pki["server"][0], ssl_certfile=pki["client"][0],
                                    ssl_keyfile=pki["client"][1], auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(secure_seed.topic, p) for p in (0, 1)])
            got = await drain(consumer, len(secure_seed.written))
            assert len(got) == len(secure_seed.written)

    run(lambda: asyncio.wait_for(main(), 120))
