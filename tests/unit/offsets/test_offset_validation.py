"""OffsetForLeaderEpoch validation, sans-IO: requests, responses, truncation detection.

Truncation is decided on a real SubscriptionState: the test drives a partition into
AWAIT_VALIDATION the way a leader change does, feeds a decoded response, and checks the
resulting fetch state, position, and reported divergence.
"""

from __future__ import annotations

import pytest

from kproto import errors
from kproto.consumer.offsets import leader_epoch_validation as lev
from kproto.consumer.subscription_state import FetchPosition, FetchState, LeaderAndEpoch, SubscriptionState
from kproto.messages import OffsetForLeaderEpochResponse
from kproto.structs import OffsetAndMetadata, TopicPartition

T0, T1, U0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def wire(message, version):
    return type(message).decode(message.encode(version), version)


def response(parts, version=4):
    """A decoded response from ``{tp: (error, leader_epoch, end_offset)}``."""
    topics = {}
    for tp, (code, epoch, end) in parts.items():
        topics.setdefault(tp.topic, []).append(OffsetForLeaderEpochResponse.EpochEndOffset(
            error_code=code, partition=tp.partition, leader_epoch=epoch, end_offset=end))
    msg = OffsetForLeaderEpochResponse(topics=[
        OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t, partitions=p) for t, p in topics.items()])
    return wire(msg, version)


def awaiting(policy, offset=100, offset_epoch=3, new_leader=LeaderAndEpoch(2, 5)):
    """A partition fetching at ``offset`` (epoch ``offset_epoch``) whose leader just changed."""
    subs = SubscriptionState(policy)
    subs.assign_from_user([T0])
    subs.seek_validated(T0, FetchPosition(offset, offset_epoch, LeaderAndEpoch(1, 3)))
    assert subs.maybe_validate_position_for_current_leader(T0, new_leader)
    return subs


@pytest.mark.parametrize("version", [2, 3, 4])
def test_request_carries_the_position_epoch_and_the_current_leader_epoch(version):
    positions = {T0: FetchPosition(100, 3, LeaderAndEpoch(2, 5)), U0: FetchPosition(7, 1, LeaderAndEpoch(2, None)),
                 T1: FetchPosition(9, None, LeaderAndEpoch(2, 5))}
    req = wire(lev.build_offset_for_leader_epoch_request(positions, version), version)
    if version >= 3:
        assert req.replica_id == -1  # a consumer, not a follower (-2 would be a debug client)
    sent = {TopicPartition(t.topic, p.partition): (p.leader_epoch, p.current_leader_epoch)
            for t in req.topics for p in t.partitions}
    # A position with no epoch cannot be validated and is not asked about.
    assert sent == {T0: (3, 5), U0: (1, -1)}


def test_versions_without_the_current_leader_epoch_are_refused():
    with pytest.raises(errors.IllegalArgumentError):
        lev.build_offset_for_leader_epoch_request({T0: FetchPosition(1, 1, LeaderAndEpoch(1, 1))}, 1)


def test_grouping_by_the_leader_the_position_was_fetched_from():
    positions = {T0: FetchPosition(1, 1, LeaderAndEpoch(1, 1)), T1: FetchPosition(1, 1, LeaderAndEpoch(2, 1)),
                 U0: FetchPosition(1, None, LeaderAndEpoch(1, 1))}
    assert lev.group_validation_requests(positions) == {1: {T0: positions[T0]}, 2: {T1: positions[T1]}}


@pytest.mark.parametrize("code", [6, 9, 56, 78, 5, 74, 75, 3, -1])
def test_errors_are_retried(code):
    result = lev.handle_offset_for_leader_epoch_response(response({T0: (code, -1, -1), T1: (0, 3, 50)}), [T0, T1])
    assert result.partitions_to_retry == {T0}
    assert result.end_offsets == {T1: lev.EpochEndOffset(3, 50)}


def test_topic_authorization_is_fatal():
    with pytest.raises(errors.TopicAuthorizationFailedError):
        lev.handle_offset_for_leader_epoch_response(response({T0: (29, -1, -1)}), [T0])


def test_missing_partition_is_retried():
    result = lev.handle_offset_for_leader_epoch_response(response({T0: (0, 3, 200)}), [T0, T1])
    assert result.partitions_to_retry == {T1}


def _apply(subs, parts, policy_requested=None):
    requested = {T0: subs.position(T0)}
    result = lev.handle_offset_for_leader_epoch_response(response(parts), requested)
    return lev.apply_validation(subs, result, requested, now_ms=1000, retry_backoff_ms=100)


def test_no_truncation_completes_validation():
    subs = awaiting("none")
    assert _apply(subs, {T0: (0, 3, 150)}) == {}
    assert subs.fetch_state(T0) is FetchState.FETCHING
    assert subs.position(T0).offset == 100


def test_truncation_with_reset_policy_moves_to_the_divergence_point():
    subs = awaiting("earliest")
    assert _apply(subs, {T0: (0, 2, 80)}) == {}
    assert subs.fetch_state(T0) is FetchState.FETCHING
    assert subs.position(T0) == FetchPosition(80, 2, LeaderAndEpoch(2, 5))


def test_truncation_without_reset_policy_reports_the_divergent_offset():
    subs = awaiting("none")
    truncations = _apply(subs, {T0: (0, 2, 80)})
    assert truncations == {T0: OffsetAndMetadata(80, "", 2)}
    assert subs.fetch_state(T0) is FetchState.AWAIT_VALIDATION  # nothing fetched past the divergence
    exc = lev.truncation_error(truncations, {T0: subs.position(T0)})
    assert isinstance(exc, errors.LogTruncationError)
    assert exc.divergent_offsets == {T0: OffsetAndMetadata(80, "", 2)}
    assert "fetch offset 100" in str(exc) and "divergent offset 80" in str(exc)


def test_unknown_epoch_resets_with_policy_and_is_reported_without():
    with_policy = awaiting("latest")
    assert _apply(with_policy, {T0: (0, -1, -1)}) == {}
    assert with_policy.fetch_state(T0) is FetchState.AWAIT_RESET
    without = awaiting("none")
    truncations = _apply(without, {T0: (0, -1, -1)})
    assert truncations == {T0: None}
    assert lev.truncation_error(truncations, {}).divergent_offsets == {}


def test_answer_for_a_position_that_moved_meanwhile_is_ignored():
    subs = awaiting("none")
    requested = {T0: subs.position(T0)}
    subs.seek(T0, 5)  # the user seeks while the request is in flight
    result = lev.handle_offset_for_leader_epoch_response(response({T0: (0, 2, 1)}), requested)
    assert lev.apply_validation(subs, result, requested, 0, 100) == {}
    assert subs.position(T0).offset == 5 and subs.fetch_state(T0) is FetchState.FETCHING


def test_retried_partitions_wait_for_the_backoff():
    subs = awaiting("none")
    _apply(subs, {T0: (6, -1, -1)})
    assert subs.partitions_needing_validation(1099) == set()
    assert subs.partitions_needing_validation(1100) == {T0}
