"""Rebootstrap (KIP-899, KIP-1102) on the three-node Kafka 4.4 cluster, when every address
the metadata names goes away while the cluster runs on.

A quorum of three keeps two nodes up, so the test takes addresses away, not nodes: the
session cluster's ``EXTERNAL`` and ``MOVED`` listeners are advertised at proxies the
cluster owns (:class:`~tests.brokers.maven_kafka.MavenKafkaCluster`'s proxied listeners), while
the quorum and replication run on its other listeners. The consumer bootstraps through a
proxy of the test's own in front of node 1's ``EXTERNAL`` listener, so the metadata it
gets names the ``EXTERNAL`` proxies. It reads a first round written by an independent
producer to a topic with three replicas; then the cluster "moves": the ``EXTERNAL`` proxies
are taken away (connections dropped, the addresses refuse new ones) and the bootstrap
proxy now leads to node 1's ``MOVED`` listener (its open connections dropped, as a load
balancer switched to a new backend), whose Metadata names the ``MOVED`` proxies: the same
node ids at new addresses. A second round is written meanwhile.

- ``metadata_recovery_strategy="rebootstrap"`` (Java's default): with no broker of its
  metadata left to try, the consumer goes back to the bootstrap address (a Metadata request
  through the bootstrap proxy after the move), fetches through the ``MOVED`` proxies and
  reads the second round.
- ``"none"``: the consumer keeps trying the addresses it knows: it reads nothing of the
  second round and sends nothing through the bootstrap proxy; once the ``EXTERNAL`` proxies
  are back it reads the second round through them, still without the bootstrap proxy.

``"rebootstrap"`` in assign mode, as a classic group member and as a KIP-848 member
(committing after each poll: the group's coordinator is found at its new address and takes
the commits); ``"none"`` in assign mode and as a KIP-848 member (whose own network thread
looks the coordinator up: never through the bootstrap address either). Every record
exactly once; the positions end at the log ends.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.brokers.proxy import BrokerProxy
from tests.integration.kafka44.test_broker_kill import Reader

FETCH, OFFSET_COMMIT, METADATA = 1, 8, 3
EXTERNAL, MOVED = "EXTERNAL", "MOVED"
#: How long the "none" consumer is watched not finding its way (its reconnect backoff is
#: at most 1 s, so it retries every known address several times meanwhile).
STUCK_S = 3.0


def requests_since(proxies: list[BrokerProxy], marks: list[int]) -> list[int]:
    """The API keys of the requests sent through ``proxies`` since ``marks``."""
    return [r.api_key for proxy, mark in zip(proxies, marks) for r in proxy.requests()[mark:]]


@pytest.mark.parametrize("mode, strategy", [("assign", "rebootstrap"), ("classic", "rebootstrap"),
                                            ("consumer", "rebootstrap"), ("assign", "none"),
                                            ("consumer", "none")])
def test_consumer_follows_the_bootstrap_address_when_the_cluster_moves(apache_kafka_cluster, mode, strategy):
    cluster = apache_kafka_cluster
    topic = cluster.new_topic(partitions=3)
    bootstrap = BrokerProxy(cluster.listener_address(EXTERNAL, 1))
    group = {} if mode == "assign" else {
        "group_id": "g-" + uuid.uuid4().hex, "group_protocol": mode, "enable_auto_commit": False}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.bootstrap_servers, auto_offset_reset="earliest",
                             fetch_max_wait_ms=100, metadata_recovery_strategy=strategy,
                             reconnect_backoff_max_ms=1000, **group)
    try:
        if mode == "assign":
            consumer.assign([TopicPartition(topic, p) for p in range(3)])
        else:
            consumer.subscribe([topic])
        reader = Reader(consumer, commit=mode != "assign")
        written = cluster.produce(topic, 30)
        reader.read(len(written))

        marks = [len(bootstrap.requests())], [len(p.requests()) for p in cluster.proxies[MOVED]]
        bootstrap.redirect(cluster.listener_address(MOVED, 1))
        cluster.take_away(EXTERNAL)
        written += cluster.produce(topic, 30, start_index=100)
        if strategy == "none":
            deadline = time.monotonic() + STUCK_S
            while time.monotonic() < deadline:
                assert consumer.poll(timeout_ms=200) == {}
            assert requests_since([bootstrap], marks[0]) == []
            cluster.bring_back(EXTERNAL)
        reader.read(len(written))

        via_bootstrap = requests_since([bootstrap], marks[0])
        via_moved = requests_since(cluster.proxies[MOVED], marks[1])
        if strategy == "rebootstrap":
            assert METADATA in via_bootstrap
            assert FETCH in via_moved
            if mode != "assign":
                assert OFFSET_COMMIT in via_moved
        else:
            assert via_bootstrap == [] and via_moved == []
        assert consumer.poll(timeout_ms=300) == {}
        assert set(reader.seen) == {(w.partition, w.offset) for w in written}
        assert reader.unexplained == []
        if not reader.refused:
            assert set(reader.seen.values()) == {1}
        ends = {p: max(w.offset for w in written if w.partition == p) + 1 for p in range(3)}
        assert {p: consumer.position(TopicPartition(topic, p)) for p in range(3)} == ends
        if mode != "assign":
            consumer.commit()
            assert {p: consumer.committed(TopicPartition(topic, p)) for p in range(3)} == ends
    finally:
        consumer.close()
        bootstrap.close()
        cluster.bring_back(EXTERNAL)


def test_kafka_refuses_to_change_advertised_listeners_at_runtime(apache_kafka_cluster):
    # Why the test moves its client between two listeners: a running node's advertised
    # addresses stay (a cluster moves only by restarts). Asked with the current value, so
    # the session cluster would not change even if Kafka took it.
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)

    cluster = apache_kafka_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    entry = ConfigEntry("advertised.listeners", cluster.node(1).settings["advertised.listeners"],
                        incremental_operation=AlterConfigOpType.SET)
    (future,) = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.BROKER, "1", incremental_configs=[entry])]).values()
    with pytest.raises(Exception, match="Cannot update these configs dynamically"):
        future.result(timeout=30)
