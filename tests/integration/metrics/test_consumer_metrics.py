"""Consumer metrics against real brokers, both engines, through the public KafkaConsumer.

Seeded by confluent-kafka's producer. Fetch metrics are checked with assign() (no group,
so every broker can run them); the group metrics on brokers with fast classic rebalances
or KIP-848. Loops wait for a condition with a generous deadline; nothing asserts on
durations.
"""

from __future__ import annotations

import itertools
import math

import pytest

from kproto import KafkaConsumer, TopicPartition
from kproto.errors import KafkaError
from tests.support.members import wait_for
from tests.threads import TestThread

pytestmark = [pytest.mark.broker]

PROTOCOLS = ["classic", "consumer"]
FETCH = "consumer-fetch-manager-metrics"
COORDINATOR = "consumer-coordinator-metrics"
_groups = itertools.count()


def tagged(consumer, name, group=FETCH):
    """``{tags-without-client-id: value}`` of the per-topic/per-partition metrics called
    ``name`` (raw view; the client-wide one, without such tags, is left out)."""
    out = {}
    for metric_name, metric in consumer.metrics(raw=True).items():
        if metric_name.name == name and metric_name.group == group:
            tags = tuple(sorted((k, v) for k, v in metric_name.tags.items() if k != "client-id"))
            if tags:
                out[tags] = metric.value()
    return out


def partition_tags(tp):
    return (("partition", str(tp.partition)), ("topic", tp.topic))


def value(consumer, name, group=FETCH):
    return consumer.metrics()[group][name]


def consume(consumer, n, seen):
    """Poll until ``n`` records in total were returned (``seen`` counts across calls)."""
    def step():
        for records in consumer.poll(200).values():
            seen.extend(records)
        return len(seen) >= n
    wait_for(step, "{} records".format(n))


class Recorder:
    """A metrics reporter (kafka-python's AbstractMetricsReporter interface)."""

    made: list = []

    def __init__(self):
        self.added, self.removed, self.closed = [], [], False
        Recorder.made.append(self)

    def init(self, metrics):
        self.added.extend(m.metric_name for m in metrics)

    def metric_change(self, metric):
        self.added.append(metric.metric_name)

    def metric_removal(self, metric):
        self.removed.append(metric.metric_name)

    def configure(self, configs):
        pass

    def close(self):
        self.closed = True


class CountingFetches:
    """Counts fetch responses with records as the shared fetch pipeline handles them."""

    def __init__(self, fetch):
        self.with_records = 0
        original = fetch.handle_fetch_success

        def handle(node_id, data, response, version):
            if any(p.records for t in response.responses for p in t.partitions):
                self.with_records += 1
            return original(node_id, data, response, version)

        fetch.handle_fetch_success = handle


def fetch_of(consumer, protocol):
    delegate = consumer._delegate
    if protocol == "classic":
        return delegate.fetcher
    from kproto.consumer.kip848.fetch_request_manager import FetchRequestManager
    return next(m for m in delegate.network_thread.resources.request_managers if isinstance(m, FetchRequestManager))


class Listener:
    """A rebalance listener that keeps what it was told (its timings are metrics)."""

    def __init__(self):
        self.revoked = []

    def on_partitions_assigned(self, partitions):
        pass

    def on_partitions_revoked(self, partitions):
        self.revoked.append(partitions)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fetch_metrics_count_what_was_consumed(broker, protocol):
    n = 60
    topic = broker.new_topic(partitions=3)
    written = broker.produce(topic, n)
    tps = [TopicPartition(topic, p) for p in range(3)]
    Recorder.made.clear()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol=protocol,
                             auto_offset_reset="earliest", max_poll_records=7, metrics_num_samples=3,
                             metric_reporters=[Recorder])
    try:
        fetches = CountingFetches(fetch_of(consumer, protocol))
        consumer.assign(tps)
        seen = []
        consume(consumer, n, seen)
        assert len(seen) == n
        # The last response's totals are recorded once each of its partitions is consumed.
        wait_for(lambda: consumer.poll(50) == {} and value(consumer, "records-consumed-total") == n,
                 "records-consumed-total to reach {}".format(n), limit_s=20)
        assert value(consumer, "records-consumed-total") == n
        # Readable from a monitoring thread (as Java's; not thread-confined).
        read = []
        reader = TestThread(target=lambda: read.append(consumer.metrics()[FETCH]["records-consumed-total"]))
        reader.start()
        reader.join()
        assert read == [n]
        assert tagged(consumer, "records-consumed-total") == {(("topic", topic),): n}
        total_bytes = value(consumer, "bytes-consumed-total")
        assert total_bytes > sum(len(w.value or b"") + len(w.key or b"") for w in written)
        assert tagged(consumer, "bytes-consumed-total") == {(("topic", topic),): total_bytes}
        assert value(consumer, "fetch-size-max") <= total_bytes
        assert value(consumer, "records-per-request-avg") > 0
        assert fetches.with_records >= 1
        assert value(consumer, "fetch-total") >= fetches.with_records
        assert not math.isnan(value(consumer, "fetch-latency-max"))
        # Everything was read: no lag left, and the lead is the whole partition.
        assert tagged(consumer, "records-lag") == {partition_tags(tp): 0 for tp in tps}
        assert tagged(consumer, "records-lead") == {partition_tags(tp): consumer.position(tp) for tp in tps}
        assert tagged(consumer, "preferred-read-replica") == {partition_tags(tp): -1 for tp in tps}
        metric = next(iter(consumer.metrics(raw=True).values()))
        assert metric.config.samples == 3
        assert value(consumer, "time-between-poll-max", "consumer-metrics") >= 0

        # Reassignment drops the per-partition metrics of the partitions given up (Java).
        consumer.assign(tps[:1])
        assert set(tagged(consumer, "records-lag")) == {partition_tags(tps[0])}
        assert set(tagged(consumer, "preferred-read-replica")) == {partition_tags(tps[0])}
        reporter, = Recorder.made
        assert {m.tags.get("partition") for m in reporter.removed if m.name == "records-lag"} == {"1", "2"}
    finally:
        consumer.close()
    assert consumer.metrics() == {} and reporter.closed


@pytest.mark.needs("list_offsets_latest_is_log_end")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_partition_lag_is_end_offset_minus_position(broker, protocol):
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 40)
    tps = [TopicPartition(topic, p) for p in range(2)]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol=protocol,
                             auto_offset_reset="earliest", max_poll_records=3)
    try:
        consumer.assign(tps)
        wait_for(lambda: consumer.poll(200), "a first batch of records")
        lags = tagged(consumer, "records-lag")
        assert lags, "no per-partition lag recorded after records were returned"
        ends = consumer.end_offsets(tps)
        for tp in tps:
            if partition_tags(tp) in lags:
                assert lags[partition_tags(tp)] == ends[tp] - consumer.position(tp) > 0
        assert value(consumer, "records-lag-max") == max(lags.values())
    finally:
        consumer.close()


def test_metrics_disabled_gives_none(mock_cluster):
    consumer = KafkaConsumer(bootstrap_servers=mock_cluster.bootstrap_servers, metrics_enabled=False)
    try:
        assert consumer.metrics() is None and consumer.metrics(raw=True) is None
    finally:
        consumer.close()


@pytest.mark.needs("classic_groups", "fast_classic_rebalance")
def test_classic_coordinator_metrics(broker):
    topic = broker.new_topic(partitions=3)
    broker.produce(topic, 30)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol="classic",
                             group_id="metrics-classic-{}".format(next(_groups)), auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=100)
    try:
        consumer.subscribe([topic], listener=Listener())
        consume(consumer, 30, [])
        values = consumer.metrics()[COORDINATOR]
        assert values["join-total"] >= 1 and values["sync-total"] >= 1
        assert values["rebalance-total"] >= 1 and values["last-rebalance-seconds-ago"] >= 0
        assert values["assigned-partitions"] == len(consumer.assignment()) == 3
        assert values["partition-assigned-latency-max"] >= 0  # NaN if the listener was not timed
        before = values["heartbeat-total"]
        wait_for(lambda: consumer.poll(100) == {} and value(consumer, "heartbeat-total", COORDINATOR) > before,
                 "heartbeat-total to grow while polling")
        assert value(consumer, "last-heartbeat-seconds-ago", COORDINATOR) >= 0
        consumer.commit()
        values = consumer.metrics()[COORDINATOR]
        assert values["commit-total"] >= 1 and values["commit-latency-max"] >= 0
        assert value(consumer, "commit-sync-time-ns-total", "consumer-metrics") > 0

        consumer.unsubscribe()
        assert tagged(consumer, "records-lag") == {}
        assert value(consumer, "assigned-partitions", COORDINATOR) == 0
        assert value(consumer, "partition-revoked-latency-max", COORDINATOR) >= 0
    finally:
        consumer.close()


@pytest.mark.needs("kip848")
def test_kip848_coordinator_metrics(broker):
    topic = broker.new_topic(partitions=3)
    broker.produce(topic, 30)
    listener = Listener()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol="consumer",
                             group_id="metrics-848-{}".format(next(_groups)), auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        consumer.subscribe([topic], listener=listener)
        consume(consumer, 30, [])
        values = consumer.metrics()[COORDINATOR]
        assert "join-total" not in values  # no JoinGroup in the new protocol
        assert values["heartbeat-total"] >= 1 and values["last-heartbeat-seconds-ago"] >= 0
        assert values["assigned-partitions"] == len(consumer.assignment()) == 3
        assert values["rebalance-total"] >= 1
        assert values["partition-assigned-latency-max"] >= 0
        consumer.commit()
        values = consumer.metrics()[COORDINATOR]
        assert values["commit-total"] >= 1 and values["commit-latency-max"] >= 0

        consumer.unsubscribe()
        wait_for(lambda: listener.revoked, "the revocation on unsubscribe")
        assert tagged(consumer, "records-lag") == {}
        assert value(consumer, "assigned-partitions", COORDINATOR) == 0
        assert value(consumer, "partition-revoked-latency-max", COORDINATOR) >= 0
    finally:
        consumer.close()


class FailingListener:
    """on_partitions_assigned raises (an application bug); counts its calls."""

    def __init__(self):
        self.assigned_calls = 0

    def on_partitions_assigned(self, partitions):
        self.assigned_calls += 1
        raise ValueError("app bug")

    def on_partitions_revoked(self, partitions):
        pass


@pytest.mark.needs("kip848")
def test_a_listener_that_raised_is_not_timed(broker):
    """Java records a listener's latency only when it returned (ConsumerRebalanceListenerInvoker)."""
    topic = broker.new_topic(partitions=1)
    listener = FailingListener()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol="consumer",
                             group_id="metrics-848-{}".format(next(_groups)), enable_auto_commit=False)
    try:
        consumer.subscribe([topic], listener=listener)

        def raised():
            try:
                consumer.poll(100)
            except KafkaError as exc:
                assert "app bug" in str(exc), exc
                return True
            return False
        wait_for(raised, "the listener's error from poll()")
        assert listener.assigned_calls >= 1
        values = consumer.metrics()[COORDINATOR]
        assert math.isnan(values["partition-assigned-latency-max"]), values
        assert math.isnan(values["partition-assigned-latency-avg"]), values
    finally:
        consumer.close()
