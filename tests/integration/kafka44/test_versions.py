"""Every consumer API goes out at the newest version both Kafka and kproto speak.

The consumer's own wire trace (:class:`~tests.integration.kafka44.wire.WireLog`) gives the
version of each request it encoded and the decoded answers. The expected version of each
API is the broker's ApiVersions maximum capped by kproto's (the classic group APIs by
``group_requests.MAX_VERSIONS``); on the test ground's Kafka 4.4 the numbers are also
checked as written (Fetch 18, ListOffsets 11, Metadata 13, OffsetCommit/OffsetFetch 10,
ApiVersions 5, ConsumerGroupHeartbeat 1, FindCoordinator 6, OffsetForLeaderEpoch 4).
What each answer carried is checked too: topic ids in OffsetCommit/OffsetFetch v10 (by
id, no names), Metadata v13's top-level error code, ApiVersions v5 naming the cluster and
node the Metadata gave (KIP-1242), and Kafka refusing an ApiVersions v5 that names
another cluster.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kproto import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kproto.errors import ErrorCode
from kproto.messages import API_KEYS, ApiVersionsRequest
from tests.brokers import raw
from tests.brokers.maven_kafka import MavenKafka
from tests.support.reading import consume
from tests.support.versions import kproto_max
from tests.wire_log import WireLog

FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 1, 2, 3, 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, API_VERSIONS = 11, 12, 13, 14, 18
OFFSET_FOR_LEADER_EPOCH, CONSUMER_GROUP_HEARTBEAT = 23, 68

#: The versions Kafka 4.4 serves and kproto sends (the test ground's broker).
KAFKA_4_4 = {FETCH: 18, LIST_OFFSETS: 11, METADATA: 13, OFFSET_COMMIT: 10, OFFSET_FETCH: 10,
             FIND_COORDINATOR: 6, API_VERSIONS: 5, OFFSET_FOR_LEADER_EPOCH: 4,
             CONSUMER_GROUP_HEARTBEAT: 1}

#: What each engine must have sent in the test below.
USED = {
    "classic": {FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR,
                JOIN_GROUP, SYNC_GROUP, LEAVE_GROUP, API_VERSIONS, OFFSET_FOR_LEADER_EPOCH},
    "consumer": {FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR,
                 CONSUMER_GROUP_HEARTBEAT, API_VERSIONS, OFFSET_FOR_LEADER_EPOCH},
}
KEY_OF = {cls.__name__[:-len("Request")]: key for key, (cls, _) in API_KEYS.items()}


def read_commit_and_resume(broker, group_protocol: str, topic: str, count: int) -> None:
    """One member reads everything, commits (with the records' leader epochs), asks the
    offset APIs and leaves; a second member of the group resumes from the commit (its
    positions, carrying a leader epoch, are validated with OffsetForLeaderEpoch)."""
    group = "g-" + uuid.uuid4().hex
    config = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                  group_protocol=group_protocol, auto_offset_reset="earliest",
                  enable_auto_commit=False, fetch_max_wait_ms=100,
                  metadata_recovery_strategy="rebootstrap")
    tps = [TopicPartition(topic, p) for p in range(2)]
    with KafkaConsumer(topic, **config) as first:
        records = consume(first, count)
        assert len({(r.partition, r.offset) for r in records}) == count
        last = {}
        for r in records:
            last[TopicPartition(r.topic, r.partition)] = r
        first.commit({tp: OffsetAndMetadata(r.offset + 1, "", r.leader_epoch)
                      for tp, r in last.items()})
        assert {tp: first.committed(tp) for tp in tps} == {
            tp: last[tp].offset + 1 for tp in tps}
        assert first.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert first.end_offsets(tps) == {tp: last[tp].offset + 1 for tp in tps}
        found = first.offsets_for_times({tp: 0 for tp in tps})
        assert {tp: found[tp].offset for tp in tps} == {tp: 0 for tp in tps}
    with KafkaConsumer(topic, **config) as second:
        deadline = time.monotonic() + 30
        while len(second.assignment()) < 2:
            assert time.monotonic() < deadline, "the second member got no assignment"
            assert second.poll(timeout_ms=100) == {}
        # position() validates a committed position that carries a leader epoch first.
        assert {tp: second.position(tp, timeout_ms=30_000) for tp in tps} == {
            tp: last[tp].offset + 1 for tp in tps}


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_consumer_sends_the_newest_versions_kafka_serves(apache_kafka, group_protocol):
    broker = apache_kafka
    if group_protocol == "consumer" and "kip848" not in broker.capabilities:
        pytest.skip("this Kafka has no ConsumerGroupHeartbeat")
    advertised = raw.api_versions(broker.addresses[0])
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 12)
    with WireLog() as wire:
        read_commit_and_resume(broker, group_protocol, topic, len(written))
    sent: dict[int, set[int]] = {}
    for request in wire.entries():
        if request.direction == ">>":
            sent.setdefault(KEY_OF[request.api_name], set()).add(request.version)
    assert USED[group_protocol] <= set(sent), "never sent: {}".format(
        [API_KEYS[k][0].__name__ for k in USED[group_protocol] - set(sent)])
    # ApiVersions goes out at kproto's newest first (the broker's are unknown then); a
    # broker with fewer answers with its own range and gets the retry at its newest.
    api_versions = sent.pop(API_VERSIONS)
    assert max(api_versions) == kproto_max(API_VERSIONS)
    assert api_versions - {kproto_max(API_VERSIONS)} <= {min(advertised[API_VERSIONS][1], kproto_max(API_VERSIONS))}
    if isinstance(broker, MavenKafka):
        assert api_versions == {KAFKA_4_4[API_VERSIONS]}
    for api_key, versions in sent.items():
        expected = min(advertised[api_key][1], kproto_max(api_key))
        assert versions == {expected}, (API_KEYS[api_key][0].__name__, versions, advertised[api_key])
        if isinstance(broker, MavenKafka) and api_key in KAFKA_4_4:
            assert versions == {KAFKA_4_4[api_key]}, API_KEYS[api_key][0].__name__
    check_answers(wire, topic, advertised)


def check_answers(wire: WireLog, topic: str, advertised: dict) -> None:
    """What went out carried what the version is for, and Kafka answered it without error."""
    metadata = [resp.tree for _, resp in wire.pairs("Metadata")]
    assert metadata and all(m["error_code"] == 0 for m in metadata)
    cluster_id = metadata[-1]["cluster_id"]
    node_ids = {b["node_id"] for m in metadata for b in m["brokers"]}
    topic_ids = {t["topic_id"] for m in metadata for t in m["topics"] if t["name"] == topic}
    assert len(topic_ids) == 1 and cluster_id
    (topic_id,) = topic_ids

    # ApiVersions: a connection opened once the client knows the cluster (its first
    # Metadata answer) says which cluster and node it expects (KIP-1242); one opened before
    # (the bootstrap, a coordinator found first) names none, as Java's.
    api_versions = wire.pairs("ApiVersions")
    assert all(resp.tree["error_code"] == 0 for _, resp in api_versions)
    sent_ids = {(r["cluster_id"], r["node_id"]) for r in (req.tree for req, _ in api_versions)}
    assert sent_ids <= {(None, -1)} | {(cluster_id, n) for n in node_ids}, sent_ids
    if advertised[API_VERSIONS][1] >= 5:
        assert sent_ids - {(None, -1)}, "no ApiVersions named the cluster"

    if min(advertised[OFFSET_COMMIT][1], kproto_max(OFFSET_COMMIT)) >= 10:
        commits = wire.pairs("OffsetCommit")
        assert commits
        for req, resp in commits:
            topics = req.tree["topics"]
            assert [(t["name"], t["topic_id"]) for t in topics] == [("", topic_id)]
            answered = resp.tree["topics"]
            assert [t["topic_id"] for t in answered] == [topic_id]
            assert all(p["error_code"] == 0 for t in answered for p in t["partitions"])
    if min(advertised[OFFSET_FETCH][1], kproto_max(OFFSET_FETCH)) >= 10:
        fetches = wire.pairs("OffsetFetch")
        assert fetches
        for req, resp in fetches:
            (group,) = req.tree["groups"]
            assert [(t["name"], t["topic_id"]) for t in group["topics"]] == [("", topic_id)]
            (answered,) = resp.tree["groups"]
            assert answered["error_code"] == 0
            assert [t["topic_id"] for t in answered["topics"]] == [topic_id]
    for req, resp in wire.pairs("OffsetForLeaderEpoch"):
        for t in resp.tree["topics"]:
            assert all(p["error_code"] == 0 and p["end_offset"] >= 0 for p in t["partitions"])


def test_api_versions_v5_naming_another_cluster_is_refused(apache_kafka):
    """KIP-1242 on the broker's side: an ApiVersions v5 that names a cluster id other than
    the broker's is answered REBOOTSTRAP_REQUIRED (kproto then rebootstraps); the right
    cluster and node id are served."""
    address = apache_kafka.addresses[0]
    if raw.api_versions(address)[API_VERSIONS][1] < 5:
        pytest.skip("this Kafka has no ApiVersions v5")
    from kproto.messages import MetadataRequest

    metadata = raw.roundtrip(address, MetadataRequest(topics=[]), 12)
    ((node_id, host, port),) = [(b.node_id, b.host, b.port) for b in metadata.brokers
                                if (b.host, b.port) == address] or [(None, None, None)]
    assert node_id is not None

    def ask(cluster_id: str, node: int):
        # Kafka answers INVALID_REQUEST to a v3+ request without a software name (KIP-511).
        return raw.roundtrip(address, ApiVersionsRequest(
            client_software_name="kproto-tests", client_software_version="1",
            cluster_id=cluster_id, node_id=node), 5)

    right = ask(metadata.cluster_id, node_id)
    assert right.error_code == 0 and right.api_keys
    # Change the first character to one it is not (a random id may itself start with "x").
    other = ("y" if metadata.cluster_id[0] == "x" else "x") + metadata.cluster_id[1:]
    assert other != metadata.cluster_id
    assert ask(other, node_id).error_code == ErrorCode.REBOOTSTRAP_REQUIRED
    assert ask(metadata.cluster_id, node_id + 100).error_code == ErrorCode.REBOOTSTRAP_REQUIRED
