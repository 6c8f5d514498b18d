"""The Spark source's driver lookups at every planning: the log-end probe's Fetches and
fresh partition lists.

The resolver asks the same partitions at the same offsets at every planning. Its Fetches
must be sessionless full requests (session id 0, epoch -1): in an incremental fetch
session (KIP-227) an unchanged partition is not sent again and a broker that keeps
sessions (Apache Kafka) leaves a partition whose high watermark did not move out of its
answer, so an idle partition's end never comes. The sans-IO test drives the real
``AbstractFetch`` with the probe's settings against a session-offering broker's answers;
the broker tests call ``latest()`` twice over idle partitions (the mock and Tansu keep no
sessions; the ``fetch_sessions`` variant runs where a broker keeps them) and look at a
topic recreated with more partitions (neither the mock nor Tansu grows a topic: see
``test_spark_stream_planning``).
"""

from __future__ import annotations

import time

import pytest

from kproto.consumer.config import ConsumerConfig
from kproto.consumer.fetch.abstract_fetch import AbstractFetch
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_collector import FetchCollector
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.subscription_state import SubscriptionState
from kproto.messages import FetchRequest
from kproto.spark.options import parse_options
from kproto.spark.resolver import OffsetResolver, probe_config
from kproto.structs import TopicPartition
from tests.support.fetch_fixtures import LEADERS, T, cluster, response_for

WAIT_S = 60  # upper bound for a topic to be recreated; never a performance threshold


def options(bootstrap: str, topic: str, **extra):
    # A short request timeout and no retries: a Fetch answer that never comes fails the
    # call (KafkaTimeoutError) instead of being waited out.
    opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "kafka.request.timeout.ms": "5000",
            "fetchOffset.numRetries": "0"}
    opts.update(extra)
    return parse_options(opts, streaming=True)


def ends_of(written, topic: str, partitions: int) -> dict:
    return {TopicPartition(topic, p): 1 + max((w.offset for w in written if w.partition == p), default=-1)
            for p in range(partitions)}


def test_the_probe_fetches_every_partition_sessionless_at_every_planning():
    # Even with kafka.enable.incremental.fetch.sessions=true (the executors may use sessions).
    opts = options("127.0.0.1:9", "t", **{"kafka.enable.incremental.fetch.sessions": "true"})
    config = FetchConfig.from_config(ConsumerConfig(probe_config(opts)))
    subs = SubscriptionState()
    fetch = AbstractFetch(config, subs, cluster(), FetchBuffer(), time_ms=lambda: 0)
    for planning in range(3):
        # What _with_fetch_ends does: assign, seek to ListOffsets' answer, poll, unassign.
        subs.assign_from_user(T)
        for tp in T:
            subs.seek(tp, 5)
        requests = fetch.prepare_fetch_requests()
        assert set(requests) == set(LEADERS.values())
        for node, data in requests.items():
            version = fetch.request_version(data, 16)
            sent = FetchRequest.decode(fetch.create_fetch_request(data, version).encode(version), version)
            assert (sent.session_id, sent.session_epoch) == (0, -1), planning
            assert sorted(p.partition for t in sent.topics for p in t.partitions) == \
                sorted(p for p, leader in LEADERS.items() if leader == node), planning
            # The broker offers a session (id 9); the probe must not take it up.
            fetch.handle_fetch_success(node, data, response_for(requests, node, version, session_id=9), version)
        FetchCollector(subs, FetchConfig(max_poll_records=1)).collect_fetch(fetch.fetch_buffer)
        fetch.fetch_buffer.retain_all(set())
        subs.unsubscribe()


def _latest_twice_with_idle_partitions(broker) -> None:
    # One record per batch: Tansu's ListOffsets(LATEST) (last batch base + 1) is then the
    # log end, as Apache Kafka's, so the log-end Fetch of an idle partition returns no
    # records; partition 2 stays empty.
    topic = broker.new_topic(partitions=3)
    one_per_batch = {"batch.num.messages": 1}
    written = broker.produce(topic, 30, partitions=[0, 1], producer_config=one_per_batch)
    with OffsetResolver(options(broker.bootstrap_servers, topic)) as resolver:
        tps = resolver.topic_partitions()
        ends = ends_of(written, topic, 3)
        assert resolver.latest(tps) == ends
        # Nothing produced in between: every partition is idle, the answer the same.
        assert resolver.latest(tps) == ends
        assert resolver.latest(resolver.topic_partitions()) == ends
        # Partition 1 moves on, 0 and 2 stay idle.
        written += broker.produce(topic, 7, partitions=[1], start_index=100, producer_config=one_per_batch)
        ends = ends_of(written, topic, 3)
        assert resolver.latest(tps) == ends
        assert resolver.latest(tps) == ends


def test_latest_twice_with_idle_partitions(broker):
    _latest_twice_with_idle_partitions(broker)


@pytest.mark.needs("fetch_sessions")
def test_latest_twice_with_idle_partitions_on_a_broker_keeping_fetch_sessions(broker):
    _latest_twice_with_idle_partitions(broker)


def _recreate(broker, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 3})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while True:  # Apache Kafka deletes in the background: "already exists" for a while
        try:
            broker.create_topic(topic, partitions)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    # ... and its brokers learn of the new topic a moment after CreateTopics answers: wait
    # until an independent client's Metadata shows it, as the next planning would.
    while len(admin.list_topics(topic, timeout=WAIT_S).topics[topic].partitions) != partitions:
        if time.monotonic() > deadline:
            raise AssertionError("{} not seen with {} partitions".format(topic, partitions))
        time.sleep(0.2)


@pytest.mark.needs("create_topics_api")
def test_a_topic_recreated_with_more_partitions_is_seen_by_the_next_planning(broker):
    # The resolver's cached metadata would show the new partitions only after
    # metadata_max_age_ms (5 minutes by default).
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 10)
    with OffsetResolver(options(broker.bootstrap_servers, topic)) as resolver:
        assert resolver.topic_partitions() == [TopicPartition(topic, p) for p in range(2)]
        _recreate(broker, topic, 4)
        tps = resolver.topic_partitions()
        assert tps == [TopicPartition(topic, p) for p in range(4)]
        written = broker.produce(topic, 40)
        assert resolver.latest(tps) == ends_of(written, topic, 4)
