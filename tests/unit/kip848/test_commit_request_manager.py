"""The KIP-848 commit request manager, sans-IO on a fake clock, with real message objects."""

from __future__ import annotations

import uuid

import pytest

from kproto.net.client_versions import client_max_version
from kproto.consumer.background.coordinator_request_manager import Coordinator, CoordinatorRequestManager
from kproto.consumer.kip848.commit_request_manager import CommitRequestManager
from kproto.consumer.subscription_state import SubscriptionState
from kproto.errors import (CommitFailedError, KafkaTimeoutError, SslAuthenticationError, StaleMemberEpochError,
                           UnknownTopicOrPartitionError)
from kproto.messages import OffsetCommitRequest, OffsetCommitResponse, OffsetFetchResponse
from kproto.structs import OffsetAndMetadata as OAM
from kproto.structs import TopicPartition as TP

from tests.support.clock import FakeClock

BACKOFF_MS = 100
STALE_MEMBER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, NOT_COORDINATOR, UNKNOWN_MEMBER_ID = 113, 3, 16, 25


class Setup:
    def __init__(self, auto_commit: bool = True, topic_ids: dict | None = None) -> None:
        self.clock = FakeClock()
        self.subscriptions = SubscriptionState()
        self.subscriptions.subscribe(["alpha"])
        self.subscriptions.assign_from_subscribed([TP("alpha", 0)])
        self.subscriptions.seek(TP("alpha", 0), 42)
        self.coordinator = CoordinatorRequestManager("g", BACKOFF_MS, 1000, jitter=0)
        self.coordinator.coordinator = Coordinator(7, "127.0.0.1", 9092, 7)
        self.commit = CommitRequestManager("g", self.subscriptions, self.coordinator, auto_commit_enabled=auto_commit,
                                           auto_commit_interval_ms=5000, retry_backoff_ms=BACKOFF_MS,
                                           jitter=0, now_ms=self.clock(), time_ms=self.clock,
                                           topic_ids=lambda: topic_ids or {},
                                           request_metadata_update=lambda: self.metadata_updates.append(1))
        self.metadata_updates: list = []
        self.commit.on_member_epoch_updated(5, "member-a")

    def sent(self, version: int = client_max_version(OffsetCommitRequest)) -> list:
        out = []
        for unsent in self.commit.poll(self.clock()).unsent_requests:
            request, v = unsent.request.build(version)
            request.encode(v)
            out.append((unsent, request))
        return out


def commit_response(code: int = 0) -> OffsetCommitResponse:
    return OffsetCommitResponse(topics=[OffsetCommitResponse.OffsetCommitResponseTopic(
        name="alpha", partitions=[OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=0,
                                                                                      error_code=code)])])


def test_commit_carries_member_id_and_epoch_and_completes() -> None:
    s = Setup()
    future = s.commit.commit_sync({TP("alpha", 0): OAM(10)}, s.clock() + 1000)
    ((unsent, request),) = s.sent()
    assert unsent.node_id == 7
    assert (request.member_id, request.generation_id_or_member_epoch) == ("member-a", 5)
    assert request.topics[0].partitions[0].committed_offset == 10
    unsent.complete(commit_response(), s.clock())
    assert future.result(timeout=0) is None and s.commit.pending == []


def test_commit_before_revocation_retries_stale_epoch_with_the_new_one_and_gives_up_on_unknown_topic() -> None:
    s = Setup()
    future = s.commit.maybe_auto_commit_sync_before_rebalance(s.clock() + 10_000)
    ((unsent, request),) = s.sent()
    assert request.topics[0].partitions[0].committed_offset == 42  # what was consumed
    unsent.complete(commit_response(STALE_MEMBER_EPOCH), s.clock())
    assert not future.done() and s.sent() == []  # backing off
    s.commit.on_member_epoch_updated(6, "member-a")
    s.clock.advance(BACKOFF_MS)
    ((unsent, request),) = s.sent()
    assert request.generation_id_or_member_epoch == 6
    unsent.complete(commit_response(UNKNOWN_TOPIC_OR_PARTITION), s.clock())
    with pytest.raises(UnknownTopicOrPartitionError):
        future.result(timeout=0)


@pytest.mark.parametrize("code,error", [(UNKNOWN_MEMBER_ID, CommitFailedError),
                                        (STALE_MEMBER_EPOCH, StaleMemberEpochError)])
def test_unknown_member_and_stale_epoch_outside_revocation_are_fatal(code, error) -> None:
    s = Setup()
    future = s.commit.commit_sync({TP("alpha", 0): OAM(1)}, s.clock() + 10_000)
    ((unsent, _),) = s.sent()
    unsent.complete(commit_response(code), s.clock())
    with pytest.raises(error):
        future.result(timeout=0)


def test_coordinator_error_rediscovers_and_the_deadline_ends_the_retries() -> None:
    s = Setup()
    future = s.commit.commit_sync({TP("alpha", 0): OAM(1)}, s.clock() + 150)
    ((unsent, _),) = s.sent()
    unsent.complete(commit_response(NOT_COORDINATOR), s.clock())
    assert s.coordinator.coordinator is None and not future.done()
    assert s.sent() == []  # no coordinator: the commit waits
    s.clock.advance(150)
    s.commit.poll(s.clock())
    with pytest.raises(KafkaTimeoutError):
        future.result(timeout=0)


def test_fetch_committed_offsets() -> None:
    s = Setup()
    future = s.commit.fetch_offsets({TP("alpha", 0), TP("alpha", 1)}, s.clock() + 1000)
    ((unsent, request),) = s.sent(version=9)
    assert request.groups[0].member_id == "member-a" and request.groups[0].member_epoch == 5
    unsent.complete(OffsetFetchResponse(groups=[OffsetFetchResponse.OffsetFetchResponseGroup(
        group_id="g", topics=[OffsetFetchResponse.OffsetFetchResponseTopics(name="alpha", partitions=[
            OffsetFetchResponse.OffsetFetchResponsePartitions(partition_index=0, committed_offset=17),
            OffsetFetchResponse.OffsetFetchResponsePartitions(partition_index=1, committed_offset=-1)])])]),
        s.clock())
    assert future.result(timeout=0) == {TP("alpha", 0): OAM(17, "", -1), TP("alpha", 1): None}


def test_auto_commit_fires_on_the_interval_only() -> None:
    s = Setup()
    s.commit.update_timer_and_maybe_commit(s.clock.advance(4999))
    assert s.sent() == []
    assert s.commit.maximum_time_to_wait(s.clock()) == 1
    s.commit.update_timer_and_maybe_commit(s.clock.advance(1))
    ((unsent, request),) = s.sent()
    assert request.topics[0].partitions[0].committed_offset == 42
    s.commit.update_timer_and_maybe_commit(s.clock.advance(10_000))  # one in flight at a time
    assert s.sent() == []
    unsent.complete(commit_response(), s.clock())
    s.commit.update_timer_and_maybe_commit(s.clock())
    assert len(s.sent()) == 1


def test_without_auto_commit_nothing_is_committed_before_revocation() -> None:
    s = Setup(auto_commit=False)
    assert s.commit.maybe_auto_commit_sync_before_rebalance(s.clock() + 1000).result(timeout=0) is None
    s.commit.update_timer_and_maybe_commit(s.clock.advance(60_000))
    assert s.sent() == []


def test_a_due_auto_commit_wakes_the_application_not_the_background_loop() -> None:
    s = Setup()
    s.clock.advance(6000)  # due, but only the application's poll triggers it
    assert s.commit.maximum_time_to_wait(s.clock()) == 0
    assert s.commit.poll(s.clock()).time_until_next_poll_ms > 60_000


def test_a_fatal_coordinator_lookup_fails_the_waiting_commits_and_fetches_at_once() -> None:
    """Java's maybeFailOnCoordinatorFatalError: e.g. every broker refusing our TLS or SASL
    authentication, so no coordinator will come; the commit and the committed-offsets
    fetch fail with that error instead of waiting out their deadlines."""
    s = Setup()
    s.coordinator.coordinator = None
    commit = s.commit.commit_sync({TP("alpha", 0): OAM(10)}, s.clock() + 60_000)
    fetch = s.commit.fetch_offsets({TP("alpha", 0)}, s.clock() + 60_000)
    assert s.sent() == []  # waiting for a coordinator
    (lookup,) = s.coordinator.poll(s.clock()).unsent_requests
    refused = SslAuthenticationError("TLS handshake failed with node 1 (h:1): certificate verify failed")
    lookup.complete_exceptionally(refused, s.clock())
    assert s.sent() == []
    for future in (commit, fetch):
        assert future.exception(timeout=0) is refused
    assert s.commit.pending == []
    # Still there for the heartbeat manager to surface as an ErrorEvent.
    assert s.coordinator.get_and_clear_fatal_error() is refused


ALPHA_ID = uuid.uuid4()


@pytest.mark.parametrize("kind", ["commit", "fetch"])
def test_topic_ids_from_the_metadata_allow_v10_and_unknown_topic_id_retries_after_a_refresh(kind) -> None:
    s = Setup(topic_ids={"alpha": ALPHA_ID})
    if kind == "commit":
        future = s.commit.commit_sync({TP("alpha", 0): OAM(10)}, s.clock() + 10_000)
    else:
        future = s.commit.fetch_offsets({TP("alpha", 0)}, s.clock() + 10_000)
    ((unsent, request),) = s.sent(version=10)
    topics = request.topics if kind == "commit" else request.groups[0].topics
    assert [(t.topic_id, t.name) for t in topics] == [(ALPHA_ID, "")]  # v10: by id only (the name is unset)
    UNKNOWN_TOPIC_ID = 100
    if kind == "commit":
        R = OffsetCommitResponse
        response = R(topics=[R.OffsetCommitResponseTopic(topic_id=ALPHA_ID, partitions=[
            R.OffsetCommitResponsePartition(partition_index=0, error_code=UNKNOWN_TOPIC_ID)])])
    else:
        F = OffsetFetchResponse
        response = F(groups=[F.OffsetFetchResponseGroup(group_id="g", topics=[F.OffsetFetchResponseTopics(
            topic_id=ALPHA_ID, partitions=[F.OffsetFetchResponsePartitions(partition_index=0,
                                                                           error_code=UNKNOWN_TOPIC_ID)])])])
    unsent.complete(response, s.clock())
    assert not future.done() and s.metadata_updates == [1]  # retried after a metadata refresh
    s.clock.advance(BACKOFF_MS)
    ((unsent, request),) = s.sent(version=10)
    assert request.encode(10)


def test_a_topic_without_an_id_in_the_metadata_caps_commits_at_v9() -> None:
    s = Setup(topic_ids={})
    s.commit.commit_sync({TP("alpha", 0): OAM(10)}, s.clock() + 1000)
    ((unsent, request),) = s.sent(version=10)
    assert request.topics[0].name == "alpha"
    assert request.encode(9) and unsent.request.build(10)[1] == 9
