"""KIP-951 and disconnect-driven refreshes, sans-IO: ClusterMetadata.update_partition_leadership,
AbstractFetch applying a Fetch answer's current leader, and MetadataUpdater.handle_server_disconnect.

The rules are Java's (Metadata.updatePartitionLeadership, AbstractFetch.handleFetchSuccess,
DefaultMetadataUpdater.handleServerDisconnect); the broker tests are in tests/integration/metadata/test_leader_discovery.py.
"""

from __future__ import annotations

import uuid

import pytest

from kproto.consumer.fetch.abstract_fetch import AbstractFetch
from kproto.consumer.subscription_state import FetchState, LeaderAndEpoch
from kproto.messages import FetchResponse
from kproto.clock import monotonic_ms
from kproto.net.client import NetworkClient
from kproto.structs import BrokerMetadata, TopicPartition
from tests.support.replica_fixtures import cluster, fetch_for
from tests.unit.net.metadata_responses import fresh, response

TP = T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
TOPIC_ID = uuid.UUID(int=7)  # the topic id of test_fetchreview_collector.cluster()
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, OFFSET_OUT_OF_RANGE = 6, 74, 1


def known(leader: int = 1, epoch: int = 5):
    md = fresh()
    md.set_topics(["t"])
    md.update(response({0: (leader, epoch), 1: (2, 3)}), now_ms=0)
    return md


# --- ClusterMetadata.update_partition_leadership ------------------------------------------

def test_newer_leader_is_applied_and_the_rest_of_the_partition_kept():
    md = known()
    assert md.update_partition_leadership({TP: (2, 6)}) == {TP}
    meta = md.partition_metadata(TP)
    assert (meta.leader, meta.leader_epoch) == (2, 6)
    assert meta.replicas == [1, 2] and meta.isr == [1, 2]
    assert md.partitions_for_broker(2) == {TP, TopicPartition("t", 1)}
    assert md.leader_for_partition(TopicPartition("t", 1)) == 2  # untouched


@pytest.mark.parametrize("epoch", [5, 4])
def test_leader_with_an_epoch_not_newer_is_ignored(epoch):
    md = known(epoch=5)
    assert md.update_partition_leadership({TP: (2, epoch)}, [BrokerMetadata(2, "elsewhere", 1, None)]) == set()
    assert (md.leader_for_partition(TP), md.leader_epoch_for_partition(TP)) == (1, 5)
    # Nothing applied: the endpoints are not merged either (Java returns before that).
    assert md.broker_metadata(2) == BrokerMetadata(2, "h2", 9093, None)


def test_leader_on_an_unknown_node_needs_its_endpoint():
    md = known()
    assert md.update_partition_leadership({TP: (3, 6)}) == set()
    assert md.leader_for_partition(TP) == 1 and md.broker_metadata(3) is None
    endpoint = BrokerMetadata(3, "h3", 9094, "r3")
    assert md.update_partition_leadership({TP: (3, 6)}, [endpoint]) == {TP}
    assert md.leader_for_partition(TP) == 3
    assert md.broker_metadata(3) == endpoint and endpoint in md.brokers()


def test_endpoint_replaces_the_known_address_of_its_node():
    md = known()
    moved = BrokerMetadata(2, "h2-new", 19093, None)
    assert md.update_partition_leadership({TP: (2, 6)}, [moved]) == {TP}
    assert md.broker_metadata(2) == moved
    assert md.broker_metadata(1) == BrokerMetadata(1, "h1", 9092, "r1")


@pytest.mark.parametrize("tp", [TopicPartition("t", 9), TopicPartition("other", 0)])
def test_partition_not_in_the_metadata_is_ignored(tp):
    md = known()
    assert md.update_partition_leadership({tp: (2, 6)}, [BrokerMetadata(3, "h3", 9094, None)]) == set()
    assert md.partition_metadata(tp) is None and md.broker_metadata(3) is None


@pytest.mark.parametrize("leader", [(-1, 6), (2, -1)])
def test_incomplete_leader_is_ignored(leader):
    md = known()
    assert md.update_partition_leadership({TP: leader}) == set()
    assert md.leader_for_partition(TP) == 1


def test_only_the_partitions_that_qualify_are_returned():
    md = known()
    t1 = TopicPartition("t", 1)
    assert md.update_partition_leadership({TP: (2, 6), t1: (1, 3)}) == {TP}  # t-1's epoch is not newer
    assert md.leader_for_partition(t1) == 2


def test_a_later_metadata_answer_with_the_older_epoch_does_not_undo_it():
    md = known()
    md.update_partition_leadership({TP: (2, 6)})
    md.update(response({0: (1, 5), 1: (2, 3)}), now_ms=1000)  # a lagging broker answered
    assert (md.leader_for_partition(TP), md.leader_epoch_for_partition(TP)) == (2, 6)
    assert md.need_update()  # and it asks again, as for any older epoch
    md.update(response({0: (2, 7), 1: (2, 3)}), now_ms=2000)
    assert (md.leader_for_partition(TP), md.leader_epoch_for_partition(TP)) == (2, 7)


# --- AbstractFetch.handle_fetch_success -----------------------------------------------------

def fetch_answer(version: int, error_code: int, leader=(-1, -1), endpoints=()):
    """A FetchResponse for t-0 and t-1 (t-1 answered without error), through the wire."""
    def part(p, code, current):
        return FetchResponse.PartitionData(
            partition_index=p, error_code=code, high_watermark=10,
            current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=current[0], leader_epoch=current[1]))
    msg = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", topic_id=TOPIC_ID, partitions=[part(0, error_code, leader), part(1, 0, (-1, -1))])],
        node_endpoints=[FetchResponse.NodeEndpoint(node_id=n, host=h, port=p) for n, h, p in endpoints])
    return FetchResponse.decode(msg.encode(version), version)


def sent_fetch(md) -> tuple[AbstractFetch, object, object]:
    fetch, subs = fetch_for(md)
    requests = fetch.prepare_fetch_requests()
    assert set(requests) == {1}
    fetch.mark_pending(1)
    return fetch, subs, requests[1]


@pytest.mark.parametrize("error_code", [NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH])
def test_fetch_answer_naming_the_new_leader_moves_the_position_there(error_code):
    md = cluster(brokers=(1, 2))  # t-0, t-1 led by 1 at epoch 4
    fetch, subs, data = sent_fetch(md)
    md._need_update = False
    answer = fetch_answer(12, error_code, leader=(3, 5))
    # v12 carries no endpoints: broker 3 is unknown, so nothing moves (refresh only).
    fetch.handle_fetch_success(1, data, answer, 12)
    assert md.leader_for_partition(T0) == 1 and md.need_update()
    assert subs.position(T0).current_leader == LeaderAndEpoch(1, 4)
    fetch.fetch_buffer.retain_all(set())
    fetch, subs, data = sent_fetch(md)
    answer = fetch_answer(16, error_code, leader=(3, 5), endpoints=[(3, "127.0.0.1", 9003)])
    fetch.handle_fetch_success(1, data, answer, 16)
    assert (md.leader_for_partition(T0), md.leader_epoch_for_partition(T0)) == (3, 5)
    assert md.broker_metadata(3) == BrokerMetadata(3, "127.0.0.1", 9003, None)
    assert md.need_update()  # the full refresh is still asked for
    # The position follows the new leader and is validated there (OffsetForLeaderEpoch).
    assert subs.position(T0).current_leader == LeaderAndEpoch(3, 5)
    assert subs.fetch_state(T0) is FetchState.AWAIT_VALIDATION
    assert subs.position(T1).current_leader == LeaderAndEpoch(1, 4)  # answered without error
    subs.complete_validation(T0)
    fetch.fetch_buffer.retain_all(set())
    assert set(fetch.prepare_fetch_requests()) == {1, 3}  # t-0 now goes to node 3


def test_current_leader_of_other_errors_is_not_used():
    md = cluster(brokers=(1, 2))
    fetch, subs, data = sent_fetch(md)
    fetch.handle_fetch_success(1, data, fetch_answer(16, OFFSET_OUT_OF_RANGE, leader=(2, 5)), 16)
    assert md.leader_for_partition(T0) == 1
    assert subs.position(T0).current_leader == LeaderAndEpoch(1, 4)


def test_new_leader_of_a_partition_unassigned_meanwhile_updates_only_the_metadata():
    md = cluster(brokers=(1, 2))
    fetch, subs, data = sent_fetch(md)
    subs.assign_from_user([T1])  # T0 unassigned while the fetch was in flight
    fetch.handle_fetch_success(1, data, fetch_answer(16, NOT_LEADER_OR_FOLLOWER, leader=(2, 5)), 16)
    assert md.leader_for_partition(T0) == 2
    assert not subs.is_assigned(T0)



# --- MetadataUpdater.handle_server_disconnect ----------------------------------------------

@pytest.fixture
def idle_client():
    # Never polled: no socket is opened; the updater's rules are checked on its own.
    client = NetworkClient(bootstrap_servers="127.0.0.1:9", retry_backoff_ms=200)
    yield client
    client.close()


def test_disconnect_asks_for_a_refresh_nobody_waits_on(idle_client):
    md, updater = idle_client.cluster, idle_client._metadata_updater
    now = monotonic_ms()
    md.update(response({0: (1, 5)}), now_ms=now)
    assert not md.need_update() and md.ttl(now + 1000) > 0
    version = md.request_version
    updater.handle_server_disconnect(1, now + 1000)
    assert md.need_update() and md.request_version == version + 1
    assert md.ttl(now + 1000) == 0  # not due before it: no backoff added
    assert md._waiters == []


def test_the_connection_a_due_refresh_waited_for_failing_counts_as_a_failed_attempt(idle_client):
    md, updater = idle_client.cluster, idle_client._metadata_updater
    now = monotonic_ms()
    md.update(response({0: (1, 5)}), now_ms=now)
    waiter = md.request_update()
    assert md.ttl(now + 1000) == 0
    # Another node's disconnect while the refresh is due adds no backoff ...
    updater.connecting = 1  # maybe_update is opening node 1 to send the refresh on
    updater.handle_server_disconnect(3, now + 1000)
    assert md.ttl(now + 1000) == 0
    # ... the connection the refresh waited for failing does.
    updater.handle_server_disconnect(1, now + 1000)
    # The next Metadata request waits out retry_backoff_ms (+-20% jitter, KIP-580); the
    # waiter is not failed.
    assert 160 <= md.ttl(now + 1000) <= 240 and md.ttl(now + 1240) == 0
    assert not waiter.is_done
    # Another disconnect during the backoff does not push it further (not due then).
    updater.handle_server_disconnect(2, now + 1100)
    assert md.ttl(now + 1240) == 0


def test_disconnect_with_a_metadata_request_in_flight_adds_no_backoff(idle_client):
    md, updater = idle_client.cluster, idle_client._metadata_updater
    now = monotonic_ms()
    md.update(response({0: (1, 5)}), now_ms=now)
    md.request_update()
    updater.in_flight = 2
    updater.handle_server_disconnect(1, now + 1000)
    assert md.ttl(now + 1000) == 0
