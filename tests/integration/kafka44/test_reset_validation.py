"""A position found by an offset reset is fetched from at once, as the Java consumer 4.4 does.

Java's ``OffsetFetcherUtils.resetPositionIfNeeded`` seeks to the offset ListOffsets gave
without its leader epoch: the leader just named that offset, so OffsetsForLeaderEpoch
would have nothing to check (the epoch only updates the metadata's last seen one). A
committed offset that carries an epoch is validated (``test_versions`` covers that).

On the three-node Kafka 4.4 cluster, whose ``EXTERNAL`` listeners are advertised at proxies
that log every request with its client id, a reader bootstraps at node 1's ``EXTERNAL``
listener, so every request after the bootstrap Metadata goes through the proxies. The Java
consumer (the test ground's peer in assign mode: ``seekToBeginning``, ``endOffsets``, then
polls) and kproto (assign mode, ``auto_offset_reset="earliest"``, both engines: their resets
are answered by different request managers) read the same records written by an
independent producer. Neither sends OffsetsForLeaderEpoch; both send ListOffsets, then
Fetch. (The code before sent OffsetsForLeaderEpoch for every reset partition, a round
trip before the first Fetch.)
"""

from __future__ import annotations

import uuid
import zlib

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.support.reading import consume

FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 1, 2, 23
EXTERNAL = "EXTERNAL"
PARTITIONS = 3
RECORDS = 60


def sent_by(cluster, client_id: str) -> list[int]:
    """The API keys ``client_id`` sent through the cluster's ``EXTERNAL`` proxies, in the
    order each proxy saw them (proxy by proxy)."""
    return [r.api_key for proxy in cluster.proxies[EXTERNAL] for r in proxy.requests()
            if r.client_id == client_id]


@pytest.fixture(scope="module")
def seeded(apache_kafka_cluster):
    cluster = apache_kafka_cluster
    topic = cluster.new_topic(partitions=PARTITIONS)
    written = cluster.produce(topic, RECORDS)
    assert {w.partition for w in written} == set(range(PARTITIONS))
    return cluster, topic, written


def bootstrap(cluster) -> str:
    return "{}:{}".format(*cluster.listener_address(EXTERNAL, 1))


def test_the_java_consumer_fetches_a_reset_position_without_validating_it(seeded, java_peer):
    cluster, topic, written = seeded
    client_id = "java-reset-" + uuid.uuid4().hex[:8]
    peer = java_peer.start("assign", bootstrap(cluster), topics=[topic], client_id=client_id)
    done = peer.wait_done()
    peer.stop()
    assert done["records"] == len(written)
    assert int(done["checksum"]) == sum(zlib.crc32(w.key or b"") + zlib.crc32(w.value or b"")
                                        for w in written) % 2 ** 64
    keys = sent_by(cluster, client_id)
    assert LIST_OFFSETS in keys and FETCH in keys, keys
    assert OFFSET_FOR_LEADER_EPOCH not in keys, keys


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_kproto_fetches_a_reset_position_without_validating_it(seeded, group_protocol):
    cluster, topic, written = seeded
    client_id = "kproto-reset-" + uuid.uuid4().hex[:8]
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with KafkaConsumer(bootstrap_servers=bootstrap(cluster), client_id=client_id, group_protocol=group_protocol,
                       auto_offset_reset="earliest", fetch_max_wait_ms=100) as consumer:
        consumer.assign(tps)
        records = consume(consumer, len(written))
        assert sorted((r.partition, r.offset, r.key, r.value) for r in records) == sorted(
            (w.partition, w.offset, w.key, w.value) for w in written)
        ends = {tp: max(w.offset for w in written if w.partition == tp.partition) + 1 for tp in tps}
        assert {tp: consumer.position(tp) for tp in tps} == ends
    keys = sent_by(cluster, client_id)
    assert LIST_OFFSETS in keys and FETCH in keys, keys
    assert OFFSET_FOR_LEADER_EPOCH not in keys, keys
    # Each node was asked for its partitions' offsets before it was fetched from.
    for proxy in cluster.proxies[EXTERNAL]:
        mine = [r.api_key for r in proxy.requests() if r.client_id == client_id]
        if FETCH in mine and LIST_OFFSETS in mine:
            assert mine.index(LIST_OFFSETS) < mine.index(FETCH), mine
