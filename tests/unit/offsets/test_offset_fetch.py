"""OffsetFetch (committed offsets), sans-IO: request shapes per version, error handling,
and seeding positions from committed offsets on a real SubscriptionState."""

from __future__ import annotations

import uuid

import pytest

from kproto.net.client_versions import client_max_version
from kproto import errors
from kproto.consumer.offsets import committed_offsets as co
from kproto.consumer.subscription_state import FetchPosition, FetchState, LeaderAndEpoch, SubscriptionState
from kproto.messages import OffsetFetchRequest, OffsetFetchResponse
from kproto.structs import OffsetAndMetadata, TopicPartition

T0, T1, U0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
GROUP = "g1"
TOPIC_IDS = {"a": uuid.uuid4(), "b": uuid.uuid4()}
NAMES = {tid: name for name, tid in TOPIC_IDS.items()}


def wire(message, version):
    return type(message).decode(message.encode(version), version)


def response(parts, version, group_error=0, group=GROUP):
    """A decoded OffsetFetchResponse from ``{tp: (error, offset, epoch, metadata)}``."""
    R = OffsetFetchResponse
    topics: dict = {}
    for tp, (code, offset, epoch, metadata) in parts.items():
        topics.setdefault(tp.topic, []).append((tp.partition, code, offset, epoch, metadata))
    if version >= 8:
        msg = R(groups=[R.OffsetFetchResponseGroup(group_id=group, error_code=group_error, topics=[
            R.OffsetFetchResponseTopics(name=name, topic_id=TOPIC_IDS.get(name, uuid.UUID(int=0)), partitions=[
                R.OffsetFetchResponsePartitions(partition_index=p, error_code=c, committed_offset=o,
                                                committed_leader_epoch=e, metadata=m) for p, c, o, e, m in parts_])
            for name, parts_ in topics.items()])])
    else:
        msg = R(error_code=group_error, topics=[
            R.OffsetFetchResponseTopic(name=name, partitions=[
                R.OffsetFetchResponsePartition(partition_index=p, error_code=c, committed_offset=o,
                                               committed_leader_epoch=e, metadata=m) for p, c, o, e, m in parts_])
            for name, parts_ in topics.items()])
    return wire(msg, version)


ALL_VERSIONS = list(range(OffsetFetchRequest.min_version, client_max_version(OffsetFetchRequest) + 1))


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_request_shape_per_version(version):
    req = wire(co.build_offset_fetch_request(GROUP, [T0, T1, U0], version, require_stable=True,
                                             member_id="m-1", member_epoch=7, topic_ids=TOPIC_IDS), version)
    if version >= 8:
        (group,) = req.groups
        assert group.group_id == GROUP
        topics = group.topics
        if version >= 9:
            assert (group.member_id, group.member_epoch) == ("m-1", 7)
    else:
        assert req.group_id == GROUP
        topics = req.topics
    # v10 names topics by id only, older versions by name only.
    assert {TopicPartition(NAMES[t.topic_id] if version >= 10 else t.name, p)
            for t in topics for p in t.partition_indexes} == {T0, T1, U0}
    assert all(not t.name for t in topics) if version >= 10 else all(t.name for t in topics)
    # require_stable exists from v7; older brokers get the request without it.
    assert req.require_stable is (version >= 7)


@pytest.mark.parametrize("version", [2, 7, 8])
def test_all_partitions_is_a_null_topic_list(version):
    req = wire(co.build_offset_fetch_request(GROUP, None, version), version)
    assert (req.groups[0].topics if version >= 8 else req.topics) is None


def test_all_partitions_needs_v2():
    with pytest.raises(errors.IllegalArgumentError):
        co.build_offset_fetch_request(GROUP, None, 1)


@pytest.mark.parametrize("version", [1, 5, 8, 9])
def test_committed_offsets_and_missing_ones(version):
    resp = response({T0: (0, 42, 3, "meta"), T1: (0, -1, -1, None)}, version)
    result = co.handle_offset_fetch_response(resp, version, GROUP, [T0, T1, U0])
    assert result.error is None
    epoch = 3 if version >= 5 else -1
    assert result.offsets == {T0: OffsetAndMetadata(42, "meta", epoch), T1: None, U0: None}


@pytest.mark.parametrize("version", [2, 7, 8])
@pytest.mark.parametrize("code, retriable, rediscover", [
    (14, True, False),   # COORDINATOR_LOAD_IN_PROGRESS
    (16, True, True),    # NOT_COORDINATOR
    (15, True, True),    # COORDINATOR_NOT_AVAILABLE
    (30, False, False),  # GROUP_AUTHORIZATION_FAILED
    (69, False, False),  # GROUP_ID_NOT_FOUND
])
def test_group_level_errors(version, code, retriable, rediscover):
    result = co.handle_offset_fetch_response(response({T0: (0, 1, -1, "")}, version, group_error=code),
                                             version, GROUP)
    assert isinstance(result.error, errors.for_code(code))
    assert (result.retriable, result.coordinator_unknown) == (retriable, rediscover)
    assert result.offsets == {}


@pytest.mark.parametrize("code, retriable", [(113, True), (25, False)])
def test_kip848_member_errors(code, retriable):
    # STALE_MEMBER_EPOCH: resend with the newer epoch; UNKNOWN_MEMBER_ID: the member is gone.
    result = co.handle_offset_fetch_response(response({}, 9, group_error=code), 9, GROUP)
    assert isinstance(result.error, errors.for_code(code)) and result.retriable is retriable


@pytest.mark.parametrize("code, retriable, rediscover", [(16, True, True), (14, True, False)])
def test_v0_v1_group_errors_arrive_per_partition(code, retriable, rediscover):
    resp = response({T0: (code, -1, -1, ""), T1: (code, -1, -1, "")}, 1)
    result = co.handle_offset_fetch_response(resp, 1, GROUP)
    assert isinstance(result.error, errors.for_code(code))
    assert (result.retriable, result.coordinator_unknown) == (retriable, rediscover)


def test_unstable_offsets_are_retried():
    result = co.handle_offset_fetch_response(response({T0: (88, -1, -1, ""), T1: (0, 5, -1, "")}, 7), 7, GROUP)
    assert isinstance(result.error, errors.UnstableOffsetCommitError) and result.retriable
    assert "a-0" in str(result.error) and "a-1" not in str(result.error)


@pytest.mark.parametrize("code, exc", [(29, errors.TopicAuthorizationFailedError),
                                       (3, errors.UnknownTopicOrPartitionError),
                                       (-1, errors.UnknownError)])
def test_fatal_partition_errors(code, exc):
    result = co.handle_offset_fetch_response(response({T0: (code, -1, -1, "")}, 8), 8, GROUP)
    assert isinstance(result.error, exc) and not result.retriable


def test_response_for_another_group_is_a_protocol_error():
    result = co.handle_offset_fetch_response(response({T0: (0, 1, -1, "")}, 8, group="other"), 8, GROUP)
    assert isinstance(result.error, errors.ProtocolError)


class Meta:
    def __init__(self):
        self.seen = {}

    def leader_for_partition(self, tp):
        return 1

    def leader_epoch_for_partition(self, tp):
        return 6

    def update_last_seen_epoch_if_newer(self, tp, epoch):
        self.seen[tp] = epoch


def test_refresh_committed_offsets_seeds_unvalidated_positions():
    subs = SubscriptionState("none")
    subs.assign_from_user([T0, T1, U0])
    meta = Meta()
    seeked = co.refresh_committed_offsets(subs, meta, {
        T0: OffsetAndMetadata(10, "", 4), T1: OffsetAndMetadata(20, "", -1), U0: None,
        TopicPartition("gone", 0): OffsetAndMetadata(1, "", -1)})
    assert seeked == {T0, T1}
    # With a committed epoch: validated against the current leader before fetching.
    assert subs.position(T0) == FetchPosition(10, 4, LeaderAndEpoch(1, 6))
    assert subs.fetch_state(T0) is FetchState.AWAIT_VALIDATION
    assert subs.fetch_state(T1) is FetchState.FETCHING and subs.position(T1).offset == 20
    assert meta.seen == {T0: 4}
    # Nothing committed and policy none: the consumer must say so.
    with pytest.raises(errors.NoOffsetForPartitionError, match="b-0"):
        subs.reset_initializing_positions()


# --- v10: topics by id (KIP-848) ------------------------------------------------------------


def test_v10_needs_every_topic_id_and_a_partition_list():
    with pytest.raises(errors.IllegalArgumentError):
        co.build_offset_fetch_request(GROUP, [T0, U0], 10, topic_ids={"a": TOPIC_IDS["a"]})
    with pytest.raises(errors.IllegalArgumentError):  # all partitions: the answer could name unknown ids
        co.build_offset_fetch_request(GROUP, None, 10, topic_ids=TOPIC_IDS)


def test_v10_answer_is_named_by_the_request_topic_ids():
    resp = response({T0: (0, 42, 3, "meta"), U0: (0, 7, -1, "")}, 10)
    assert all(not t.name for t in resp.groups[0].topics)  # the wire carries ids only
    result = co.handle_offset_fetch_response(resp, 10, GROUP, [T0, U0], TOPIC_IDS)
    assert result.error is None
    assert result.offsets == {T0: OffsetAndMetadata(42, "meta", 3), U0: OffsetAndMetadata(7, "", -1)}


def test_v10_unknown_topic_id_is_retried_after_a_metadata_refresh():
    resp = response({T0: (100, -1, -1, ""), U0: (0, 7, -1, "")}, 10)
    result = co.handle_offset_fetch_response(resp, 10, GROUP, [T0, U0], TOPIC_IDS)
    assert isinstance(result.error, errors.UnknownTopicIdError) and "a-0" in str(result.error)
    assert (result.retriable, result.metadata_update_needed, result.coordinator_unknown) == (True, True, False)
