"""ListOffsets, sans-IO: request building per version, response handling, resets.

Requests are encoded with the generated classes and decoded back, so every assertion is
about what goes on the wire; responses are built the same way, encoded at the version
under test and decoded, as they would arrive from a broker.
"""

from __future__ import annotations

import pytest

from kproto import errors
from kproto.consumer.config import parse_isolation_level
from kproto.consumer.offsets import offset_fetcher_utils as utils
from kproto.consumer.subscription_state import (AutoOffsetResetStrategy, FetchPosition, FetchState,
                                                LeaderAndEpoch, SubscriptionState)
from kproto.messages import ListOffsetsRequest, ListOffsetsResponse
from kproto.net.client_versions import client_max_version
from kproto.structs import IsolationLevel, OffsetAndTimestamp, TopicPartition

T0, T1, U0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def wire(message, version):
    """Encode at ``version`` and decode again: what the other side would see."""
    return type(message).decode(message.encode(version), version)


class StaticMetadata:
    """ClusterMetadata's two partition lookups over a fixed table (no I/O involved)."""

    def __init__(self, leaders):
        self.leaders = leaders  # tp -> (leader, epoch)
        self.seen_epochs = {}

    def leader_for_partition(self, tp):
        return self.leaders[tp][0] if tp in self.leaders else None

    def leader_epoch_for_partition(self, tp):
        return self.leaders[tp][1] if tp in self.leaders else -1

    def update_last_seen_epoch_if_newer(self, tp, epoch):
        self.seen_epochs[tp] = epoch


def response(parts, version):
    """A decoded ListOffsetsResponse from ``{tp: (error, offset, timestamp, epoch)}``."""
    R = ListOffsetsResponse
    topics = {}
    for tp, (code, offset, timestamp, epoch) in parts.items():
        part = R.ListOffsetsPartitionResponse(partition_index=tp.partition, error_code=code)
        if version == 0:
            part.old_style_offsets = [] if offset < 0 else [offset]
        else:
            part.offset, part.timestamp = offset, timestamp
        if version >= 4:
            part.leader_epoch = epoch
        topics.setdefault(tp.topic, []).append(part)
    msg = R(topics=[R.ListOffsetsTopicResponse(name=n, partitions=p) for n, p in topics.items()])
    return wire(msg, version)


# --- versions -------------------------------------------------------------------------


@pytest.mark.parametrize("isolation, require_ts, expected", [
    (IsolationLevel.READ_UNCOMMITTED, False, 0), (IsolationLevel.READ_UNCOMMITTED, True, 1),
    (IsolationLevel.READ_COMMITTED, False, 2), (IsolationLevel.READ_COMMITTED, True, 2)])
def test_min_version_follows_isolation_and_timestamp_needs(isolation, require_ts, expected):
    assert utils.list_offsets_min_version(isolation, require_ts) == expected


def test_version_choice_is_highest_common_and_refuses_too_old_brokers():
    assert utils.choose_version(ListOffsetsRequest, 7) == 7
    # The newest version kproto's client sends, which may be below the generated class's.
    newest = client_max_version(ListOffsetsRequest)
    assert utils.choose_version(ListOffsetsRequest, (0, 99)) == newest
    assert utils.choose_version(ListOffsetsRequest, None) == newest
    with pytest.raises(errors.UnsupportedVersionError):
        utils.choose_version(ListOffsetsRequest, 1, utils.list_offsets_min_version(IsolationLevel.READ_COMMITTED, False))


def test_isolation_level_names_and_codes():
    assert parse_isolation_level("read_committed") is IsolationLevel.READ_COMMITTED == 1
    assert parse_isolation_level(IsolationLevel.READ_UNCOMMITTED) is IsolationLevel.READ_UNCOMMITTED == 0
    with pytest.raises(errors.KafkaConfigurationError):
        parse_isolation_level("serializable")


# --- requests -------------------------------------------------------------------------


def test_grouping_by_leader_and_unknown_leaders():
    meta = StaticMetadata({T0: (1, 5), T1: (2, 7), U0: (1, -1)})
    by_node, no_leader = utils.group_list_offsets_requests(
        {T0: -2, T1: -1, U0: 1000, TopicPartition("c", 0): -1}, meta)
    assert by_node == {1: {T0: (-2, 5), U0: (1000, -1)}, 2: {T1: (-1, 7)}}
    assert no_leader == {TopicPartition("c", 0)}


def test_leaderless_partition_is_not_sent():
    meta = StaticMetadata({T0: (-1, 3)})
    by_node, no_leader = utils.group_list_offsets_requests({T0: -1}, meta)
    assert by_node == {} and no_leader == {T0}


@pytest.mark.parametrize("version", range(ListOffsetsRequest.min_version, client_max_version(ListOffsetsRequest) + 1))
def test_request_fields_per_version(version):
    isolation = IsolationLevel.READ_COMMITTED if version >= 2 else IsolationLevel.READ_UNCOMMITTED
    req = wire(utils.build_list_offsets_request({T0: (-2, 5), T1: (1234, 6), U0: (-1, -1)}, isolation,
                                                version, timeout_ms=4321), version)
    assert req.replica_id == -1
    sent = {TopicPartition(t.name, p.partition_index): p for t in req.topics for p in t.partitions}
    assert {tp: p.timestamp for tp, p in sent.items()} == {T0: -2, T1: 1234, U0: -1}
    if version >= 2:
        assert req.isolation_level == IsolationLevel.READ_COMMITTED
    if version >= 4:
        assert {tp: p.current_leader_epoch for tp, p in sent.items()} == {T0: 5, T1: 6, U0: -1}
    else:
        assert all(p.current_leader_epoch == -1 for p in sent.values())  # not on the wire: default
    if version == 0:
        assert all(p.max_num_offsets == 1 for p in sent.values())
    if version >= 10:
        assert req.timeout_ms == 4321


def test_read_committed_cannot_be_built_below_v2():
    with pytest.raises(errors.IllegalArgumentError):
        utils.build_list_offsets_request({T0: (-1, -1)}, IsolationLevel.READ_COMMITTED, 1)


# --- responses ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 4, 10])
def test_success_answers_per_version(version):
    resp = response({T0: (0, 42, 1000, 3), T1: (0, -1, -1, -1)}, version)
    result = utils.handle_list_offsets_response(resp, version, [T0, T1])
    data = result.fetched_offsets[T0]
    assert data.offset == 42
    assert data.timestamp == (None if version == 0 else 1000)
    assert data.leader_epoch == (3 if version >= 4 else None)
    assert result.no_offset == {T1}  # offset -1: no record at or after the timestamp
    assert not result.partitions_to_retry and not result.metadata_update_needed


@pytest.mark.parametrize("code", [6, 9, 56, 78, 5, 74, 75, 3, 100, 7])
def test_leadership_errors_are_retried_after_a_metadata_refresh(code):
    resp = response({T0: (code, -1, -1, -1), T1: (0, 9, 1, 1)}, 7)
    result = utils.handle_list_offsets_response(resp, 7, [T0, T1])
    assert result.partitions_to_retry == {T0}
    assert result.metadata_update_needed
    assert T1 in result.fetched_offsets


def test_unexpected_error_is_retried_without_metadata_refresh():
    result = utils.handle_list_offsets_response(response({T0: (-1, -1, -1, -1)}, 7), 7, [T0])
    assert result.partitions_to_retry == {T0} and not result.metadata_update_needed


def test_unsupported_message_format_means_no_offset():
    result = utils.handle_list_offsets_response(response({T0: (43, -1, -1, -1)}, 1), 1, [T0])
    assert result.no_offset == {T0} and not result.partitions_to_retry


def test_topic_authorization_is_fatal_and_names_the_topics():
    resp = response({T0: (29, -1, -1, -1), U0: (29, -1, -1, -1), T1: (0, 1, 1, 1)}, 7)
    with pytest.raises(errors.TopicAuthorizationFailedError, match="topics a, b$"):
        utils.handle_list_offsets_response(resp, 7, [T0, T1, U0])


def test_partition_left_out_of_the_response_is_retried_and_extra_ones_ignored():
    resp = response({T0: (0, 5, 1, 1), U0: (0, 8, 1, 1)}, 7)
    result = utils.handle_list_offsets_response(resp, 7, [T0, T1])
    assert set(result.fetched_offsets) == {T0}
    assert result.partitions_to_retry == {T1}


def test_results_as_the_facade_returns_them():
    fetched = {T0: utils.ListOffsetData(10, 1500, 2), T1: utils.ListOffsetData(3, None, None)}
    assert utils.to_offsets_for_times([T0, T1, U0], fetched) == {
        T0: OffsetAndTimestamp(10, 1500, 2), T1: OffsetAndTimestamp(3, -1, None), U0: None}
    assert utils.to_offsets([T0, T1], fetched) == {T0: 10, T1: 3}
    with pytest.raises(errors.ProtocolError):
        utils.to_offsets([U0], fetched)


@pytest.mark.parametrize("bad", [{T0: -1}, {T0: "x"}, {T0: True}, {("a", 0): 5}])
def test_offsets_for_times_rejects_bad_targets(bad):
    with pytest.raises(errors.IllegalArgumentError):
        utils.validate_timestamps(bad)


# --- resets on a real SubscriptionState -------------------------------------------------


def assigned(strategy="latest", *tps):
    subs = SubscriptionState(strategy)
    subs.assign_from_user(tps or [T0, T1])
    return subs


def test_initializing_partitions_reset_per_policy_and_none_raises():
    subs = assigned("earliest")
    subs.reset_initializing_positions()
    assert utils.partitions_to_reset(subs, 0) == {T0: utils.EARLIEST_TIMESTAMP, T1: utils.EARLIEST_TIMESTAMP}
    none = assigned("none")
    with pytest.raises(errors.NoOffsetForPartitionError):
        none.reset_initializing_positions()
    assert utils.partitions_to_reset(none, 0) == {}


def test_reset_results_seek_and_failures_back_off():
    subs = assigned("latest")
    subs.reset_initializing_positions()
    subs.request_offset_reset(T1, "earliest")
    requested = utils.partitions_to_reset(subs, 0)
    assert requested == {T0: utils.LATEST_TIMESTAMP, T1: utils.EARLIEST_TIMESTAMP}
    meta = StaticMetadata({T0: (1, 4), T1: (2, 9)})
    result = utils.ListOffsetResult(fetched_offsets={T0: utils.ListOffsetData(77, -1, 4)},
                                    partitions_to_retry={T1})
    utils.apply_reset_result(subs, meta, requested, result, now_ms=1000, retry_backoff_ms=250)
    # As Java: a reset position carries no offset epoch (the leader just gave the offset),
    # so it is fetched from at once, without an OffsetsForLeaderEpoch round trip first.
    assert subs.position(T0) == FetchPosition(77, None, LeaderAndEpoch(1, 4))
    assert subs.fetch_state(T0) is FetchState.FETCHING
    assert meta.seen_epochs == {T0: 4}  # a newer epoch would trigger a metadata refresh
    assert subs.fetch_state(T1) is FetchState.AWAIT_RESET
    assert utils.partitions_to_reset(subs, 1249) == {}
    assert utils.partitions_to_reset(subs, 1250) == {T1: utils.EARLIEST_TIMESTAMP}


def test_reset_result_is_dropped_when_the_strategy_changed_meanwhile():
    subs = assigned("latest")
    subs.reset_initializing_positions()
    requested = utils.partitions_to_reset(subs, 0)
    subs.request_offset_reset(T0, AutoOffsetResetStrategy.EARLIEST)  # seek_to_beginning in between
    result = utils.ListOffsetResult(fetched_offsets={T0: utils.ListOffsetData(50, -1, None),
                                                     T1: utils.ListOffsetData(60, -1, None)})
    utils.apply_reset_result(subs, StaticMetadata({}), requested, result, 0, 100)
    assert subs.fetch_state(T0) is FetchState.AWAIT_RESET
    assert subs.position(T1).offset == 60 and subs.fetch_state(T1) is FetchState.FETCHING


# --- the blocking wrapper refuses bad arguments before any I/O --------------------------


@pytest.fixture
def idle_fetcher():
    from kproto.consumer.classic.offset_fetcher import OffsetFetcher
    from kproto.net.client import NetworkClient

    client = NetworkClient(bootstrap_servers="127.0.0.1:9")  # never contacted by these calls
    yield OffsetFetcher(client, SubscriptionState("earliest"), client.cluster)
    client.close()


@pytest.mark.parametrize("call", [
    lambda f: f.beginning_offsets([("a", 0)], 1000),
    lambda f: f.end_offsets([T0], -1),
    lambda f: f.end_offsets([T0], None),
    lambda f: f.offsets_for_times({T0: -5}, 1000),
])
def test_bad_arguments_are_refused(idle_fetcher, call):
    with pytest.raises(errors.IllegalArgumentError):
        call(idle_fetcher)


def test_nothing_asked_nothing_sent(idle_fetcher):
    assert idle_fetcher.offsets_for_times({}, 1000) == {}
    assert idle_fetcher.end_offsets([], 1000) == {}


@pytest.mark.parametrize("timestamp, first_version", sorted(utils.SPECIAL_TIMESTAMP_MIN_VERSION.items()))
def test_special_timestamps_need_the_version_that_defines_them(timestamp, first_version):
    # -6 (EARLIEST_PENDING_UPLOAD, KIP-1023) is ListOffsets v11's addition.
    req = wire(utils.build_list_offsets_request({T0: (timestamp, -1)}, IsolationLevel.READ_UNCOMMITTED, first_version),
               first_version)
    assert req.topics[0].partitions[0].timestamp == timestamp
    with pytest.raises(errors.UnsupportedVersionError, match="v{}".format(first_version)):
        utils.build_list_offsets_request({T0: (timestamp, -1)}, IsolationLevel.READ_UNCOMMITTED, first_version - 1)


@pytest.mark.parametrize("timestamp", sorted(utils.SPECIAL_TIMESTAMP_MIN_VERSION) + [-1, -2])
def test_offsets_for_times_takes_no_special_timestamp(timestamp):
    # As Java's KafkaConsumer.offsetsForTimes: special timestamps are the Admin client's.
    with pytest.raises(errors.IllegalArgumentError):
        utils.validate_timestamps({T0: timestamp})
