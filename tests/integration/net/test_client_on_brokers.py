"""NetworkClient on every test broker (mock cluster, Tansu, Apache Kafka where Docker is)."""

from __future__ import annotations

import logging
import time

from kproto import errors
from kproto.messages import ApiVersionsRequest, ListOffsetsRequest, MetadataRequest
from kproto.net.client import NetworkClient
from kproto.structs import TopicPartition


def wait(client, future, timeout_ms=30_000):
    client.poll(timeout_ms, future=future)
    assert future.is_done, "no answer within {} ms".format(timeout_ms)
    if future.failed():
        raise future.exception
    return future.value


def test_metadata_and_negotiation(broker):
    topic = broker.new_topic(partitions=2)
    client = NetworkClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=20_000)
    try:
        wait(client, client.cluster.set_topics([topic]))
        md = client.cluster
        assert md.partitions_for_topic(topic) == {0, 1}
        assert md.brokers() and all(b.port > 0 and isinstance(b.node_id, int) for b in md.brokers())
        leader = md.leader_for_partition(TopicPartition(topic, 0))
        assert leader in {b.node_id for b in md.brokers()}
        tid = md.topic_id(topic)
        if tid is not None:
            assert md.topic_name(tid) == topic
        # A request to the leader at the negotiated version answers for the partition.
        request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=0, timestamp=-2)])])
        # A partition created a moment ago may be named in the metadata before its leader
        # has taken the leadership: Kafka then answers a retriable error
        # (NOT_LEADER_OR_FOLLOWER), which a client asks again after.
        deadline = time.monotonic() + 30
        while True:
            response = wait(client, client.send(leader, request))
            (t,) = response.topics
            code = t.partitions[0].error_code
            if code == 0 or not errors.for_code(code).retriable or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert t.name == topic and code == 0
        assert client.api_version(ListOffsetsRequest.api_key, leader) is not None
        versions = client.broker_api_versions(leader)
        assert versions[MetadataRequest.api_key][1] >= 1
    finally:
        client.close()


def test_wire_trace_shows_the_exchange(broker, caplog):
    client = NetworkClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        with caplog.at_level(logging.DEBUG, logger="kproto.wire"):
            wait(client, client.request_metadata_update())
        lines = [r.getMessage() for r in caplog.records if r.name == "kproto.wire"]
        assert any(line.startswith(">> node=bootstrap-") and " ApiVersionsRequest v" in line for line in lines)
        assert any(line.startswith("<< node=bootstrap-") and "ApiVersionsResponse"
                   in line and "'api_keys'" in line
                   for line in lines)
        assert any(line.startswith("<< ") and "MetadataResponse" in line and "'brokers'" in line
                   for line in lines)
    finally:
        client.close()


def test_api_versions_v0_is_answered(broker):
    client = NetworkClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        response = wait(client, client.send("bootstrap-0", ApiVersionsRequest(), version=0))
        assert response.error_code == 0
        assert {k.api_key for k in response.api_keys} >= {1, 3, 18}
    finally:
        client.close()
