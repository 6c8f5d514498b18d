"""KIP-580 on librdkafka's mock cluster: the consumer's Metadata requests back off
exponentially, measured by the arrival times the mock records (fresh cluster per test).

Two Java paths: failed Metadata requests in a row (``attempts``; here each Metadata answer
is held back by the broker past ``request_timeout_ms``), and answers in a row that teach
nothing new (``equivalentResponseCount``; here the topic's Metadata answers carry a
retriable error while the fetch path keeps asking for fresher leaders). With a flat
backoff the gaps between requests stay equal; with Java's they grow from
``retry_backoff_ms`` (100) towards ``retry_backoff_max_ms`` (1000, the default).
"""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.support.reading import assert_same, consume
from tests.integration.metadata.leaders import reading_from_broker_1

pytestmark = [pytest.mark.needs("fault_injection"), pytest.mark.parametrize("group_protocol", ["classic", "consumer"])]

METADATA_API_KEY = 3
REQUEST_TIMED_OUT = 7


def metadata_gaps_ms(cluster) -> list[float]:
    """Milliseconds between consecutive Metadata requests the mock received."""
    arrivals = [r.timestamp_us for r in cluster.requests() if r.api_key == METADATA_API_KEY]
    return [(b - a) / 1000 for a, b in zip(arrivals, arrivals[1:])]


def test_metadata_requests_that_time_out_are_retried_with_growing_gaps(mock_cluster_factory, group_protocol):
    cluster = mock_cluster_factory(1)  # one broker: every Metadata request goes to it
    topic = cluster.new_topic(partitions=1)
    written = cluster.produce(topic, 5)
    failures = 6
    # The next six Metadata answers come 3 s late: each request times out (300 ms), the
    # connection is closed and the refresh counts as failed.
    cluster.push_broker_request_error_rtts(1, METADATA_API_KEY, [(0, 3000)] * failures)
    cluster.start_request_tracking()
    with KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_protocol=group_protocol,
                       request_timeout_ms=300, fetch_max_wait_ms=50, reconnect_backoff_ms=10,
                       reconnect_backoff_max_ms=50, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        records = []
        deadline = time.monotonic() + 30
        while len(records) < len(written) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=100).values():
                records.extend(batch)
        gaps = metadata_gaps_ms(cluster)
    # Then the seventh answer came in time and the consumer went on.
    assert_same(records, written)
    assert len(gaps) >= failures, gaps
    # Each gap is the 300 ms timeout plus the backoff: ~100, 200, 400, 800, 1000 (+-20%,
    # capped) in a row, so the last two are >= 300 + 800 ms; a flat backoff makes them all
    # alike (~400 ms). Lower bounds only: a stalled machine lengthens gaps, never shortens
    # them, so an early gap stretched by a stall cannot fail the test.
    assert gaps[0] >= 300 + 0.8 * 100 - 5, gaps
    assert min(gaps[failures - 2:failures]) >= 300 + 0.8 * 1000 - 5, gaps


def test_answers_that_teach_nothing_new_are_asked_for_less_and_less_often(mock_cluster_factory, group_protocol):
    cluster = mock_cluster_factory(3)
    with reading_from_broker_1(cluster, group_protocol) as (consumer, tp, written, records):
        topic = tp.topic
        # From now on every Metadata answer carries a retriable error for the topic (each
        # asks for another refresh, as Java's requestUpdate(false)) and the leader moves:
        # the fetch path asks for fresher leaders, the answers never tell more.
        cluster.set_topic_error(topic, REQUEST_TIMED_OUT)
        cluster.start_request_tracking()
        cluster.set_partition_leader(topic, 0, 2)
        window_end = time.monotonic() + 3
        while time.monotonic() < window_end:
            consumer.poll(timeout_ms=100)
        gaps = metadata_gaps_ms(cluster)
        # A flat 100 ms backoff sends ~30 requests in the window, 80-120 ms apart; Java's
        # ~6, 100, 200, 400, 800 ms (+-20%) apart, so even the shortest window of three
        # gaps ends with two of >= 160 ms. Lower bounds only (a stall lengthens gaps).
        assert 3 <= len(gaps) <= 12, gaps
        assert min(gaps[-2:]) >= 0.8 * 200, gaps
        # An answer with news resets the backoff: the error cleared and the leader moved
        # again, the consumer follows and reads on.
        cluster.set_topic_error(topic, 0)
        cluster.set_partition_leader(topic, 0, 3)
        written += cluster.produce(topic, 5, start_index=10)
        records += consume(consumer, 5, timeout_s=20)
    assert_same(records, written)
