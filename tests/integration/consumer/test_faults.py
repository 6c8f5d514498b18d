"""KafkaConsumer (classic engine) under broker faults, bad configuration and misuse.

Faults run on fresh librdkafka mock clusters (leader moves, a broker down, injected
Fetch errors): every record must arrive exactly once.
"""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from tests.support.reading import assert_same, consume

NOT_LEADER_OR_FOLLOWER = 6
FETCH_API_KEY = 1


def _consumer(cluster, **configs) -> KafkaConsumer:
    configs.setdefault("auto_offset_reset", "earliest")
    configs.setdefault("fetch_max_wait_ms", 50)
    configs.setdefault("retry_backoff_ms", 20)
    configs.setdefault("reconnect_backoff_ms", 20)
    configs.setdefault("reconnect_backoff_max_ms", 200)
    configs.setdefault("metadata_max_age_ms", 5000)
    return KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, **configs)


def test_leader_moves_and_broker_down_lose_and_repeat_nothing(mock_cluster_factory):
    cluster = mock_cluster_factory(3)
    topic = cluster.new_topic(partitions=4)
    for p in range(4):
        cluster.set_partition_leader(topic, p, 1 + p % 3)
    written = cluster.produce(topic, 1200)
    with _consumer(cluster, max_poll_records=50) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        records = consume(consumer, 300)
        # Every partition moves to the next broker.
        for p in range(4):
            cluster.set_partition_leader(topic, p, 1 + (p + 1) % 3)
        records += consume(consumer, 300)
        # Broker 2 goes down; its partitions move to broker 3 (the others stay).
        cluster.broker_down(2)
        for p in range(4):
            cluster.set_partition_leader(topic, p, 3 if 1 + (p + 1) % 3 == 2 else 1 + (p + 1) % 3)
        records += consume(consumer, len(written) - len(records), timeout_s=60)
        cluster.broker_up(2)
        assert consumer.poll(timeout_ms=300) == {}
    assert_same(records, written)


def test_injected_not_leader_errors_are_survived(mock_cluster_factory):
    cluster = mock_cluster_factory(3)
    topic = cluster.new_topic(partitions=2)
    written = cluster.produce(topic, 400)
    with _consumer(cluster, max_poll_records=40) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        records = consume(consumer, 100)
        cluster.push_partition_request_errors(topic, 0, FETCH_API_KEY, [NOT_LEADER_OR_FOLLOWER] * 3)
        cluster.push_partition_request_errors(topic, 1, FETCH_API_KEY, [NOT_LEADER_OR_FOLLOWER] * 3)
        records += consume(consumer, len(written) - len(records))
        assert consumer.poll(timeout_ms=300) == {}
    assert_same(records, written)


@pytest.mark.parametrize("configs", [
    {"max_poll_records": 0},
    {"max_poll_records": -5},
    {"fetch_max_wait_ms": "soon"},
    {"auto_offset_reset": "sometimes"},
    {"isolation_level": "read_dirty"},
    {"group_protocol": "gossip"},
    {"request_timeout_ms": 2**40},
    {"check_crcs": "yes"},
    {"no_such_setting": 1},
    {"key_deserializer": 42},
    {"heartbeat_interval_ms": 50000, "session_timeout_ms": 10000},
    {"bootstrap_servers": ""},
    {"bootstrap_servers": "127.0.0.1:99999"},
    {"partition_assignment_strategy": "range,range"},  # no group_id: still checked
    {"group_protocol": "consumer", "max_partition_fetch_bytes": -1},
    {"fetch_max_wait_ms": float("inf")},
], ids=lambda c: ",".join(sorted(c)))
def test_hostile_config_raises_at_construction(configs):
    with pytest.raises(errors.KafkaConfigurationError):
        KafkaConsumer(**configs)


def test_misuse_raises_clear_errors(mock_cluster):
    topic = mock_cluster.new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    consumer = _consumer(mock_cluster)
    try:
        with pytest.raises(errors.IllegalStateError):
            consumer.poll(timeout_ms=10)  # nothing assigned
        with pytest.raises(errors.IllegalStateError, match="group_id"):
            consumer.commit()
        with pytest.raises(errors.IllegalStateError, match="group_id"):
            consumer.commit_async()
        with pytest.raises(errors.IllegalStateError, match="group_id"):
            consumer.committed(tp)
        with pytest.raises(errors.IllegalStateError):
            consumer.subscribe([topic])  # group management needs a group
        with pytest.raises(errors.IllegalStateError):
            consumer.position(tp)  # not assigned
        with pytest.raises(TypeError):
            consumer.position((topic, 0, 1))
        consumer.assign([tp])
        with pytest.raises(errors.IllegalArgumentError):
            consumer.seek(tp, -1)
        with pytest.raises(errors.IllegalStateError):
            consumer.seek(TopicPartition(topic, 9), 0)
        for bad in ({"timeout_ms": -1}, {"timeout_ms": "soon"}, {"timeout_ms": float("nan")},
                    {"timeout_ms": None}, {"max_records": 0}, {"max_records": 2.5}):
            with pytest.raises(errors.IllegalArgumentError):
                consumer.poll(**bad)
        assert consumer.assignment() == {tp}
    finally:
        consumer.close()
    with pytest.raises(errors.IllegalStateError):
        consumer.poll(timeout_ms=10)
    consumer.close()  # twice is fine


def test_close_is_prompt_with_an_unreachable_broker():
    # A port nobody listens on: construction and close must not hang.
    from tests.brokers._net import closed_port

    with closed_port() as port:
        consumer = KafkaConsumer(bootstrap_servers="127.0.0.1:{}".format(port),
                                 request_timeout_ms=1000, default_api_timeout_ms=1000)
        consumer.assign([TopicPartition("t", 0)])
        assert consumer.poll(timeout_ms=200) == {}
        with pytest.raises(errors.KafkaTimeoutError):
            consumer.beginning_offsets([TopicPartition("t", 0)], timeout_ms=300)
        started = time.monotonic()
        consumer.close(timeout_ms=500)
        assert time.monotonic() - started < 10


def test_next_fetch_is_sent_before_poll_returns(mock_cluster_factory):
    """Pipelining: when poll() hands out everything a fetch brought, the next Fetch is
    already written, so the broker receives it with no further call into the consumer."""
    from tests.brokers._net import wait_until

    cluster = mock_cluster_factory(1)
    topic = cluster.new_topic(partitions=1)
    # One record per batch: the mock answers each Fetch with one batch.
    written = cluster.produce(topic, 3, producer_config={"batch.num.messages": 1})
    with _consumer(cluster) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert consumer.position(TopicPartition(topic, 0), timeout_ms=10000) == 0
        cluster.start_request_tracking()
        got = consume(consumer, 1)
        assert [r.offset for r in got] == [written[0].offset]

        def fetches() -> int:
            return sum(1 for r in cluster.requests() if r.api_key == FETCH_API_KEY)

        # One Fetch brought the record; no call into the consumer from here on, and yet
        # the broker gets a second one.
        assert wait_until(lambda: fetches() >= 2, timeout=10), fetches()
        cluster.stop_request_tracking()


def test_wakeup_interrupts_a_blocking_offset_lookup():
    import threading

    from tests.brokers._net import closed_port

    with closed_port() as port:
        consumer = KafkaConsumer(bootstrap_servers="127.0.0.1:{}".format(port), default_api_timeout_ms=60_000)
        try:
            timer = threading.Timer(0.3, consumer.wakeup)
            timer.start()
            started = time.monotonic()
            with pytest.raises(errors.WakeupException):
                consumer.beginning_offsets([TopicPartition("t", 0)])  # nobody answers: blocks
            timer.join()
            # Not merely raised when the lookup gave up: well before its 60 s timeout.
            assert time.monotonic() - started < 60
        finally:
            consumer.close(timeout_ms=0)
