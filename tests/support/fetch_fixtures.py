"""An AbstractFetch over a real SubscriptionState and ClusterMetadata, and Fetch responses for
it (sans-IO)."""

from __future__ import annotations

import uuid

from kproto.consumer.config import ConsumerConfig
from kproto.consumer.fetch.abstract_fetch import AbstractFetch
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.subscription_state import SubscriptionState
from kproto.messages import FetchResponse, MetadataResponse
from kproto.net.metadata import ClusterMetadata
from kproto.structs import TopicPartition


TOPIC_ID = uuid.UUID(int=0xABC)


# Partition -> leader node: t-0 and t-2 on node 1, t-1 on node 2.
LEADERS = {0: 1, 1: 2, 2: 1}


T = [TopicPartition("t", p) for p in range(3)]


def cluster(topic_id=TOPIC_ID):
    md = ClusterMetadata()
    md.set_topics(["t"])
    response = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=9000 + n) for n in (1, 2)],
        topics=[MetadataResponse.MetadataResponseTopic(
            name="t", topic_id=topic_id,
            partitions=[MetadataResponse.MetadataResponsePartition(
                partition_index=p, leader_id=leader, leader_epoch=4, replica_nodes=[leader], isr_nodes=[leader])
                for p, leader in LEADERS.items()])])
    wire = response.encode(12)
    md.update(MetadataResponse.decode(wire, 12), 0)
    return md


def make(topic_id=TOPIC_ID, **config):
    fetch_config = FetchConfig.from_config(ConsumerConfig(fetch_max_wait_ms=250, fetch_min_bytes=10,
                                                          client_rack="r1", isolation_level="read_committed",
                                                          **config))
    subs = SubscriptionState()
    subs.assign_from_user(T)
    for tp in T:
        subs.seek(tp, 5)
    fetch = AbstractFetch(fetch_config, subs, cluster(topic_id), FetchBuffer(), time_ms=lambda: 0)
    return fetch, subs


def response_for(fetch_requests, node, version, session_id=0, records=None, error_code=0, partition_errors=None,
                 high_watermark=20, last_stable_offset=-1):
    """A broker-like response for the partitions a request names, through the real codec."""
    data = fetch_requests[node]
    topics = {}
    for tp, part in data.session_partitions.items():
        if tp not in data.to_send and data.metadata.is_full is False:
            continue
        entry = topics.setdefault(tp.topic, FetchResponse.FetchableTopicResponse(
            topic=tp.topic, topic_id=part.topic_id, partitions=[]))
        entry.partitions.append(FetchResponse.PartitionData(
            partition_index=tp.partition, high_watermark=high_watermark, last_stable_offset=last_stable_offset,
            error_code=(partition_errors or {}).get(tp, 0),
            records=(records or {}).get(tp, b"")))
    response = FetchResponse(error_code=error_code, session_id=session_id, responses=list(topics.values()))
    return FetchResponse.decode(response.encode(version), version)
