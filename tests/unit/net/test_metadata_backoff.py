"""KIP-580: the metadata refresh schedule backs off exponentially (Java's Metadata).

Sans-IO: a ClusterMetadata fed MetadataResponses (through the wire codec) and a clock.
Java's rules: failed requests in a row (``attempts``) and answers in a row that taught
nothing new (``equivalentResponseCount``) each back off ``retry_backoff_ms * 2**(n-1)``,
+-20% jitter, capped at ``retry_backoff_max_ms``; a successful answer clears the first, an
answer with progress (new partition, newer leader epoch, no epoch, new topic id), the
periodic expiry, ``request_update(reset_equivalent=True)`` and new topics clear the second.
"""

from __future__ import annotations

import uuid

import pytest

from kproto import errors
from kproto.consumer.config import ConsumerConfig
from kproto.errors import KafkaConfigurationError
from kproto.net.client import NetworkClient
from kproto.net.metadata import ClusterMetadata
from kproto.structs import TopicPartition
from tests.support.fetch_fixtures import LEADERS as FETCH_LEADERS
from tests.support.fetch_fixtures import TOPIC_ID as FETCH_TOPIC_ID
from tests.support.fetch_fixtures import make as make_fetch
from tests.support.fetch_fixtures import response_for
from tests.unit.net.metadata_responses import TID, response

BACKOFF, MAX_BACKOFF = 100, 1000
T0 = TopicPartition("t", 0)
NOT_LEADER_OR_FOLLOWER = 6


def fresh(max_age_ms: int = 600_000) -> ClusterMetadata:
    return ClusterMetadata(metadata_max_age_ms=max_age_ms, retry_backoff_ms=BACKOFF,
                           retry_backoff_max_ms=MAX_BACKOFF)


def expected_range(n: int) -> tuple[int, int]:
    """Java's ExponentialBackoff.backoff(n - 1) bounds: the n-th backoff in a row."""
    term = BACKOFF * 2 ** (n - 1)
    return min(int(term * 0.8), MAX_BACKOFF), min(int(term * 1.2), MAX_BACKOFF)


def equivalent_answers(md: ClusterMetadata, count: int, now: int, leaders=None) -> None:
    """``count`` answers naming the same leaders, all at ``now`` (on a fresh metadata the
    first one is progress: its partitions are new)."""
    for _ in range(count):
        md.update(response(leaders or {0: (1, 5)}), now_ms=now)


# --- failed requests in a row ---------------------------------------------------------------

def test_failed_requests_back_off_exponentially_up_to_the_max():
    md = fresh()
    now = 1000
    assert md.ttl(now) == 0  # the first refresh goes at once
    gaps = []
    for n in range(1, 9):
        md.failed_update(errors.KafkaConnectionError("refused"), now)
        gap = md.ttl(now)
        lo, hi = expected_range(n)
        assert lo <= gap <= hi, (n, gap)
        assert md.ttl(now + gap) == 0 and md.attempts == n
        gaps.append(gap)
        now += gap
    assert gaps[-3:] == [MAX_BACKOFF] * 3  # 100 * 2**4 * 0.8 > 1000: capped from the 5th on
    assert gaps[1] > gaps[0] and gaps[2] > gaps[1] and gaps[3] > gaps[2]


def test_a_successful_answer_ends_the_failure_streak():
    md = fresh()
    now = 0
    for _ in range(5):
        md.failed_update(errors.KafkaConnectionError("refused"), now)
        now += md.ttl(now)
    assert md.ttl(now - 1) > 0
    md.update(response({0: (1, 5)}), now_ms=now)
    assert md.attempts == 0
    md.request_update()
    # Back to the first step: retry_backoff_ms (jittered) after the answer.
    assert expected_range(1)[0] <= md.ttl(now) <= expected_range(1)[1]
    md.failed_update(errors.KafkaConnectionError("refused"), now + 200)
    assert expected_range(1)[0] <= md.ttl(now + 200) <= expected_range(1)[1]


def test_failed_update_fails_the_waiters_but_record_failed_attempt_does_not():
    md = fresh()
    waiter = md.request_update()
    md.record_failed_attempt(0)
    assert not waiter.is_done and md.attempts == 1 and md.ttl(0) > 0
    md.failed_update(errors.KafkaConnectionError("refused"), 150)
    assert isinstance(waiter.exception, errors.KafkaConnectionError) and md.attempts == 2


# --- equivalent answers ------------------------------------------------------------------------

def test_answers_without_progress_back_off_exponentially():
    md = fresh()
    now = 0
    md.update(response({0: (1, 5)}), now_ms=now)  # new partitions: progress
    assert md.equivalent_response_count == 0
    gaps = []
    for n in range(1, 7):
        # The fetch path asks again because the leader looked stale; the broker answers
        # with the same leader and epoch.
        md.request_update(reset_equivalent=False)
        now += md.ttl(now)
        md.update(response({0: (1, 5)}), now_ms=now)
        assert md.equivalent_response_count == n
        md.request_update(reset_equivalent=False)
        gap = md.ttl(now)
        lo, hi = expected_range(n)
        assert lo <= gap <= hi, (n, gap)
        gaps.append(gap)
    assert gaps[-1] == MAX_BACKOFF and gaps[3] > gaps[2] > gaps[1] > gaps[0]


@pytest.mark.parametrize("progress", [
    pytest.param({0: (2, 6)}, id="higher-leader-epoch"),
    pytest.param({0: (1, 5), 1: (2, 3)}, id="new-partition"),
    pytest.param({0: (1, -1)}, id="partition-without-epoch"),
])
def test_an_answer_with_progress_resets_the_equivalent_backoff(progress):
    md = fresh()
    equivalent_answers(md, 6, now=0)
    md.request_update(reset_equivalent=False)
    assert md.ttl(0) == MAX_BACKOFF
    md.update(response(progress), now_ms=0)
    assert md.equivalent_response_count == 0
    md.request_update(reset_equivalent=False)
    assert md.ttl(0) <= expected_range(1)[1]  # only the minimum gap after an answer


def test_a_lower_epoch_from_a_lagging_broker_is_no_progress():
    md = fresh()
    equivalent_answers(md, 1, now=0)
    md.update(response({0: (2, 4)}), now_ms=0)  # older epoch: kept 5, asked again
    assert md.leader_epoch_for_partition(T0) == 5 and md.need_update()
    assert md.equivalent_response_count == 1
    assert md.ttl(0) >= expected_range(1)[0]  # that retry is backed off too


def test_a_new_topic_id_is_progress_and_its_lower_epochs_are_taken():
    md = fresh()
    equivalent_answers(md, 4, now=0, leaders={0: (1, 9)})
    recreated = uuid.UUID(int=TID.int + 1)
    md.update(response({0: (2, 0)}, topic_id=recreated), now_ms=0)
    # Java's updateLatestMetadata: a re-created topic's epochs start again.
    assert md.topic_id("t") == recreated
    assert md.leader_for_partition(T0) == 2 and md.leader_epoch_for_partition(T0) == 0
    assert md.equivalent_response_count == 0 and not md.need_update()


def test_expiry_clears_the_equivalent_backoff():
    md = fresh(max_age_ms=600)
    equivalent_answers(md, 6, now=10_000)
    md.request_update(reset_equivalent=False)
    assert md.ttl(10_000) == MAX_BACKOFF and md.ttl(10_599) == 401
    # The metadata is now older than metadata_max_age_ms: the periodic refresh goes.
    assert md.ttl(10_600) == 0 and md.equivalent_response_count == 0


def test_request_update_with_reset_clears_the_equivalent_backoff():
    md = fresh()
    equivalent_answers(md, 6, now=0)
    md.request_update(reset_equivalent=False)
    assert md.ttl(0) == MAX_BACKOFF and md.equivalent_response_count == 5
    md.request_update_no_wait(reset_equivalent=False)
    assert md.ttl(0) == MAX_BACKOFF
    md.request_update()  # new metadata wanted: Java's default
    assert md.equivalent_response_count == 0 and md.ttl(0) <= expected_range(1)[1]


def test_new_topics_are_asked_for_at_once_despite_both_backoffs():
    md = fresh()
    equivalent_answers(md, 6, now=0)
    md.failed_update(errors.KafkaConnectionError("refused"), 0)
    md.request_update(reset_equivalent=False)
    assert md.ttl(0) > 0
    waiter = md.set_topics(["t", "new-topic"])
    assert md.ttl(0) == 0 and not waiter.is_done
    assert md.attempts == 1  # the failure streak is still counted (Java)


def test_stale_leadership_signals_keep_the_equivalent_backoff():
    md = fresh()
    equivalent_answers(md, 6, now=0)
    assert md.update_last_seen_epoch_if_newer(T0, 6)
    assert md.maybe_request_update_for_error(NOT_LEADER_OR_FOLLOWER)
    assert md.need_update() and md.equivalent_response_count == 5 and md.ttl(0) == MAX_BACKOFF


# --- call sites ------------------------------------------------------------------------------

def test_not_leader_fetch_error_asks_again_without_resetting_the_backoff():
    fetch, _ = make_fetch()
    md = fetch.metadata
    same_leaders = {p: (leader, 4) for p, leader in FETCH_LEADERS.items()}  # as make() applied
    for _ in range(3):
        md.update(response(same_leaders, topic_id=FETCH_TOPIC_ID), now_ms=0)
    assert md.equivalent_response_count == 3
    requests = fetch.prepare_fetch_requests()
    fetch.handle_fetch_success(2, requests[2], response_for(
        requests, 2, 16, partition_errors={TopicPartition("t", 1): NOT_LEADER_OR_FOLLOWER}), 16)
    assert md.need_update() and md.equivalent_response_count == 3
    lo, hi = expected_range(3)
    assert lo <= md.ttl(0) <= hi


def test_a_subscription_change_resets_the_backoff():
    md = fresh()
    md.set_topics(["t"])
    equivalent_answers(md, 6, now=0)
    md.request_update(reset_equivalent=False)
    assert md.ttl(0) == MAX_BACKOFF
    md.set_topics(["t"])  # nothing new: nothing asked
    assert md.ttl(0) == MAX_BACKOFF
    md.need_all_topic_metadata(True)  # a pattern subscription: new metadata wanted
    assert md.ttl(0) == 0 and md.equivalent_response_count == 0


def test_disconnects_while_due_back_off_exponentially():
    client = NetworkClient(bootstrap_servers="127.0.0.1:9", retry_backoff_ms=BACKOFF,
                           retry_backoff_max_ms=MAX_BACKOFF)
    try:
        md, updater = client.cluster, client._metadata_updater
        md.update(response({0: (1, 5)}), now_ms=0)
        now = 1000
        gaps = []
        waiter = md.request_update()
        for n in range(1, 6):
            # A broker refusing connections while a refresh is due: each counts as a
            # failed attempt (nobody waiting is failed while another node may be tried).
            assert md.ttl(now) == 0
            updater.connecting = 1  # the refresh waits for node 1's connection
            updater.handle_server_disconnect(1, now)
            gap = md.ttl(now)
            gaps.append(gap)
            lo, hi = expected_range(n)
            assert lo <= gap <= hi, (n, gap)
            now += gap
        assert not waiter.is_done and md.attempts == 5
    finally:
        client.close()
    assert gaps[3] > gaps[2] > gaps[1] > gaps[0]


# --- configuration ------------------------------------------------------------------------------

def test_retry_backoff_max_ms_is_a_validated_setting_wired_to_the_metadata():
    config = ConsumerConfig(bootstrap_servers="127.0.0.1:9")
    assert config.retry_backoff_max_ms == 1000
    client = NetworkClient(**dict(ConsumerConfig(bootstrap_servers="127.0.0.1:9", retry_backoff_ms=50,
                                                 retry_backoff_max_ms=400)))
    try:
        assert (client.cluster.retry_backoff_ms, client.cluster.retry_backoff_max_ms) == (50, 400)
    finally:
        client.close()
    for bad in (-1, "1000", 1.5, True, None):
        with pytest.raises(KafkaConfigurationError, match="retry_backoff_max_ms"):
            ConsumerConfig(retry_backoff_max_ms=bad)


def test_retry_backoff_above_its_max_is_refused_when_both_are_given():
    with pytest.raises(KafkaConfigurationError, match="retry_backoff_ms .* must not exceed retry_backoff_max_ms"):
        ConsumerConfig(retry_backoff_ms=500, retry_backoff_max_ms=200)
    assert ConsumerConfig(retry_backoff_ms=200, retry_backoff_max_ms=200).retry_backoff_max_ms == 200


def test_a_kafka_python_retry_backoff_above_the_default_max_keeps_working():
    # kafka-python has no retry_backoff_max_ms: its configurations must not break.
    config = ConsumerConfig(retry_backoff_ms=2000)
    assert config.retry_backoff_max_ms == 2000
    assert "retry_backoff_max_ms" not in config.user_supplied
    assert config.replace(retry_backoff_ms=100).retry_backoff_max_ms == 1000
