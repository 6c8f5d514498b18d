"""Java-parity review, sans-IO: FetchCollector.initialize and AbstractFetch's node choice.

Cases the mock-cluster tests (tests/integration/fetch/test_replica_and_node_choice.py) cannot stage exactly: a
partition reset or awaiting validation while its fetch was in flight, the fetch order
after a partition error, and the replica checks against real ClusterMetadata.
"""

from __future__ import annotations


import pytest

from kproto.consumer.fetch.completed_fetch import CompletedFetch
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_collector import FetchCollector
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.subscription_state import FetchPosition, FetchState, LeaderAndEpoch, SubscriptionState
from kproto.messages import FetchResponse
from kproto.records import build_batch
from tests.support.replica_fixtures import T0, T1, cluster, fetch_for

OFFSET_OUT_OF_RANGE = 1
TOPIC_AUTHORIZATION_FAILED = 29
NOT_LEADER_OR_FOLLOWER = 6


def completed(tp, fetch_offset, error_code=0, records=b""):
    part = FetchResponse.PartitionData(partition_index=tp.partition, error_code=error_code, high_watermark=100,
                                       records=records)
    return CompletedFetch(tp, part, fetch_offset)


def collector_for(policy="none"):
    subs = SubscriptionState(policy)
    subs.assign_from_user([T0, T1])
    subs.seek(T0, 5)
    subs.seek(T1, 5)
    return subs, FetchBuffer(), FetchCollector(subs, FetchConfig())


@pytest.mark.parametrize("error_code", [OFFSET_OUT_OF_RANGE, TOPIC_AUTHORIZATION_FAILED])
def test_error_for_a_partition_reset_meanwhile_is_ignored(error_code):
    subs, buf, collector = collector_for("none")
    subs.request_offset_reset(T0, "earliest")  # seek_to_beginning while the fetch was out
    buf.add(completed(T0, 5, error_code))
    assert collector.collect_fetch(buf).is_empty()
    assert subs.is_offset_reset_needed(T0)
    assert buf.buffered_partitions() == set()


def test_out_of_range_for_a_position_awaiting_validation_is_ignored():
    subs, buf, collector = collector_for("earliest")
    # Validation started (leader change) at the same offset the fetch asked for.
    subs.seek_unvalidated(T0, FetchPosition(5, 3, LeaderAndEpoch(1, 4)))
    assert subs.fetch_state(T0) is FetchState.AWAIT_VALIDATION
    buf.add(completed(T0, 5, OFFSET_OUT_OF_RANGE))
    collector.collect_fetch(buf)
    # Java ignores it: the validation decides; a reset here would lose the position.
    assert subs.fetch_state(T0) is FetchState.AWAIT_VALIDATION
    assert subs.position(T0).offset == 5


def test_a_failed_partition_goes_to_the_end_of_the_fetch_order():
    subs, buf, collector = collector_for("earliest")
    assert subs.fetchable_partitions() == [T0, T1]
    buf.add(completed(T0, 5, NOT_LEADER_OR_FOLLOWER))
    collector.collect_fetch(buf)
    assert subs.fetchable_partitions() == [T1, T0]


def test_valid_fetch_still_returns_records():
    subs, buf, collector = collector_for("earliest")
    buf.add(completed(T0, 5, records=build_batch([(None, b"a"), (None, b"b")], base_offset=5)))
    fetch = collector.collect_fetch(buf)
    assert [r.offset for r in fetch.records[T0]] == [5, 6]
    assert subs.position(T0).offset == 7


# --- AbstractFetch: which node a partition is fetched from -----------------------------


@pytest.mark.parametrize("brokers, offline", [((1, 3), ()), ((1, 2, 3), (2,))])
def test_preferred_replica_not_online_in_metadata_is_dropped(brokers, offline):
    md = cluster(brokers, offline)
    fetch, subs = fetch_for(md)
    subs.update_preferred_read_replica(T0, 2, 10**12)
    md._need_update = False
    requests = fetch.prepare_fetch_requests()
    assert set(requests) == {1} and set(requests[1].to_send) == {T0, T1}
    assert subs.preferred_read_replica(T0, 0) is None
    assert md.need_update()


def test_online_preferred_replica_is_used_until_its_lease_ends():
    md = cluster()
    fetch, subs = fetch_for(md)
    subs.update_preferred_read_replica(T0, 2, 1000)
    requests = fetch.prepare_fetch_requests(now_ms=1000)
    assert set(requests[2].to_send) == {T0} and set(requests[1].to_send) == {T1}
    fetch2, subs2 = fetch_for(md)
    subs2.update_preferred_read_replica(T0, 2, 1000)
    assert set(fetch2.prepare_fetch_requests(now_ms=1001)) == {1}


def test_paused_buffered_partition_does_not_block_its_node():
    md = cluster()
    fetch, subs = fetch_for(md)
    fetch.fetch_buffer.add(completed(T0, 5, records=build_batch([(None, b"a")], base_offset=5)))
    assert fetch.prepare_fetch_requests() == {}  # T0's data is waiting: node 1 is skipped
    subs.pause(T0)
    requests = fetch.prepare_fetch_requests()
    assert set(requests) == {1} and set(requests[1].to_send) == {T1}
