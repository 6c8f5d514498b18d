"""The librdkafka mock cluster binding: each knob observed through a real client.

The observer is confluent-kafka (librdkafka's own client), since kproto's network client
is tested against these fixtures, not the other way round. No timing assertions: RTT and
rebalance-delay knobs are only shown to be accepted.
"""

from __future__ import annotations

import socket

import pytest

from tests.brokers._net import api_versions_v0_probe
from tests.brokers.mock_cluster import MockCluster, MockClusterError

API_PRODUCE, API_METADATA, API_API_VERSIONS = 0, 3, 18


def _admin(cluster):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers,
                        "broker.address.family": "v4", "log_level": 0})


def _leaders(cluster, topic):
    md = _admin(cluster).list_topics(topic, timeout=10)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def test_brokers_listen_on_loopback_with_ids_from_one(mock_cluster_factory):
    cluster = mock_cluster_factory(3)
    assert [h for h, _ in cluster.addresses] == ["127.0.0.1"] * 3
    md = _admin(cluster).list_topics(timeout=10)
    assert sorted(md.brokers) == [1, 2, 3]
    assert {(b.host, b.port) for b in md.brokers.values()} == set(cluster.addresses)


def test_create_topic_and_move_leaders(mock_cluster_factory):
    cluster = mock_cluster_factory(3)
    cluster.create_topic("moving", partitions=3)
    assert set(_leaders(cluster, "moving")) == {0, 1, 2}
    for p in range(3):
        cluster.set_partition_leader("moving", p, 2)
    assert _leaders(cluster, "moving") == {0: 2, 1: 2, 2: 2}


def test_broker_down_refuses_connections_until_up(mock_cluster_factory):
    cluster = mock_cluster_factory(2)
    address = cluster.addresses[1]
    cluster.broker_down(2)
    with pytest.raises(OSError):
        socket.create_connection(address, timeout=2).close()
    cluster.broker_up(2)
    assert api_versions_v0_probe(*address)


def test_request_tracking_records_api_keys_in_order(mock_cluster_factory):
    cluster = mock_cluster_factory(1)
    topic = cluster.new_topic()
    cluster.start_request_tracking()
    cluster.produce(topic, 3)
    seen = cluster.requests()
    keys = [r.api_key for r in seen]
    assert keys[0] == API_API_VERSIONS
    assert API_METADATA in keys and API_PRODUCE in keys
    assert keys.index(API_METADATA) < keys.index(API_PRODUCE)
    assert {r.broker_id for r in seen} == {1}
    assert [r.timestamp_us for r in seen] == sorted(r.timestamp_us for r in seen)
    cluster.clear_requests()
    assert cluster.requests() == []
    # librdkafka 2.16 drops the record when tracking stops (its header says otherwise),
    # and requests made while stopped are never recorded.
    cluster.produce(topic, 1)
    assert cluster.requests()
    cluster.stop_request_tracking()
    assert cluster.requests() == []
    cluster.produce(topic, 1)
    cluster.start_request_tracking()
    assert cluster.requests() == []


def test_broker_error_stack_is_consumed_by_requests(mock_cluster_factory):
    cluster = mock_cluster_factory(1)
    cluster.push_broker_request_error_rtts(1, API_METADATA, [(0, 0), (0, 1)])
    assert cluster.broker_error_stack_count(1, API_METADATA) == 2
    _admin(cluster).list_topics(timeout=10)
    assert cluster.broker_error_stack_count(1, API_METADATA) < 2


def test_injected_produce_error_fails_delivery(mock_cluster_factory):
    from tests.brokers import seeding

    cluster = mock_cluster_factory(1)
    topic = cluster.new_topic()
    # TOPIC_AUTHORIZATION_FAILED (29) is not retriable, so the producer reports it.
    cluster.push_request_errors(API_PRODUCE, [29])
    with pytest.raises(RuntimeError, match="TOPIC_AUTHORIZATION_FAILED"):
        seeding.produce_records(cluster.bootstrap_servers, topic, 1)
    # The stack is empty again: the next produce succeeds.
    assert [r.offset for r in cluster.produce(topic, 1)] == [0]


def test_kip848_target_assignment_reaches_the_member(mock_cluster_factory):
    from confluent_kafka import Consumer

    cluster = mock_cluster_factory(1)
    cluster.create_topic("assigned", partitions=4)
    cluster.set_group_consumer_heartbeat_interval(100)
    cluster.set_group_consumer_session_timeout(10000)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g848",
                         "group.protocol": "consumer", "log_level": 0})
    try:
        consumer.subscribe(["assigned"])
        for _ in range(60):
            consumer.poll(0.2)
            if consumer.assignment():
                break
        assert sorted(tp.partition for tp in consumer.assignment()) == [0, 1, 2, 3]
        cluster.set_target_assignment("g848", {consumer.memberid(): [("assigned", 1),
                                                                     ("assigned", 3)]})
        for _ in range(60):
            consumer.poll(0.2)
            if len(consumer.assignment()) == 2:
                break
        assert sorted(tp.partition for tp in consumer.assignment()) == [1, 3]
    finally:
        consumer.close()


def test_knobs_without_observable_result_are_accepted(mock_cluster_factory):
    # Latency and rebalance-delay knobs cannot be asserted without timing; here they must
    # at least reach librdkafka without error (ctypes signatures match).
    cluster = mock_cluster_factory(2)
    cluster.create_topic("knobs", partitions=1)
    cluster.broker_rtt(-1, 0)
    cluster.broker_rack(1, "rack-a")
    cluster.group_initial_rebalance_delay(0)
    cluster.set_partition_follower("knobs", 0, 2)
    cluster.set_partition_follower_wmarks("knobs", 0, -1, -1)
    cluster.push_leader_response("knobs", 0, 1, 5)
    cluster.set_coordinator("group", "g", 2)
    cluster.set_coordinator("transaction", "tx", 1)
    cluster.set_topic_error("knobs", 0)
    cluster.clear_request_errors(API_METADATA)
    with pytest.raises(ValueError):
        cluster.set_coordinator("consumer", "g", 1)


def test_bad_arguments_raise_clear_errors(mock_cluster_factory):
    with pytest.raises(ValueError):
        MockCluster(0)
    cluster = mock_cluster_factory(1)
    with pytest.raises(MockClusterError):
        cluster.broker_down(7)
    cluster.close()
    with pytest.raises(MockClusterError, match="destroyed"):
        cluster.create_topic("late")
    cluster.close()  # closing twice is harmless
