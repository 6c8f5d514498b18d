"""Offsets against real brokers: the OffsetFetcher over a real NetworkClient, and the
sans-IO OffsetCommit/OffsetFetch builders and handlers talking to a real coordinator.

Expected offsets come from the independent producer's delivery reports (confluent-kafka),
never from kproto itself. Fault injection and leader moves use the librdkafka mock.
"""

from __future__ import annotations

import collections
import time

import pytest

from kproto.net.client_versions import client_max_version
from kproto import errors
from kproto.consumer.classic.offset_fetcher import OffsetFetcher
from kproto.consumer.offsets import commit as commit_mod
from kproto.consumer.offsets import committed_offsets as co
from kproto.consumer.subscription_state import FetchPosition, FetchState, LeaderAndEpoch, SubscriptionState
from kproto.messages import FindCoordinatorRequest, OffsetCommitRequest, OffsetFetchRequest
from kproto.net.client import NetworkClient
from kproto.structs import IsolationLevel, OffsetAndMetadata, TopicPartition

LIST_OFFSETS = 2
TIMEOUT_MS = 10000

pytestmark = pytest.mark.broker


@pytest.fixture
def client(broker):
    c = NetworkClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=5000, retry_backoff_ms=50)
    yield c
    c.close()


def end_offsets_written(written):
    """Per partition, the offset after the last record the producer saw acknowledged."""
    ends = collections.Counter()
    for r in written:
        ends[TopicPartition(r.topic, r.partition)] = max(ends[TopicPartition(r.topic, r.partition)], r.offset + 1)
    return dict(ends)


def settle(client, fetcher, subs, rounds=200):
    """Drive the asynchronous resets/validations the way the poll loop does."""
    for _ in range(rounds):
        if fetcher.update_fetch_positions(TIMEOUT_MS):
            return
        client.poll(timeout_ms=50)
    raise AssertionError("positions never settled: {}".format(
        {tp: subs.fetch_state(tp) for tp in subs.assigned_partitions()}))


# --- ListOffsets ---------------------------------------------------------------------------


@pytest.mark.needs("list_offsets_latest_is_log_end")
def test_beginning_and_end_offsets_match_what_was_written(broker, client):
    topic = broker.new_topic(partitions=3)
    written = broker.produce(topic, 60)
    fetcher = OffsetFetcher(client, SubscriptionState("earliest"), client.cluster)
    tps = [TopicPartition(topic, p) for p in range(3)]
    assert fetcher.beginning_offsets(tps, TIMEOUT_MS) == {tp: 0 for tp in tps}
    assert fetcher.end_offsets(tps, TIMEOUT_MS) == end_offsets_written(written)


def test_beginning_offsets_on_every_broker(broker, client):
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 10)
    fetcher = OffsetFetcher(client, SubscriptionState("earliest"), client.cluster)
    tps = [TopicPartition(topic, p) for p in range(2)]
    assert fetcher.beginning_offsets(tps, TIMEOUT_MS) == {tp: 0 for tp in tps}


@pytest.mark.needs("list_offsets_latest_is_log_end")
def test_read_committed_end_offsets_use_list_offsets_v2_or_later(broker, client):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 5)
    fetcher = OffsetFetcher(client, SubscriptionState("earliest"), client.cluster, isolation_level=IsolationLevel.READ_COMMITTED)
    tp = TopicPartition(topic, 0)
    assert fetcher.end_offsets([tp], TIMEOUT_MS) == end_offsets_written(written)


@pytest.mark.needs("list_offsets_latest_is_log_end")
def test_resets_position_partitions_at_earliest_then_latest(broker, client):
    topic = broker.new_topic(partitions=2)
    ends = end_offsets_written(broker.produce(topic, 30))
    tps = sorted(ends)
    subs = SubscriptionState("earliest")
    subs.assign_from_user(tps)
    fetcher = OffsetFetcher(client, subs, client.cluster, retry_backoff_ms=50)
    settle(client, fetcher, subs)
    assert {tp: subs.position(tp).offset for tp in tps} == {tp: 0 for tp in tps}
    for tp in tps:
        subs.request_offset_reset(tp, "latest")  # seek_to_end
    settle(client, fetcher, subs)
    assert {tp: subs.position(tp).offset for tp in tps} == ends
    assert all(subs.fetch_state(tp) is FetchState.FETCHING for tp in tps)


def test_policy_none_without_committed_offsets_raises(broker, client):
    topic = broker.new_topic(partitions=1)
    subs = SubscriptionState("none")
    subs.assign_from_user([TopicPartition(topic, 0)])
    fetcher = OffsetFetcher(client, subs, client.cluster)
    with pytest.raises(errors.NoOffsetForPartitionError):
        fetcher.update_fetch_positions(TIMEOUT_MS)


@pytest.mark.needs("fault_injection")
def test_retriable_list_offsets_errors_are_retried(broker, client):
    topic = broker.new_topic(partitions=1)
    ends = end_offsets_written(broker.produce(topic, 7))
    broker.push_request_errors(LIST_OFFSETS, [6, 5, 78])  # NOT_LEADER, LEADER_NOT_AVAILABLE, OFFSET_NOT_AVAILABLE
    broker.start_request_tracking()
    fetcher = OffsetFetcher(client, SubscriptionState("earliest"), client.cluster, retry_backoff_ms=20)
    assert fetcher.end_offsets(list(ends), TIMEOUT_MS) == ends
    asked = [r for r in broker.requests() if r.api_key == LIST_OFFSETS]
    broker.stop_request_tracking()
    assert len(asked) == 4  # three failures, then the answer


@pytest.mark.needs("fault_injection")
def test_topic_authorization_failure_is_fatal(broker, client):
    topic = broker.new_topic(partitions=1)
    broker.push_request_errors(LIST_OFFSETS, [29])
    fetcher = OffsetFetcher(client, SubscriptionState("earliest"), client.cluster)
    with pytest.raises(errors.TopicAuthorizationFailedError, match=topic):
        fetcher.beginning_offsets([TopicPartition(topic, 0)], TIMEOUT_MS)


@pytest.mark.needs("fault_injection")
def test_leader_move_is_followed(broker, client):
    topic = broker.new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    ends = end_offsets_written(broker.produce(topic, 12))
    fetcher = OffsetFetcher(client, SubscriptionState("earliest"), client.cluster, retry_backoff_ms=20)
    assert fetcher.end_offsets([tp], TIMEOUT_MS) == ends
    old = client.cluster.leader_for_partition(tp)
    new = 1 if old != 1 else 2
    broker.set_partition_leader(topic, 0, new)
    # Our metadata still names the old leader, which answers NOT_LEADER_OR_FOLLOWER.
    assert fetcher.end_offsets([tp], TIMEOUT_MS) == ends
    assert client.cluster.leader_for_partition(tp) == new


@pytest.mark.needs("fault_injection")
def test_lookup_times_out_when_the_leader_is_down(broker, client):
    topic = broker.new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    fetcher = OffsetFetcher(client, SubscriptionState("earliest"), client.cluster, retry_backoff_ms=20)
    fetcher.beginning_offsets([tp], TIMEOUT_MS)
    broker.broker_down(client.cluster.leader_for_partition(tp))
    with pytest.raises(errors.KafkaTimeoutError):
        fetcher.beginning_offsets([tp], 1500)


# --- OffsetForLeaderEpoch validation -----------------------------------------------------------


def _truncated_partition(broker, client):
    """10 records in leader epoch 0, a leader move (epoch 1), 10 more: epoch 0 ends at 10."""
    topic = broker.new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    broker.produce(topic, 10)
    fetcher = OffsetFetcher(client, SubscriptionState("earliest"), client.cluster)
    fetcher.beginning_offsets([tp], TIMEOUT_MS)  # loads the metadata
    old_leader, old_epoch = client.cluster.leader_for_partition(tp), client.cluster.leader_epoch_for_partition(tp)
    broker.set_partition_leader(topic, 0, 1 if old_leader != 1 else 2)
    broker.produce(topic, 10)
    client.poll(timeout_ms=TIMEOUT_MS, future=client.request_metadata_update())
    assert client.cluster.leader_epoch_for_partition(tp) > old_epoch
    return tp, LeaderAndEpoch(old_leader, old_epoch)


def _validate(client, subs, tp):
    fetcher = OffsetFetcher(client, subs, client.cluster, retry_backoff_ms=20)
    for _ in range(200):
        fetcher.validate_positions_if_needed()
        if subs.fetch_state(tp) is not FetchState.AWAIT_VALIDATION:
            fetcher.validate_positions_if_needed()  # a detected truncation surfaces here
            return
        client.poll(timeout_ms=50)
    raise AssertionError("validation never completed")


@pytest.mark.broker_kinds("mock")
@pytest.mark.needs("offset_for_leader_epoch", "fault_injection")
def test_truncation_without_reset_policy_raises_with_the_divergent_offset(broker, client):
    tp, old = _truncated_partition(broker, client)
    subs = SubscriptionState("none")
    subs.assign_from_user([tp])
    # We had fetched up to 15 in epoch 0, but epoch 0 ended at 10 on the new leader.
    subs.seek_validated(tp, FetchPosition(15, old.epoch, old))
    fetcher = OffsetFetcher(client, subs, client.cluster, retry_backoff_ms=20)
    with pytest.raises(errors.LogTruncationError) as info:
        for _ in range(200):
            fetcher.validate_positions_if_needed()
            client.poll(timeout_ms=50)
    assert info.value.divergent_offsets == {tp: OffsetAndMetadata(10, "", old.epoch)}


@pytest.mark.broker_kinds("mock")
@pytest.mark.needs("offset_for_leader_epoch", "fault_injection")
def test_truncation_with_reset_policy_repositions_at_the_divergence(broker, client):
    tp, old = _truncated_partition(broker, client)
    subs = SubscriptionState("earliest")
    subs.assign_from_user([tp])
    subs.seek_validated(tp, FetchPosition(15, old.epoch, old))
    _validate(client, subs, tp)
    assert subs.fetch_state(tp) is FetchState.FETCHING
    assert (subs.position(tp).offset, subs.position(tp).offset_epoch) == (10, old.epoch)


@pytest.mark.broker_kinds("mock")
@pytest.mark.needs("offset_for_leader_epoch", "fault_injection")
def test_position_inside_the_old_epoch_is_validated_unchanged(broker, client):
    tp, old = _truncated_partition(broker, client)
    subs = SubscriptionState("none")
    subs.assign_from_user([tp])
    subs.seek_validated(tp, FetchPosition(7, old.epoch, old))
    _validate(client, subs, tp)
    assert subs.fetch_state(tp) is FetchState.FETCHING and subs.position(tp).offset == 7


@pytest.mark.broker_kinds("tansu")
def test_broker_without_offset_for_leader_epoch_skips_validation(broker, client):
    topic = broker.new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    broker.produce(topic, 3)
    subs = SubscriptionState("none")
    subs.assign_from_user([tp])
    OffsetFetcher(client, subs, client.cluster).beginning_offsets([tp], TIMEOUT_MS)  # metadata
    leader = client.cluster.leader_for_partition(tp)
    # A position from an older epoch and leader: the current leader differs, so it must validate.
    subs.seek_validated(tp, FetchPosition(2, 0, LeaderAndEpoch(leader, -5)))
    _validate(client, subs, tp)
    assert subs.fetch_state(tp) is FetchState.FETCHING and subs.position(tp).offset == 2


# --- OffsetCommit / OffsetFetch with a real coordinator ----------------------------------------


def find_coordinator(client, group):
    """The group's coordinator, ready: FindCoordinator asked again after a short backoff
    while the cluster has none yet (Kafka answers COORDINATOR_NOT_AVAILABLE while it creates
    __consumer_offsets), everything within TIMEOUT_MS."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000

    def wait_ready(node_id):
        while not client.ready(node_id):
            assert time.monotonic() < deadline, "node {} not ready in time".format(node_id)
            client.poll(timeout_ms=50)

    while True:
        node = client.least_loaded_node()
        wait_ready(node)
        version = client.api_version(FindCoordinatorRequest.api_key, node)
        req = (FindCoordinatorRequest(key=group, key_type=0) if version < 4
               else FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
        future = client.send(node, req, version=version)
        client.poll(timeout_ms=TIMEOUT_MS, future=future)
        resp = future.value
        answer = resp if version < 4 else resp.coordinators[0]
        if answer.error_code == 0:
            wait_ready(answer.node_id)
            return answer.node_id
        assert time.monotonic() < deadline, "no coordinator for {}: error {}".format(group, answer.error_code)
        time.sleep(0.2)


def known_topic_ids(client, topic):
    """The cluster's topic ids once the metadata knows ``topic`` (a broker learns of a new
    topic a moment after CreateTopics answers), within TIMEOUT_MS."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        client.poll(timeout_ms=TIMEOUT_MS, future=client.cluster.set_topics([topic]))
        ids = client.cluster.topic_ids()
        if topic in ids:
            return ids
        assert time.monotonic() < deadline, "no topic id for {}".format(topic)
        time.sleep(0.2)


def roundtrip(client, node, request, version):
    future = client.send(node, request, version=version)
    client.poll(timeout_ms=TIMEOUT_MS, future=future)
    assert future.succeeded(), future.exception
    return future.value


@pytest.mark.needs("classic_groups")
def test_commit_then_fetch_committed_at_every_supported_version(broker, client):
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 4)
    group = "offsets-" + topic
    coordinator = find_coordinator(client, group)
    commit_range = client.broker_api_versions(coordinator)[OffsetCommitRequest.api_key]
    fetch_range = client.broker_api_versions(coordinator)[OffsetFetchRequest.api_key]
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    # Tansu stores the offset only (no metadata string, no leader epoch): compare what it keeps.
    keeps_metadata = broker.name != "tansu"
    topic_ids = known_topic_ids(client, topic)  # v10 names topics by id
    leader_epoch = client.cluster.leader_epoch_for_partition(tps[0])
    assert leader_epoch >= 0
    for version in range(max(2, commit_range[0]), min(commit_range[1], client_max_version(OffsetCommitRequest)) + 1):
        # The leader epoch of the consumed record (the broker may check it against its own).
        epoch = leader_epoch if version >= 6 else -1
        offsets = {tps[0]: OffsetAndMetadata(version, "v{}".format(version), epoch),
                   tps[1]: OffsetAndMetadata(100 + version, "", -1)}
        request = commit_mod.build_offset_commit_request(group, offsets, version, topic_ids=topic_ids)
        result = commit_mod.handle_offset_commit_response(roundtrip(client, coordinator, request, version), group,
                                                          topic_ids=topic_ids)
        assert result.succeeded, (version, result.error)
        for fetch_version in range(max(1, fetch_range[0]), min(fetch_range[1], client_max_version(OffsetFetchRequest)) + 1):
            req = co.build_offset_fetch_request(group, tps, fetch_version, require_stable=True, topic_ids=topic_ids)
            fetched = co.handle_offset_fetch_response(roundtrip(client, coordinator, req, fetch_version),
                                                      fetch_version, group, tps, topic_ids)
            assert fetched.error is None, (version, fetch_version, fetched.error)
            assert {tp: om.offset for tp, om in fetched.offsets.items()} == {
                tp: om.offset for tp, om in offsets.items()}, (version, fetch_version)
            if keeps_metadata:
                assert {tp: om.metadata for tp, om in fetched.offsets.items()} == {
                    tp: om.metadata for tp, om in offsets.items()}, (version, fetch_version)
                if fetch_version >= 5 and epoch >= 0:
                    assert fetched.offsets[tps[0]].leader_epoch == epoch, (version, fetch_version)


@pytest.mark.needs("classic_groups")
def test_nothing_committed_reads_as_none(broker, client):
    topic = broker.new_topic(partitions=1)
    group = "offsets-empty-" + topic
    coordinator = find_coordinator(client, group)
    version = client.api_version(OffsetFetchRequest.api_key, coordinator)
    tp = TopicPartition(topic, 0)
    topic_ids = known_topic_ids(client, topic)  # v10 names topics by id
    request = co.build_offset_fetch_request(group, [tp], version, topic_ids=topic_ids)
    resp = roundtrip(client, coordinator, request, version)
    result = co.handle_offset_fetch_response(resp, version, group, [tp], topic_ids)
    assert result.error is None and result.offsets == {tp: None}


@pytest.mark.needs("fault_injection")
def test_coordinator_errors_from_a_real_coordinator(broker, client):
    topic = broker.new_topic(partitions=1)
    group = "offsets-err-" + topic
    coordinator = find_coordinator(client, group)
    tp = TopicPartition(topic, 0)
    version = client.api_version(OffsetCommitRequest.api_key, coordinator)
    broker.push_request_errors(OffsetCommitRequest.api_key, [16, 14, 22])
    verdicts = []
    for _ in range(3):
        request = commit_mod.build_offset_commit_request(group, {tp: OffsetAndMetadata(1)}, version)
        verdicts.append(commit_mod.handle_offset_commit_response(
            roundtrip(client, coordinator, request, version), group))
    assert [(type(v.error), v.retriable, v.coordinator_unknown) for v in verdicts] == [
        (errors.NotCoordinatorError, True, True), (errors.CoordinatorLoadInProgressError, True, False),
        (errors.CommitFailedError, False, False)]
    fetch_version = client.api_version(OffsetFetchRequest.api_key, coordinator)
    broker.push_request_errors(OffsetFetchRequest.api_key, [14])
    resp = roundtrip(client, coordinator, co.build_offset_fetch_request(group, [tp], fetch_version), fetch_version)
    result = co.handle_offset_fetch_response(resp, fetch_version, group, [tp])
    assert isinstance(result.error, errors.CoordinatorLoadInProgressError) and result.retriable


@pytest.mark.needs("classic_groups")
def test_positions_come_from_committed_offsets_then_the_reset_policy(broker, client):
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 20)
    group = "offsets-init-" + topic
    coordinator = find_coordinator(client, group)
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    version = client.api_version(OffsetCommitRequest.api_key, coordinator)
    topic_ids = known_topic_ids(client, topic)  # v10 names topics by id
    request = commit_mod.build_offset_commit_request(group, {t0: OffsetAndMetadata(4)}, version,
                                                     topic_ids=topic_ids)
    assert commit_mod.handle_offset_commit_response(
        roundtrip(client, coordinator, request, version), group, topic_ids=topic_ids).succeeded

    def fetch_committed(partitions, timeout_ms):
        v = client.api_version(OffsetFetchRequest.api_key, coordinator)
        request = co.build_offset_fetch_request(group, partitions, v, topic_ids=topic_ids)
        resp = roundtrip(client, coordinator, request, v)
        result = co.handle_offset_fetch_response(resp, v, group, partitions, topic_ids)
        assert result.error is None
        return result.offsets

    subs = SubscriptionState("earliest")
    subs.assign_from_user([t0, t1])
    client.poll(timeout_ms=TIMEOUT_MS, future=client.cluster.set_topics([topic]))
    fetcher = OffsetFetcher(client, subs, client.cluster, retry_backoff_ms=20)
    for _ in range(200):
        if fetcher.update_fetch_positions(TIMEOUT_MS, fetch_committed):
            break
        client.poll(timeout_ms=50)
    # t0 resumes at its committed offset; t1 has none and starts at the earliest.
    assert {tp: subs.position(tp).offset for tp in (t0, t1)} == {t0: 4, t1: 0}


@pytest.mark.broker_kinds("apache_kafka")
def test_offsets_for_times_finds_the_first_record_at_or_after(broker, client):
    # Only Apache Kafka answers timestamp lookups here (the mock and Tansu ignore timestamps).
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 20)
    fetcher = OffsetFetcher(client, SubscriptionState("earliest"), client.cluster)
    target = written[len(written) // 2].timestamp
    expected = {}
    for tp in (TopicPartition(topic, 0), TopicPartition(topic, 1)):
        later = [r for r in written if r.partition == tp.partition and r.timestamp >= target]
        expected[tp] = (min(later, key=lambda r: r.offset).offset, ) if later else None
    found = fetcher.offsets_for_times({tp: target for tp in expected}, TIMEOUT_MS)
    assert {tp: (None if v is None else (v.offset,)) for tp, v in found.items()} == expected
    beyond = fetcher.offsets_for_times({tp: max(r.timestamp for r in written) + 1 for tp in expected}, TIMEOUT_MS)
    assert beyond == {tp: None for tp in expected}


@pytest.mark.needs("fault_injection")
def test_fatal_reset_error_surfaces_on_the_next_call_and_retriable_ones_do_not(broker, client):
    topic = broker.new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    broker.produce(topic, 5)
    subs = SubscriptionState("earliest")
    subs.assign_from_user([tp])
    fetcher = OffsetFetcher(client, subs, client.cluster, retry_backoff_ms=20)
    broker.push_request_errors(LIST_OFFSETS, [6, 29])  # NOT_LEADER (retried), then TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(errors.TopicAuthorizationFailedError):
        for _ in range(200):
            fetcher.update_fetch_positions(TIMEOUT_MS)
            client.poll(timeout_ms=50)
    # The error is reported once; the partition is still awaiting its reset, which now succeeds.
    settle(client, fetcher, subs)
    assert subs.position(tp).offset == 0


@pytest.mark.broker_kinds("mock")
@pytest.mark.needs("offset_for_leader_epoch", "fault_injection")
def test_validation_errors_are_retried(broker, client):
    tp, old = _truncated_partition(broker, client)
    subs = SubscriptionState("none")
    subs.assign_from_user([tp])
    subs.seek_validated(tp, FetchPosition(9, old.epoch, old))
    broker.start_request_tracking()
    broker.push_request_errors(23, [6, 74])  # NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH
    _validate(client, subs, tp)
    asked = [r for r in broker.requests() if r.api_key == 23]
    broker.stop_request_tracking()
    assert subs.fetch_state(tp) is FetchState.FETCHING and subs.position(tp).offset == 9
    assert len(asked) == 3
