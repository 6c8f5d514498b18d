"""KafkaConsumer (classic engine) with a group_id: commits, committed offsets and resuming.

The integration of ClassicKafkaConsumer with the classic ConsumerCoordinator: positions
seeded from committed offsets, commit/commit_async/committed in assign() mode, the final
auto-commit on close and subscribe() picking up where the group left off.
"""

from __future__ import annotations

import itertools
import time

import pytest

from kproto import KafkaConsumer, OffsetAndMetadata, TopicPartition
from tests.support.group_protocols import GROUP_PROTOCOLS
from tests.support.reading import assert_same, consume

pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka")

_groups = itertools.count()


def group_name() -> str:
    return "kproto-g-{}-{}".format(next(_groups), time.monotonic_ns())


def grouped(broker, group: str, *topics: str, **configs) -> KafkaConsumer:
    configs.setdefault("auto_offset_reset", "earliest")
    configs.setdefault("fetch_max_wait_ms", 100)
    # After a member's LeaveGroup the mock still lets the next join wait for that member's
    # session timeout (measured): keep it at the brokers' minimum.
    configs.setdefault("session_timeout_ms", 6000)
    configs.setdefault("heartbeat_interval_ms", 1000)
    return KafkaConsumer(*topics, bootstrap_servers=broker.bootstrap_servers, group_id=group, **configs)


def test_manual_commits_resume_without_loss_or_repeat(broker):
    topic = broker.new_topic(partitions=4)
    written = broker.produce(topic, 400)
    tps = [TopicPartition(topic, p) for p in range(4)]
    group = group_name()
    with grouped(broker, group, enable_auto_commit=False) as first:
        first.assign(tps)
        assert all(first.committed(tp) is None for tp in tps)
        records = consume(first, 150, max_records=50)
        # commit() takes the valid positions; a partition not polled yet may have none.
        positions = {tp: first.position(tp, timeout_ms=10000) for tp in tps}
        first.commit()
        assert {tp: first.committed(tp) for tp in tps} == positions
        assert first.committed(tps[0], metadata=True).offset == positions[tps[0]]
    with grouped(broker, group, enable_auto_commit=False) as second:
        second.assign(tps)
        assert {tp: second.position(tp, timeout_ms=10000) for tp in tps} == positions
        records += consume(second, len(written) - len(records))
        assert second.poll(timeout_ms=300) == {}
    assert_same(records, written)


def test_commit_explicit_offsets_and_async_callback(broker):
    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 20)
    tp = TopicPartition(topic, 0)
    with grouped(broker, group_name(), enable_auto_commit=False) as consumer:
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(7, "meta", -1)})
        committed = consumer.committed(tp, metadata=True)
        assert committed.offset == 7
        if broker.name != "tansu":  # Tansu drops commit metadata (measured)
            assert committed.metadata == "meta"
        # A new position comes from the committed offset.
        assert consumer.position(tp, timeout_ms=10000) == 7
        seen: list = []
        consumer.commit_async({tp: OffsetAndMetadata(12, "", -1)}, callback=lambda offsets, result: seen.append(
            (offsets, result)))
        deadline = time.monotonic() + 20
        while not seen and time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
        assert len(seen) == 1
        offsets, result = seen[0]
        assert offsets[tp].offset == 12 and not isinstance(result, Exception)
        assert consumer.committed(tp) == 12


@pytest.mark.needs("fast_classic_rebalance")
def test_auto_commit_on_close_then_a_new_member_resumes(broker):
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 200)
    tps = [TopicPartition(topic, p) for p in range(2)]
    group = group_name()
    with grouped(broker, group, topic, enable_auto_commit=True, auto_commit_interval_ms=60_000) as first:
        records = consume(first, 80, max_records=40)
        assert first.assignment() == set(tps)
        positions = {tp: first.position(tp, timeout_ms=10000) for tp in tps}
    # close() committed the consumed positions (auto-commit on, interval not reached).
    with grouped(broker, group, enable_auto_commit=False) as reader:
        assert {tp: reader.committed(tp) for tp in tps} == positions
    with grouped(broker, group, topic, enable_auto_commit=False) as second:
        records += consume(second, len(written) - len(records))
        assert second.assignment() == set(tps)
        assert second.poll(timeout_ms=300) == {}
    assert_same(records, written)


def test_auto_commit_on_close_in_assign_mode(broker):
    """Java commits manually assigned partitions on close too (auto-commit on)."""
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 100)
    tps = [TopicPartition(topic, p) for p in range(2)]
    group = group_name()
    with grouped(broker, group, enable_auto_commit=True, auto_commit_interval_ms=60_000) as first:
        first.assign(tps)
        consume(first, 60, max_records=30)
        positions = {tp: first.position(tp, timeout_ms=10000) for tp in tps}
    with grouped(broker, group, enable_auto_commit=False) as reader:
        assert {tp: reader.committed(tp) for tp in tps} == positions


@pytest.mark.parametrize("protocol", GROUP_PROTOCOLS)
def test_periodic_auto_commit_of_returned_positions(broker, protocol):
    """Auto-commit runs from poll() every auto_commit_interval_ms, committing the positions
    of records already returned, with no close() and no explicit commit."""
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 60)
    tps = [TopicPartition(topic, p) for p in range(2)]
    configs = dict(enable_auto_commit=True, auto_commit_interval_ms=100, group_protocol=protocol)
    if protocol == "consumer":  # grouped() sets classic-only settings the new protocol refuses
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group_name(),
                                 auto_offset_reset="earliest", fetch_max_wait_ms=100, **configs)
    else:
        consumer = grouped(broker, group_name(), **configs)
    with consumer:
        consumer.assign(tps)
        assert_same(consume(consumer, len(written)), written)
        ends = {tp: consumer.position(tp) for tp in tps}
        committed: dict = {}
        deadline = time.monotonic() + 30
        while committed != ends and time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
            committed = {tp: consumer.committed(tp) for tp in tps}
        assert committed == ends
