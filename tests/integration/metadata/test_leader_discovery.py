"""KIP-951 leader discovery from Fetch answers, and metadata refreshes on disconnect,
against librdkafka's mock cluster (fault injection: a fresh cluster per test).

The mock fills ``current_leader`` in Fetch v12+ NOT_LEADER_OR_FOLLOWER answers and
``node_endpoints`` in v16+ (checked: the consumer negotiates v16 with it).
"""

from __future__ import annotations

import logging
import time

import pytest

from kproto.messages import MetadataRequest
from tests.support.reading import assert_same, consume
from tests.integration.metadata.leaders import reading_from_broker_1
from tests.support.polling import clients, poll_until, wait  # noqa: F401 (clients: the fixture)

FETCH_API_KEY, METADATA_API_KEY = 1, 3
REQUEST_TIMED_OUT = 7


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
@pytest.mark.needs("fault_injection")
@pytest.mark.broker_kinds("mock")
def test_consumer_fetches_from_the_leader_a_fetch_answer_names(broker, group_protocol):
    # Java 3.7+ (KIP-951): a NOT_LEADER_OR_FOLLOWER answer names the new leader, and the
    # next Fetch goes there without waiting for metadata. Here every Metadata answer
    # after the move carries a retriable error for the topic, so the metadata keeps
    # naming the old leader: only the Fetch answer can tell the consumer where to go.
    with reading_from_broker_1(broker, group_protocol) as (consumer, tp, written, records):
        topic = tp.topic
        consumer.pause(tp)  # no Fetch while the stage is set
        written += broker.produce(topic, 10, start_index=10)
        broker.set_topic_error(topic, REQUEST_TIMED_OUT)
        broker.start_request_tracking()
        try:
            broker.set_partition_leader(topic, 0, 2)
            consumer.resume(tp)
            records += consume(consumer, 10, timeout_s=20)
            tracked = broker.requests()
            assert any(r.api_key == FETCH_API_KEY and r.broker_id == 2 for r in tracked)
            # The full refresh is still asked for (its answers carry the error, so they teach
            # nothing). It may come after the records: it waits out the KIP-580 backoff of
            # the answers before it, which taught nothing new either.
            deadline = time.monotonic() + 20
            while not any(r.api_key == METADATA_API_KEY for r in tracked):
                assert time.monotonic() < deadline, "no Metadata request after the leader moved"
                assert consumer.poll(timeout_ms=100) == {}
                tracked = broker.requests()
        finally:
            broker.stop_request_tracking()
    assert_same(records, written)


@pytest.mark.needs("fault_injection")
def test_a_broker_disconnecting_is_followed_by_a_metadata_request(mock_cluster_factory, clients):
    # Java's DefaultMetadataUpdater.handleServerDisconnect: "the disconnect may be the
    # result of stale metadata", so every disconnection asks for a refresh.
    cluster = mock_cluster_factory(3)
    client = clients(cluster, metadata_max_age_ms=600_000)
    wait(client, client.request_metadata_update())
    assert wait(client, client.send(2, MetadataRequest(topics=[])))
    assert not client.cluster.need_update()
    before = client.cluster.update_count
    cluster.start_request_tracking()
    try:
        cluster.broker_down(2)  # closes the connection to node 2
        assert poll_until(client, lambda: client.cluster.update_count > before)
        tracked = cluster.requests()
    finally:
        cluster.stop_request_tracking()
    assert any(r.api_key == METADATA_API_KEY and r.broker_id != 2 for r in tracked)


@pytest.mark.needs("fault_injection")
def test_a_broker_refusing_connections_does_not_cause_a_refresh_storm(mock_cluster_factory, clients, caplog):
    # Every refused reconnect (every 10 ms here) asks for a refresh, but refresh attempts
    # stay at least retry_backoff_ms apart. An attempt is a Metadata request, or a failed
    # attempt to reach a node for one: the node kept connecting here is the refusing one,
    # which the least-loaded choice prefers (as Java's) to nodes not yet connected.
    caplog.set_level(logging.DEBUG, logger="kproto.net.metadata")
    backoff_ms = 250
    cluster = mock_cluster_factory(3)
    client = clients(cluster, metadata_max_age_ms=600_000, retry_backoff_ms=backoff_ms,
                     reconnect_backoff_ms=10, reconnect_backoff_max_ms=10)
    wait(client, client.request_metadata_update())
    assert wait(client, client.send(2, MetadataRequest(topics=[])))
    cluster.broker_down(2)
    cluster.start_request_tracking()
    try:
        start, start_wall = time.monotonic(), time.time()
        while time.monotonic() - start < 1.5:
            client.ready(2)  # reconnect whenever the backoff allows
            client.poll(20)
        elapsed_ms = (time.monotonic() - start) * 1000
        tracked = cluster.requests()
    finally:
        cluster.stop_request_tracking()
    metadata_requests = sum(r.api_key == METADATA_API_KEY for r in tracked)
    failed_attempts = sum("refresh attempt" in r.getMessage() and "failed" in r.getMessage()
                          for r in caplog.records if r.created >= start_wall)
    # The broker really refused: the last attempt may still be connecting, so let it end.
    assert poll_until(client, lambda: client.connection_failed(2) is not None)
    assert 1 <= metadata_requests + failed_attempts <= elapsed_ms / backoff_ms + 1
