"""ClusterMetadata fed MetadataResponse objects: leaders, epochs, ids, refresh schedule."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kproto import errors
from kproto.net.metadata import ClusterMetadata, build_metadata_request
from kproto.structs import BrokerMetadata, TopicPartition
from tests.support.schema_strategies import BY_NAME, message_strategy, versions_of
from tests.unit.net.metadata_responses import Partition, TID, Topic, fresh, response


def test_bootstrap_brokers_until_the_first_update():
    md = fresh()
    assert {b.node_id for b in md.brokers()} == {"bootstrap-0"}
    assert md.ttl(0) == 0  # a refresh is due at once
    waiter = md.request_update()
    md.update(response({0: (1, 5), 1: (2, 7)}), now_ms=10)
    assert waiter.succeeded() and waiter.value is md
    assert md.brokers() == {BrokerMetadata(1, "h1", 9092, "r1"), BrokerMetadata(2, "h2", 9093, None)}
    assert md.cluster_id == "c" and md.controller_id == 2
    assert md.leader_for_partition(TopicPartition("t", 1)) == 2
    assert md.leader_epoch_for_partition(TopicPartition("t", 0)) == 5
    assert md.partitions_for_broker(1) == {TopicPartition("t", 0)}
    assert md.topic_id("t") == TID and md.topic_name(TID) == "t"
    assert md.is_bootstrap("bootstrap-0") and md.broker_metadata("bootstrap-0") is not None


def test_refresh_schedule_follows_max_age_and_backoff():
    md = fresh()
    md.update(response({0: (1, 0)}), now_ms=1000)
    assert not md.need_update()
    assert md.ttl(1000) == 1000 and md.ttl(1500) == 500 and md.ttl(2000) == 0
    md.request_update()
    # Within retry_backoff_ms (+-20% jitter, KIP-580) of the last answer.
    assert 30 <= md.ttl(1050) <= 70
    assert md.ttl(1120) == 0
    failed = md.request_update()
    md.failed_update(errors.KafkaConnectionError("x"), now_ms=1200)
    assert isinstance(failed.exception, errors.KafkaConnectionError)
    assert 80 <= md.ttl(1200) <= 120 and md.need_update()


def test_older_leader_epoch_from_a_lagging_broker_is_ignored_and_refreshes_again():
    md = fresh()
    md.update(response({0: (1, 5)}), now_ms=0)
    md.update(response({0: (2, 4)}), now_ms=10)
    tp = TopicPartition("t", 0)
    assert md.leader_for_partition(tp) == 1 and md.leader_epoch_for_partition(tp) == 5
    assert md.need_update()
    md.update(response({0: (2, 6)}), now_ms=20)
    assert md.leader_for_partition(tp) == 2 and md.leader_epoch_for_partition(tp) == 6
    assert not md.need_update()


def test_newer_epoch_seen_elsewhere_requests_a_refresh():
    md = fresh()
    md.update(response({0: (1, 5)}), now_ms=0)
    tp = TopicPartition("t", 0)
    assert not md.update_last_seen_epoch_if_newer(tp, 5)
    assert not md.update_last_seen_epoch_if_newer(tp, -1)
    assert not md.need_update()
    assert md.update_last_seen_epoch_if_newer(tp, 6)
    assert md.need_update()


def test_topic_errors_sort_topics_into_their_sets():
    md = fresh()
    md.set_topics(["t", "gone", "secret", "bad name"])
    md.update(response({0: (1, 0)}, extra_topics=[
        Topic(name="gone", error_code=3), Topic(name="secret", error_code=29),
        Topic(name="bad name", error_code=17)]), now_ms=0)
    assert md.unknown_topics == {"gone"}
    assert md.unauthorized_topics == {"secret"}
    assert md.invalid_topics == {"bad name"}
    assert md.topics() == {"t"}
    assert md.partitions_for_topic("gone") is None


def test_leader_not_available_keeps_partitions_and_retries_soon():
    md = fresh()
    md.update(response({0: (-1, 3)}, error=5), now_ms=0)
    assert md.partitions_for_topic("t") == {0}
    assert md.available_partitions_for_topic("t") == set()
    assert md.leader_for_partition(TopicPartition("t", 0)) == -1
    assert md.need_update()


def test_topics_of_interest_and_all_topics():
    md = fresh()
    md.update(response({0: (1, 0)}), now_ms=0)
    assert md.topics_of_interest() == set()
    future = md.set_topics(["a", "b"])
    assert not future.is_done and md.need_update()
    md.update(response({0: (1, 0)}), now_ms=1)
    assert future.succeeded()
    assert md.set_topics(["a"]).succeeded()  # nothing new to learn
    md.need_all_topic_metadata()
    assert md.topics_of_interest() is None and md.need_update()


def test_listeners_run_after_each_update_and_a_failing_one_is_contained():
    md = fresh()
    seen = []
    md.add_listener(lambda m: seen.append(m.update_count))
    md.add_listener(lambda m: 1 / 0)
    md.update(response({0: (1, 0)}), now_ms=0)
    md.update(response({0: (1, 0)}), now_ms=1)
    assert seen == [1, 2]


def test_errors_that_mean_stale_metadata_request_a_refresh():
    md = fresh()
    md.update(response({0: (1, 0)}), now_ms=0)
    assert not md.maybe_request_update_for_error(errors.RebalanceInProgressError)
    assert not md.need_update()
    assert md.maybe_request_update_for_error(6)
    assert md.need_update()


def test_metadata_request_shapes():
    assert build_metadata_request(None, 12, False).topics is None
    assert build_metadata_request(None, 0, False).topics == []  # v0: empty means all
    req = build_metadata_request({"b", "a"}, 12, False)
    assert [t.name for t in req.topics] == ["a", "b"]
    assert req.allow_auto_topic_creation is False
    assert build_metadata_request(set(), 12, False).topics == []
    for version in (0, 1, 4, 12):
        build_metadata_request({"a"}, version, False).encode(version)


def test_stale_metadata_errors_are_found_at_any_depth():
    from kproto.messages import FetchResponse, HeartbeatResponse
    from kproto.net.metadata import response_needs_metadata_update

    def fetch(code):
        return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
            topic="t", partitions=[FetchResponse.PartitionData(partition_index=0, error_code=0),
                                   FetchResponse.PartitionData(partition_index=1, error_code=code)])])

    assert response_needs_metadata_update(fetch(6))       # NOT_LEADER_OR_FOLLOWER
    assert response_needs_metadata_update(fetch(74))      # FENCED_LEADER_EPOCH
    assert not response_needs_metadata_update(fetch(1))   # OFFSET_OUT_OF_RANGE
    assert not response_needs_metadata_update(fetch(0))
    assert response_needs_metadata_update(HeartbeatResponse(error_code=3))
    assert not response_needs_metadata_update(HeartbeatResponse(error_code=27))


def test_a_coordinator_gets_a_node_id_of_its_own_with_the_address_it_was_found_at():
    m = ClusterMetadata()
    m.update(response({0: (1, 0)}), now_ms=0)
    node_id = m.add_coordinator(1, "coord-host", 9999)
    # Java's Integer.MAX_VALUE - broker id: never a broker's id, so never a broker's connection.
    assert node_id == 2**31 - 1 - 1
    assert node_id not in {b.node_id for b in m.brokers()}
    assert m.broker_metadata(node_id) == BrokerMetadata(node_id, "coord-host", 9999, None)
    assert m.broker_metadata(1).host == "h1"  # the broker itself is unchanged
    assert m.add_coordinator(2, "h2", 9093) != node_id


def test_an_answer_to_an_older_request_leaves_newer_needs_pending():
    """Java's requestVersion: a refresh asked for while a request is in flight is answered
    only by a request sent after it (the one in flight did not ask for it)."""
    m = ClusterMetadata()
    first = m.request_update()
    sent_version = m.request_version  # the updater sends a request now (topics of interest)
    m.need_all_topic_metadata(True)   # then, in flight, someone needs every topic
    second = m.request_update()
    m.update(response({0: (1, 0)}), now_ms=0, request_version=sent_version, asked_all=False)
    assert first.is_done and first.succeeded()
    assert not second.is_done
    assert m.need_update()  # ask again
    m.update(response({0: (1, 0)}, extra_topics=[Topic(name="other", topic_id=uuid.uuid4(), partitions=[
        Partition(partition_index=0, leader_id=2, leader_epoch=0, replica_nodes=[2], isr_nodes=[2])])]),
        now_ms=10, request_version=m.request_version, asked_all=True)
    assert second.is_done and second.succeeded()
    assert not m.need_update()
    assert m.topics() == {"t", "other"}


def _error_code_holders(value, out):
    """Every decoded struct below ``value`` (itself included) that carries an error_code."""
    fields = getattr(type(value), "_fields", None)
    if fields is None:
        return out
    if "error_code" in fields:
        out.append(value)
    for name in fields:
        item = getattr(value, name, None)
        for child in (item if isinstance(item, list) else [item]):
            _error_code_holders(child, out)
    return out


@pytest.mark.parametrize("name", sorted(n for n in BY_NAME if n.endswith("Response")))
@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_the_walk_sees_every_error_code_of_every_response(name, data):
    """The walk looks only at fields that can hold an error code (from the schema facts):
    an invalid-metadata code in any one place of any response must still be found."""
    from kproto.net.metadata import response_needs_metadata_update

    msg = BY_NAME[name]
    response = data.draw(message_strategy(name, max(versions_of(msg))))
    holders = _error_code_holders(response, [])
    for holder in holders:
        holder.error_code = 0
    assert not response_needs_metadata_update(response)
    for holder in holders:
        holder.error_code = 6  # NOT_LEADER_OR_FOLLOWER, here only
        assert response_needs_metadata_update(response), (name, type(holder).__name__)
        holder.error_code = 0
