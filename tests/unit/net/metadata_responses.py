"""Metadata responses and a fresh ClusterMetadata for the sans-IO metadata tests."""

from __future__ import annotations

import uuid

from kproto.messages import MetadataResponse
from kproto.net.metadata import ClusterMetadata
from kproto.structs import BrokerMetadata


Broker = MetadataResponse.MetadataResponseBroker


Topic = MetadataResponse.MetadataResponseTopic


Partition = MetadataResponse.MetadataResponsePartition


TID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def response(leaders: dict[int, tuple[int, int]], *, topic="t", topic_id=TID, error=0,
             extra_topics=()):
    """A Metadata v12 response: partition -> (leader, epoch) for one topic."""
    parts = [Partition(partition_index=p, leader_id=leader, leader_epoch=epoch,
                       replica_nodes=[1, 2], isr_nodes=[1, 2]) for p, (leader, epoch) in leaders.items()]
    topics = [Topic(name=topic, topic_id=topic_id, error_code=error, partitions=parts)]
    topics += list(extra_topics)
    msg = MetadataResponse(brokers=[Broker(node_id=1, host="h1", port=9092, rack="r1"),
                                    Broker(node_id=2, host="h2", port=9093)],
                           cluster_id="c", controller_id=2, topics=topics)
    # Through the wire format, as the client sees it.
    return MetadataResponse.decode(msg.encode(12), 12)


def fresh() -> ClusterMetadata:
    return ClusterMetadata(metadata_max_age_ms=1000, retry_backoff_ms=100,
                           bootstrap_brokers=[BrokerMetadata("bootstrap-0", "b", 9092)])
