"""The classic Fetcher over kproto's NetworkClient against real brokers.

Records written by confluent-kafka (an independent producer) are read back with
``assign`` semantics (SubscriptionState + Fetcher + FetchCollector) and compared field
by field. Loops are bounded by a number of network polls, never by elapsed time.
"""

from __future__ import annotations

import pytest

from kproto.consumer.classic.fetcher import Fetcher
from kproto.consumer.config import ConsumerConfig
from kproto.consumer.fetch import FetchConfig
from kproto.consumer.subscription_state import SubscriptionState
from kproto.net.client import NetworkClient
from kproto.structs import TopicPartition

# The bytes a broker serves: Tansu is a second implementation of them (tests/conftest.py).
pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka", "tansu")

MAX_POLLS = 400


def _consumer_parts(broker, topic, **config):
    consumer_config = ConsumerConfig(bootstrap_servers=broker.bootstrap_servers, **config)
    client = NetworkClient(**dict(consumer_config))
    future = client.cluster.set_topics([topic])
    client.poll(30000, future=future)
    subs = SubscriptionState(consumer_config.auto_offset_reset)
    parts = [TopicPartition(topic, p) for p in broker.partitions_of(topic)]
    subs.assign_from_user(parts)
    for tp in parts:
        subs.seek(tp, 0)
    return client, subs, Fetcher(client, subs, FetchConfig.from_config(consumer_config))


def _consume(client, fetcher, want):
    got = []
    for _ in range(MAX_POLLS):
        fetcher.send_fetches()
        fetch = fetcher.collect_fetch()
        for records in fetch.records.values():
            got.extend(records)
        if len(got) >= want:
            break
        client.poll(200)
    return got


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_fetcher_reads_what_the_producer_wrote(broker, codec):
    topic = broker.new_topic(partitions=3)
    written = broker.produce(topic, 300, codec=codec)
    client, subs, fetcher = _consumer_parts(broker, topic, max_poll_records=50)
    try:
        got = _consume(client, fetcher, len(written))
        assert len(got) == len(written)
        got.sort(key=lambda r: (r.partition, r.offset))
        for rec, exp in zip(got, written):
            assert (rec.topic, rec.partition, rec.offset) == (exp.topic, exp.partition, exp.offset)
            assert (rec.key, rec.value, rec.timestamp) == (exp.key, exp.value, exp.timestamp)
            assert [(k, v) for k, v in rec.headers] == [(k, v) for k, v in exp.headers]
        for tp in subs.assigned_partitions():
            last = max(r.offset for r in written if r.partition == tp.partition)
            assert subs.position(tp).offset == last + 1
            assert subs.high_watermark(tp) == last + 1
    finally:
        fetcher.close(timeout_ms=2000)
        client.close()


def test_fetcher_seek_back_rereads_exactly(broker):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 40)
    client, subs, fetcher = _consumer_parts(broker, topic, max_poll_records=7)
    tp = TopicPartition(topic, 0)
    try:
        assert len(_consume(client, fetcher, 40)) == 40
        subs.seek(tp, 25)
        again = _consume(client, fetcher, 15)
        assert [r.offset for r in again] == list(range(25, 40))
        assert [r.value for r in again] == [w.value for w in written[25:]]
    finally:
        fetcher.close(timeout_ms=2000)
        client.close()


# Tansu answers a fetch past the log end with no error and no data, so it cannot show this.
@pytest.mark.broker_kinds("mock", "apache_kafka")
def test_fetcher_out_of_range_requests_reset(broker):
    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 5)
    client, subs, fetcher = _consumer_parts(broker, topic, auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    try:
        subs.seek(tp, 1000)
        for _ in range(MAX_POLLS):
            fetcher.send_fetches()
            fetcher.collect_fetch()
            if subs.is_offset_reset_needed(tp):
                break
            client.poll(200)
        assert subs.is_offset_reset_needed(tp)
    finally:
        fetcher.close(timeout_ms=2000)
        client.close()


# The mock and Tansu answer session id 0; Apache Kafka and Tansu behind the
# fetch-session front keep sessions.
@pytest.mark.needs("fetch_sessions")
def test_fetcher_uses_incremental_sessions(broker):
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 60)
    client, subs, fetcher = _consumer_parts(broker, topic, max_poll_records=10)
    try:
        got = _consume(client, fetcher, len(written))
        assert sorted((r.partition, r.offset) for r in got) == [(w.partition, w.offset) for w in written]
        (handler,) = fetcher.session_handlers.values()
        assert handler.next_metadata.session_id != 0 and handler.next_metadata.epoch >= 1
        # Seeking back is an altered partition in the same session, and the data comes again.
        tp = TopicPartition(topic, 0)
        subs.seek(tp, 0)
        want = sum(1 for w in written if w.partition == 0)
        again = [r for r in _consume(client, fetcher, want) if r.partition == 0]
        assert [r.offset for r in again][:want] == [w.offset for w in written if w.partition == 0]
    finally:
        fetcher.close(timeout_ms=2000)
        client.close()
