"""A cluster with a led and a followed partition, and an AbstractFetch over it (the
stale-answer and replica-choice tests)."""

from __future__ import annotations

import uuid

from kproto.consumer.config import ConsumerConfig
from kproto.consumer.fetch.abstract_fetch import AbstractFetch
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.subscription_state import FetchPosition, LeaderAndEpoch, SubscriptionState
from kproto.messages import MetadataResponse
from kproto.net.metadata import ClusterMetadata
from kproto.structs import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def cluster(brokers=(1, 2, 3), offline=()):
    md = ClusterMetadata()
    md.set_topics(["t"])
    response = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=9000 + n)
                 for n in brokers],
        topics=[MetadataResponse.MetadataResponseTopic(
            name="t", topic_id=uuid.UUID(int=7),
            partitions=[MetadataResponse.MetadataResponsePartition(
                partition_index=p, leader_id=1, leader_epoch=4, replica_nodes=[1, 2, 3], isr_nodes=[1, 2, 3],
                offline_replicas=list(offline)) for p in (0, 1)])])
    md.update(MetadataResponse.decode(response.encode(12), 12), 0)
    return md


def fetch_for(md):
    subs = SubscriptionState()
    subs.assign_from_user([T0, T1])
    for tp in (T0, T1):
        subs.seek_validated(tp, FetchPosition(5, 4, LeaderAndEpoch(1, 4)))
    config = FetchConfig.from_config(ConsumerConfig(client_rack="r1"))
    return AbstractFetch(config, subs, md, FetchBuffer(), time_ms=lambda: 0), subs
