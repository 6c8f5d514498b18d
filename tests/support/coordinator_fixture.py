"""The ConsumerCoordinator fixture of the classic sans-IO tests: a coordinator over a
NetworkClient that never connects, and the metadata and listener it needs."""

from __future__ import annotations

import pytest

from kproto.consumer.classic.consumer_coordinator import ConsumerCoordinator
from kproto.consumer.config import ConsumerConfig
from kproto.consumer.engine_config import EngineConfig
from kproto.consumer.subscription_state import SubscriptionState
from kproto.messages import MetadataResponse
from kproto.net.client import NetworkClient


def metadata(topics):
    """A MetadataResponse naming one broker and ``{topic: partition_count}``."""
    R = MetadataResponse
    return R(brokers=[R.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=1)],
             topics=[R.MetadataResponseTopic(name=t, partitions=[
                 R.MetadataResponsePartition(partition_index=p, leader_id=1, replica_nodes=[1], isr_nodes=[1])
                 for p in range(n)]) for t, n in topics.items()])


class Recorder:
    def __init__(self):
        self.calls = []

    def on_partitions_revoked(self, partitions):
        self.calls.append(("revoked", set(partitions)))

    def on_partitions_assigned(self, partitions):
        self.calls.append(("assigned", set(partitions)))

    def on_partitions_lost(self, partitions):
        self.calls.append(("lost", set(partitions)))


@pytest.fixture
def make():
    made = []

    def build(topics=("t",), partitions=None, strategy=("range", "roundrobin"), **config):
        cfg = ConsumerConfig(dict(bootstrap_servers="127.0.0.1:9", group_id="g", enable_auto_commit=False,
                                  partition_assignment_strategy=strategy, client_rack="rack-a", **config))
        client = NetworkClient(**dict(cfg))
        made.append(client)
        client.cluster.update(metadata(partitions or {t: 4 for t in topics}), 0)
        subs = SubscriptionState("earliest")
        listener = Recorder()
        subs.subscribe(list(topics), listener)
        return ConsumerCoordinator(client, subs, EngineConfig.from_config(cfg)), subs, listener

    yield build
    for client in made:
        client.close()
