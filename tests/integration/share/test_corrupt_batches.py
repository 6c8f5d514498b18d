"""A corrupt record batch in a share group, on every broker with share groups (librdkafka's
mock, Apache Kafka 4.4), blocking and kproto.aio.

Java 4.2+'s rules (``ShareCompletedFetch.rejectRecordBatch``): the records before the
corrupt batch are returned, then ``poll`` raises ``CorruptRecordError`` whose ``offsets``
are the batch's acquired offsets (Java's ``ShareInFlightBatchException.offsets()``); none
of its records is handed out; each is REJECTed with the next acknowledgements (archived,
never delivered again) unless, in explicit mode, the application acknowledges it by offset
first, ``acknowledge(topic, partition, offset, type)``. The records after it come as usual.

How the batch gets corrupt: the mock stores a Produce request's batch as given, so it is
written with a flipped byte under its CRC; Kafka refuses such a batch, so it is written
intact and a :class:`~tests.brokers.corrupting_proxy.CorruptingProxy` in front of its
client listener flips the byte in every answer carrying it (``KafkaBehind``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, NamedTuple

import pytest

from kproto import AcknowledgeType
from kproto.aio import AIOKafkaShareConsumer
from kproto.errors import CorruptRecordError, IllegalStateError
from kproto.messages import ProduceRequest
from tests.brokers import raw
from tests.brokers.corrupting_proxy import FLIPPED, MARKER, CorruptingProxy, KafkaBehind
from tests.integration.share.members import DEADLINE_S, acknowledged, earliest_group, records, share_consumer
from tests.support.aio_harness import run
from tests.wire_log import WireLog

share_groups = pytest.mark.needs("share_groups")


@pytest.fixture(scope="module")
def kafka_behind_proxy():
    from tests.brokers import maven

    reason = maven.unavailable_reason()
    if reason is not None:
        pytest.skip("kafka behind a corrupting proxy: {}".format(reason))
    kafka = KafkaBehind(CorruptingProxy())
    yield kafka
    kafka.close()


class Corrupting(NamedTuple):
    broker: Any  # where topics, records and group settings go
    bootstrap_servers: str  # where the consumers connect
    flip_when_writing: bool


@pytest.fixture
def corrupting(broker, request) -> Corrupting:
    if broker.name == "mock":
        return Corrupting(broker, broker.bootstrap_servers, True)
    kafka = request.getfixturevalue("kafka_behind_proxy")
    return Corrupting(kafka, kafka.proxy.bootstrap_servers, False)


def write(where: Corrupting, topic: str) -> tuple[list[int], list[int]]:
    """Two good records, one batch of three (the second holding MARKER) that the consumer
    receives corrupt, two good records: (the good offsets, the corrupt batch's offsets).
    The batch is built by kafka-python (an independent implementation) and sent raw."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    good = [r.offset for r in where.broker.produce(topic, 2)]
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    now = int(time.time() * 1000)
    for i, value in enumerate([b"c0", b"c1-" + MARKER, b"c2"]):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    batch = bytes(builder.build())
    if where.flip_when_writing:
        batch = batch.replace(MARKER, FLIPPED)
    request = ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    address = raw.partition_leader(where.broker.bootstrap_servers, topic, 0)
    version = min(raw.negotiated_version(address, ProduceRequest, minimum=3), 12)  # v13 names topics by id
    part = raw.roundtrip(address, request, version).responses[0].partition_responses[0]
    assert part.error_code == 0, part
    good += [r.offset for r in where.broker.produce(topic, 2, start_index=10)]
    return good, [part.base_offset + i for i in range(3)]


@share_groups
def test_a_corrupt_batch_is_rejected_and_one_released_by_offset_comes_again(corrupting):
    group, _ = earliest_group(corrupting.broker)
    topic = corrupting.broker.new_topic(partitions=1)
    good, bad = write(corrupting, topic)
    seen: list[int] = []
    errors: list[CorruptRecordError] = []
    deadline = time.monotonic() + DEADLINE_S

    with WireLog() as wire, share_consumer(corrupting, group, topic, share_acknowledgement_mode="explicit") as consumer:
        while len(seen) < len(good) or len(errors) < 2:
            assert time.monotonic() < deadline, "seen {}, errors {}".format(seen, errors)
            try:
                polled = consumer.poll(200)
            except CorruptRecordError as error:
                errors.append(error)
                if len(errors) == 1:
                    with pytest.raises(IllegalStateError):  # only an offset of the corrupt batch
                        consumer.acknowledge(topic, 0, good[0], AcknowledgeType.RELEASE)
                    consumer.acknowledge(topic, 0, bad[0], AcknowledgeType.RELEASE)  # again, please
                continue  # the second time: REJECT, the default
            for record in records(polled):
                seen.append(record.offset)
                consumer.acknowledge(record)
        assert all(e is None for e in consumer.commit().values())
        with pytest.raises(IllegalStateError):  # its acknowledgement went out with the commit
            consumer.acknowledge(topic, 0, bad[0], AcknowledgeType.RELEASE)
        # Settled: a record written afterwards comes; the corrupt batch's records never again.
        sentinel = corrupting.broker.produce(topic, 1, start_index=50)[0].offset
        while sentinel not in seen:
            assert time.monotonic() < deadline, "seen {}".format(seen)
            for record in records(consumer.poll(200)):
                seen.append(record.offset)
                consumer.acknowledge(record)
    assert sorted(seen) == good + [sentinel]
    assert [(e.topic, e.partition, e.offset) for e in errors] == [(topic, 0, bad[0])] * 2
    assert [e.offsets for e in errors] == [set(bad), {bad[0]}]  # only the released one came again
    sent = acknowledged(wire)
    assert {k: n for k, n in sent.items() if k[0] in bad} == {
        (bad[0], AcknowledgeType.RELEASE): 1, (bad[0], AcknowledgeType.REJECT): 1,
        (bad[1], AcknowledgeType.REJECT): 1, (bad[2], AcknowledgeType.REJECT): 1}


@share_groups
def test_aio_a_corrupt_batch_is_rejected_by_default(corrupting):
    group, _ = earliest_group(corrupting.broker)
    topic = corrupting.broker.new_topic(partitions=1)
    good, bad = write(corrupting, topic)

    async def main() -> tuple[list[int], list[CorruptRecordError]]:
        seen: list[int] = []
        errors: list[CorruptRecordError] = []
        async with AIOKafkaShareConsumer(topic, bootstrap_servers=corrupting.bootstrap_servers, group_id=group,
                                         fetch_max_wait_ms=100) as consumer:
            deadline = asyncio.get_running_loop().time() + DEADLINE_S
            sentinel = None
            while sentinel not in seen:
                assert asyncio.get_running_loop().time() < deadline, "seen {}, errors {}".format(seen, errors)
                if sentinel is None and len(seen) == len(good):
                    assert all(e is None for e in (await consumer.commit()).values())
                    sentinel = corrupting.broker.produce(topic, 1, start_index=50)[0].offset
                try:
                    seen += [r.offset for r in records(await consumer.poll(200))]
                except CorruptRecordError as error:
                    errors.append(error)
        return seen, errors

    with WireLog() as wire:
        seen, errors = run(main)
    assert seen[:len(good)] == good and len(seen) == len(good) + 1  # implicit mode: the rest ACCEPTed
    assert [e.offsets for e in errors] == [set(bad)]  # REJECTed: never delivered again
    sent = acknowledged(wire)
    assert {k: n for k, n in sent.items() if k[0] in bad} == {(o, AcknowledgeType.REJECT): 1 for o in bad}
