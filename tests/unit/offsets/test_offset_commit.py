"""OffsetCommit, sans-IO: request shapes per version, the verdict for every error class
(classic and KIP-848, commit-before-revocation), and the auto-commit timer on a fake clock."""

from __future__ import annotations

import uuid

import pytest

from kproto.net.client_versions import client_max_version
from kproto import errors
from kproto.consumer.offsets import commit
from kproto.messages import OffsetCommitRequest, OffsetCommitResponse
from kproto.structs import OffsetAndMetadata, TopicPartition

T0, T1, U0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
GROUP = "g1"
OFFSETS = {T0: OffsetAndMetadata(10, "m0", 3), T1: OffsetAndMetadata(20, "", -1), U0: OffsetAndMetadata(0, None, 1)}
TOPIC_IDS = {"a": uuid.uuid4(), "b": uuid.uuid4()}
NAMES = {tid: name for name, tid in TOPIC_IDS.items()}


def wire(message, version):
    return type(message).decode(message.encode(version), version)


def response(codes, version=8):
    R = OffsetCommitResponse
    topics: dict = {}
    for tp, code in codes.items():
        topics.setdefault(tp.topic, []).append(R.OffsetCommitResponsePartition(partition_index=tp.partition,
                                                                               error_code=code))
    return wire(R(topics=[R.OffsetCommitResponseTopic(name=n, topic_id=TOPIC_IDS[n], partitions=p)
                          for n, p in topics.items()]), version)


@pytest.mark.parametrize("version", range(OffsetCommitRequest.min_version, client_max_version(OffsetCommitRequest) + 1))
def test_request_fields_per_version(version):
    instance = "static-1" if version >= 7 else None
    req = wire(commit.build_offset_commit_request(GROUP, OFFSETS, version, generation_id_or_member_epoch=5,
                                                  member_id="m-1", group_instance_id=instance,
                                                  topic_ids=TOPIC_IDS), version)
    assert req.group_id == GROUP
    # v10 names topics by id only, older versions by name only.
    sent = {TopicPartition(NAMES[t.topic_id] if version >= 10 else t.name, p.partition_index): p
            for t in req.topics for p in t.partitions}
    assert all(not t.name for t in req.topics) if version >= 10 else all(t.name for t in req.topics)
    assert {tp: (p.committed_offset, p.committed_metadata) for tp, p in sent.items()} == {
        T0: (10, "m0"), T1: (20, ""), U0: (0, "")}
    if version >= 1:
        assert (req.generation_id_or_member_epoch, req.member_id) == (5, "m-1")
    if version >= 6:
        assert {tp: p.committed_leader_epoch for tp, p in sent.items()} == {T0: 3, T1: -1, U0: 1}
    if version >= 7:
        assert req.group_instance_id == "static-1"
    if version == 1:
        assert all(p.commit_timestamp == -1 for p in sent.values())
    if 2 <= version <= 4:
        assert req.retention_time_ms == -1  # broker default retention


def test_static_membership_needs_v7():
    with pytest.raises(errors.UnsupportedVersionError):
        commit.build_offset_commit_request(GROUP, OFFSETS, 6, group_instance_id="static-1")


def test_commit_outside_group_management_uses_the_default_generation():
    req = wire(commit.build_offset_commit_request(GROUP, {T0: OffsetAndMetadata(1)}, 8), 8)
    assert (req.generation_id_or_member_epoch, req.member_id, req.group_instance_id) == (-1, "", None)


@pytest.mark.parametrize("bad", [{T0: 5}, {T0: OffsetAndMetadata(-1)}])
def test_bad_offsets_are_rejected(bad):
    with pytest.raises(errors.IllegalArgumentError):
        commit.build_offset_commit_request(GROUP, bad, 8)


def test_success():
    result = commit.handle_offset_commit_response(response({T0: 0, T1: 0}), GROUP)
    assert result.succeeded and result.failed_partitions == {}


# code, retriable, coordinator_unknown, exception class
COMMON = [
    (14, True, False, errors.CoordinatorLoadInProgressError),
    (15, True, True, errors.CoordinatorNotAvailableError),
    (16, True, True, errors.NotCoordinatorError),
    (7, True, True, errors.RequestTimedOutError),
    (12, False, False, errors.OffsetMetadataTooLargeError),
    (28, False, False, errors.InvalidCommitOffsetSizeError),
    (82, False, False, errors.FencedInstanceIdError),
    (30, False, False, errors.GroupAuthorizationFailedError),
    (29, False, False, errors.TopicAuthorizationFailedError),
]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("code, retriable, rediscover, exc", COMMON)
def test_verdicts_shared_by_both_protocols(protocol, code, retriable, rediscover, exc):
    result = commit.handle_offset_commit_response(response({T0: 0, T1: code}), GROUP, group_protocol=protocol)
    assert isinstance(result.error, exc)
    assert (result.retriable, result.coordinator_unknown) == (retriable, rediscover)
    assert result.failed_partitions == {T1: code}


def test_unknown_topic_is_retried_except_before_revocation():
    assert commit.handle_offset_commit_response(response({T0: 3}), GROUP).retriable
    before = commit.handle_offset_commit_response(response({T0: 3}), GROUP, group_protocol="consumer",
                                                  before_revocation=True)
    assert isinstance(before.error, errors.UnknownTopicOrPartitionError) and not before.retriable


def test_classic_rebalance_in_progress_asks_for_rejoin_without_generation_reset():
    result = commit.handle_offset_commit_response(response({T0: 27}), GROUP)
    assert isinstance(result.error, errors.RebalanceInProgressError)
    assert result.request_rejoin and not result.reset_generation and not result.retriable


@pytest.mark.parametrize("code", [22, 25])
def test_classic_stale_generation_is_commit_failed(code):
    result = commit.handle_offset_commit_response(response({T0: code}), GROUP)
    assert isinstance(result.error, errors.CommitFailedError)
    assert result.reset_generation and result.request_rejoin and not result.retriable
    assert "max_poll_interval_ms" in str(result.error)


@pytest.mark.parametrize("code", [25, 110])
def test_kip848_unknown_member_or_fenced_epoch_is_commit_failed(code):
    result = commit.handle_offset_commit_response(response({T0: code}), GROUP, group_protocol="consumer")
    assert isinstance(result.error, errors.CommitFailedError) and not result.retriable


def test_kip848_stale_member_epoch_retried_only_before_revocation():
    plain = commit.handle_offset_commit_response(response({T0: 113}), GROUP, group_protocol="consumer")
    assert isinstance(plain.error, errors.StaleMemberEpochError) and not plain.retriable
    before = commit.handle_offset_commit_response(response({T0: 113}), GROUP, group_protocol="consumer",
                                                  before_revocation=True)
    assert before.retriable


def test_unexpected_code_is_fatal_and_named():
    result = commit.handle_offset_commit_response(response({T0: 87}), GROUP)
    assert not result.retriable and "87" in str(result.error)


# --- auto-commit timer ------------------------------------------------------------------


def test_auto_commit_fires_each_interval_one_at_a_time():
    state = commit.AutoCommitState(5000, now_ms=0, retry_backoff_ms=100)
    assert not state.can_send_auto_commit(4999)
    assert state.remaining_ms(4000) == 1000
    assert state.can_send_auto_commit(5000)
    state.on_sent(5000)
    assert not state.can_send_auto_commit(20000)  # in flight: never two at once
    state.on_completed(5100)
    assert not state.can_send_auto_commit(9999)
    assert state.can_send_auto_commit(10000)


def test_retriable_failure_retries_after_backoff_fatal_waits_full_interval():
    state = commit.AutoCommitState(5000, now_ms=0, retry_backoff_ms=100)
    state.on_sent(5000)
    state.on_completed(5050, errors.NotCoordinatorError())
    assert state.can_send_auto_commit(5150) and not state.can_send_auto_commit(5149)
    state.on_sent(5150)
    state.on_completed(5200, errors.CommitFailedError())
    assert not state.can_send_auto_commit(10149) and state.can_send_auto_commit(10150)


def test_reset_restarts_the_interval_and_bad_interval_is_refused():
    state = commit.AutoCommitState(1000, now_ms=0)
    state.reset(900)
    assert not state.can_send_auto_commit(1000) and state.can_send_auto_commit(1900)
    with pytest.raises(errors.KafkaConfigurationError):
        commit.AutoCommitState(0, now_ms=0)


# --- v10: topics by id (KIP-848) ------------------------------------------------------------


def test_v10_is_used_only_when_every_topic_has_an_id():
    assert commit.topic_ids_or_none({"a", "b"}, TOPIC_IDS) == TOPIC_IDS
    assert commit.topic_ids_or_none({"a", "b"}, {"a": TOPIC_IDS["a"]}) is None
    assert commit.topic_ids_or_none({"a"}, {"a": uuid.UUID(int=0)}) is None  # "no id" on the wire
    assert commit.max_version_for_topic_ids(TOPIC_IDS, 10) == 10
    assert commit.max_version_for_topic_ids(None, 10) == 9
    assert commit.max_version_for_topic_ids(None, 8) == 8
    with pytest.raises(errors.IllegalArgumentError):
        commit.build_offset_commit_request(GROUP, OFFSETS, 10, topic_ids={"a": TOPIC_IDS["a"]})


def test_v10_answer_is_named_by_the_request_topic_ids():
    resp = response({T0: 0, U0: 29}, 10)
    assert all(not t.name for t in resp.topics)  # the wire carries ids only
    result = commit.handle_offset_commit_response(resp, GROUP, topic_ids=TOPIC_IDS)
    assert isinstance(result.error, errors.TopicAuthorizationFailedError) and "b" in str(result.error)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_v10_unknown_topic_id_is_retried_after_a_metadata_refresh(protocol):
    result = commit.handle_offset_commit_response(response({T0: 100, T1: 0}, 10), GROUP, group_protocol=protocol,
                                                  topic_ids=TOPIC_IDS)
    assert isinstance(result.error, errors.UnknownTopicIdError)
    assert (result.retriable, result.metadata_update_needed, result.coordinator_unknown) == (True, True, False)
    assert result.failed_partitions == {T0: 100}
