"""A record that fails to deserialize (a poison record) in a share group, on every broker
with share groups (librdkafka's mock, Apache Kafka 4.1+), blocking and kproto.aio.

Java 4.2+'s rules (KAFKA-19471): ``poll`` raises the ``RecordDeserializationError`` for it;
the record is RELEASEd with the next acknowledgements (so it comes again, delivery_count +
1, up to the delivery limit) unless, in explicit mode, the application acknowledges it by
offset first, ``acknowledge(topic, partition, offset, type)``: REJECT archives it, ACCEPT
settles it. Any other offset, or the same one once the acknowledgements went out, is an
``IllegalStateError``; so is the method in implicit mode. The records after it come as usual.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

import pytest

from kproto import AcknowledgeType
from kproto.aio import AIOKafkaShareConsumer
from kproto.errors import DeserializationExceptionOrigin, IllegalStateError, RecordDeserializationError
from tests.integration.share.members import DEADLINE_S, acknowledged, earliest_group, records, share_consumer
from tests.support.aio_harness import run
from tests.wire_log import WireLog

share_groups = pytest.mark.needs("share_groups")


def failing_on(poison: Any) -> Callable[[Any], Any]:
    """A value deserializer that fails on ``poison`` only."""
    def deserialize(data: Any) -> Any:
        if data == poison:
            raise ValueError("poison")
        return data
    return deserialize


def poll_until(consumer: Any, done: Callable[[], bool], on_record: Callable[[Any], Any],
               on_error: Callable[[RecordDeserializationError], Any]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, "the share group did not deliver in time"
        try:
            polled = consumer.poll(200)
        except RecordDeserializationError as error:
            on_error(error)
            continue
        for record in records(polled):
            on_record(record)


def assert_carries_the_record(error: RecordDeserializationError, written: Any) -> None:
    """What Java's RecordDeserializationException carries."""
    tp = error.topic_partition
    assert (tp.topic, tp.partition, error.offset) == (  # type: ignore[attr-defined]
        written.topic, written.partition, written.offset)
    assert error.origin is DeserializationExceptionOrigin.VALUE and isinstance(error.__cause__, ValueError)
    assert (error.key_buffer, error.value_buffer, error.headers) == (written.key, written.value, written.headers)
    assert error.timestamp == written.timestamp


@share_groups
@pytest.mark.parametrize("kind", [AcknowledgeType.REJECT, AcknowledgeType.ACCEPT])
def test_a_poison_record_acknowledged_by_offset_is_not_delivered_again(broker, kind):
    group, _ = earliest_group(broker)
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 5)
    poison = written[2]
    seen: list = []
    errors: list = []

    with WireLog() as wire, share_consumer(broker, group, topic, share_acknowledgement_mode="explicit",
                                           value_deserializer=failing_on(poison.value)) as consumer:
        def judge(error):
            errors.append(error)
            with pytest.raises(IllegalStateError):  # only an offset that failed
                consumer.acknowledge(topic, 0, written[0].offset, kind)
            with pytest.raises(IllegalStateError):  # ... of that partition
                consumer.acknowledge(topic, 1, error.offset, kind)
            with pytest.raises(IllegalStateError):  # it was never delivered: nothing to renew
                consumer.acknowledge(topic, 0, error.offset, AcknowledgeType.RENEW)
            consumer.acknowledge(topic, 0, error.offset, kind)

        def take(record):
            seen.append((record.offset, record.delivery_count))
            consumer.acknowledge(record)
        poll_until(consumer, lambda: len(seen) == len(written) - 1, take, judge)
        assert all(e is None for e in consumer.commit().values())
        with pytest.raises(IllegalStateError):  # its acknowledgement went out with the commit
            consumer.acknowledge(topic, 0, poison.offset, kind)
        # Settled: a record written afterwards comes; the poison record never again.
        sentinel = broker.produce(topic, 1, start_index=50)[0]
        poll_until(consumer, lambda: any(o == sentinel.offset for o, _ in seen), take, judge)
    assert len(errors) == 1
    assert_carries_the_record(errors[0], poison)
    assert seen == [(w.offset, 1) for w in written + [sentinel] if w is not poison]
    sent = acknowledged(wire)
    assert {t: n for (o, t), n in sent.items() if o == poison.offset} == {kind: 1}  # never the default RELEASE


@share_groups
def test_implicit_mode_releases_a_poison_record_and_it_comes_again(broker):
    group, _ = earliest_group(broker)
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 3)
    poison = written[1]
    seen: list = []
    errors: list = []

    with WireLog() as wire, share_consumer(broker, group, topic,
                                           value_deserializer=failing_on(poison.value)) as consumer:
        def on_error(error):
            errors.append(error)
            with pytest.raises(IllegalStateError):  # explicit mode only, as in Java
                consumer.acknowledge(topic, 0, error.offset, AcknowledgeType.REJECT)
        poll_until(consumer, lambda: len(errors) >= 2 and len(seen) == 2,
                   lambda r: seen.append((r.offset, r.delivery_count)), on_error)
        consumer.commit()
    assert seen == [(written[0].offset, 1), (written[2].offset, 1)]
    for error in errors:
        assert_carries_the_record(error, poison)
    sent = acknowledged(wire)
    assert {t for (o, t) in sent if o == poison.offset} == {AcknowledgeType.RELEASE}
    assert sent[(poison.offset, AcknowledgeType.RELEASE)] >= len(errors) - 1  # each delivery released


@share_groups
def test_aio_a_poison_record_rejected_by_offset_is_not_delivered_again(broker):
    group, _ = earliest_group(broker)
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 3)
    poison = written[1]

    async def main() -> tuple[list, list]:
        seen: list = []
        errors: list = []
        async with AIOKafkaShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                         share_acknowledgement_mode="explicit", fetch_max_wait_ms=100,
                                         value_deserializer=failing_on(poison.value)) as consumer:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            sentinel = None
            while sentinel is None or all(o != sentinel.offset for o, _ in seen):
                assert loop.time() < deadline
                if sentinel is None and len(seen) == 2:
                    assert all(e is None for e in (await consumer.commit()).values())
                    sentinel = broker.produce(topic, 1, start_index=50)[0]
                try:
                    polled = await consumer.poll(200)
                except RecordDeserializationError as error:
                    errors.append(error)
                    with pytest.raises(IllegalStateError):
                        consumer.acknowledge(topic, 0, written[0].offset, AcknowledgeType.REJECT)
                    consumer.acknowledge(topic, 0, error.offset, AcknowledgeType.REJECT)
                    continue
                for r in records(polled):
                    seen.append((r.offset, r.delivery_count))
                    consumer.acknowledge(r)
        return seen, errors + [sentinel]

    seen, (*errors, sentinel) = run(main)
    assert len(errors) == 1
    assert_carries_the_record(errors[0], poison)
    assert seen == [(written[0].offset, 1), (written[2].offset, 1), (sentinel.offset, 1)]
