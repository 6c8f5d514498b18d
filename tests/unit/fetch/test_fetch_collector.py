"""FetchCollector and FetchBuffer: max_poll_records, position rules, stale data, errors."""

from __future__ import annotations

import threading

import pytest

from kproto import errors
from kproto.consumer.fetch.completed_fetch import CompletedFetch
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_collector import FetchCollector
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.fetch.fetch_metrics_manager import FetchMetricsManager
from kproto.consumer.subscription_state import SubscriptionState
from kproto.messages import FetchResponse
from kproto.metrics import Metrics, by_group
from kproto.records import build_batch, build_control_batch
from kproto.structs import IsolationLevel, OffsetAndMetadata, TopicPartition
from tests.threads import TestThread

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def batch(base, n):
    return build_batch([(None, b"v%d" % (base + i)) for i in range(n)], base_offset=base)


def cf(tp, fetch_offset, records=b"", error_code=0, hw=100, lso=-1, log_start=-1, replica=-1):
    part = FetchResponse.PartitionData(partition_index=tp.partition, error_code=error_code, high_watermark=hw,
                                       last_stable_offset=lso, log_start_offset=log_start,
                                       preferred_read_replica=replica, records=records)
    return CompletedFetch(tp, part, fetch_offset)


class Refresh:
    def __init__(self):
        self.count = 0

    def __call__(self):
        self.count += 1


def setup(policy="earliest", max_poll_records=500, positions=None):
    subs = SubscriptionState(policy)
    subs.assign_from_user([T0, T1])
    for tp, offset in (positions or {T0: 0, T1: 0}).items():
        subs.seek(tp, offset)
    refresh = Refresh()
    collector = FetchCollector(subs, FetchConfig(max_poll_records=max_poll_records, fetch_size=1000),
                               request_metadata_update=refresh, time_ms=lambda: 1000)
    return subs, FetchBuffer(), collector, refresh


def offsets(fetch, tp):
    return [r.offset for r in fetch.records.get(tp, [])]


def test_max_poll_records_across_partitions_and_positions():
    subs, buf, collector, _ = setup(max_poll_records=4)
    buf.add_all([cf(T0, 0, batch(0, 3)), cf(T1, 0, batch(0, 3))])
    first = collector.collect_fetch(buf)
    assert first.num_records == 4
    assert offsets(first, T0) == [0, 1, 2] and offsets(first, T1) == [0]
    assert subs.position(T0).offset == 3 and subs.position(T1).offset == 1
    second = collector.collect_fetch(buf)
    assert offsets(second, T1) == [1, 2] and subs.position(T1).offset == 3
    assert collector.collect_fetch(buf).is_empty()
    assert buf.buffered_partitions() == set()
    # max_records overrides max_poll_records for one call.
    buf.add(cf(T0, 3, batch(3, 5)))
    assert collector.collect_fetch(buf, max_records=2).num_records == 2


def test_watermarks_updated_on_initialize():
    subs, buf, collector, _ = setup()
    buf.add(cf(T0, 0, batch(0, 1), hw=10, lso=8, log_start=2, replica=3))
    collector.collect_fetch(buf)
    assert subs.high_watermark(T0) == 10 and subs.last_stable_offset(T0) == 8 and subs.log_start_offset(T0) == 2
    assert subs.preferred_read_replica(T0, 1000) == 3


def test_stale_fetch_after_seek_is_dropped_position_unchanged():
    subs, buf, collector, _ = setup()
    buf.add(cf(T0, 0, batch(0, 3)))
    subs.seek(T0, 50)
    fetch = collector.collect_fetch(buf)
    assert fetch.is_empty() and subs.position(T0).offset == 50
    assert buf.buffered_partitions() == set()


def test_seek_between_collections_drops_rest_of_fetch():
    subs, buf, collector, _ = setup(max_poll_records=2)
    buf.add(cf(T0, 0, batch(0, 5)))
    assert offsets(collector.collect_fetch(buf), T0) == [0, 1]
    subs.seek(T0, 0)
    assert collector.collect_fetch(buf).is_empty()
    assert subs.position(T0).offset == 0 and buf.buffered_partitions() == set()


def test_revoked_or_unassigned_partition_data_dropped():
    subs, buf, collector, _ = setup()
    buf.add_all([cf(T0, 0, batch(0, 2)), cf(T1, 0, batch(0, 2))])
    subs.mark_pending_revocation([T1])
    fetch = collector.collect_fetch(buf)
    assert offsets(fetch, T0) == [0, 1] and T1 not in fetch.records
    subs.assign_from_user([T1])
    buf.add(cf(T0, 2, batch(2, 2)))
    assert collector.collect_fetch(buf).is_empty()


def test_paused_partition_data_kept_for_later():
    subs, buf, collector, _ = setup(max_poll_records=1)
    buf.add(cf(T0, 0, batch(0, 3)))
    assert offsets(collector.collect_fetch(buf), T0) == [0]
    subs.pause(T0)
    assert collector.collect_fetch(buf).is_empty()
    assert buf.buffered_partitions() == {T0}
    subs.resume(T0)
    assert offsets(collector.collect_fetch(buf), T0) == [1]


def test_empty_answer_takes_its_offsets_only_at_the_position():
    subs, buf, collector, _ = setup(positions={T0: 5, T1: 5})
    # T0's answer is for its position; T1's for an older one (a seek since): stale.
    buf.add_all([cf(T0, 5, hw=10, lso=8, log_start=2), cf(T1, 3, hw=30, lso=30, log_start=1)])
    fetch = collector.collect_fetch(buf)
    assert fetch.is_empty() and fetch.next_offsets == {T0: OffsetAndMetadata(5, "", -1)}
    assert (subs.high_watermark(T0), subs.last_stable_offset(T0), subs.log_start_offset(T0)) == (10, 8, 2)
    assert (subs.high_watermark(T1), subs.last_stable_offset(T1), subs.log_start_offset(T1)) == (None, None, None)
    assert subs.position(T0).offset == 5 and subs.position(T1).offset == 5
    assert buf.buffered_partitions() == set()
    # A partition awaiting a reset since the fetch was sent: its answer is ignored.
    subs.request_offset_reset(T0)
    buf.add(cf(T0, 5, hw=99))
    assert collector.collect_fetch(buf).next_offsets == {} and subs.high_watermark(T0) == 10
    assert buf.buffered_partitions() == set()


def test_empty_answer_of_a_paused_or_revoked_partition():
    subs, buf, collector, _ = setup()
    subs.pause(T0)
    subs.mark_pending_revocation([T1])
    buf.add_all([cf(T0, 0, hw=10), cf(T1, 0, hw=20)])
    assert collector.collect_fetch(buf).next_offsets == {}
    # Both still had their positions, so both answers' offsets are taken; the paused
    # partition's answer waits for resume, the revoked one's is dropped.
    assert subs.high_watermark(T0) == 10 and subs.high_watermark(T1) == 20
    assert buf.buffered_partitions() == {T0}
    subs.resume(T0)
    assert collector.collect_fetch(buf).next_offsets == {T0: OffsetAndMetadata(0, "", -1)}
    assert buf.buffered_partitions() == set()


def test_empty_answers_record_lag_lead_and_count_in_the_response_totals():
    subs, buf, _, _ = setup(positions={T0: 0, T1: 4})
    metrics = Metrics()
    manager = FetchMetricsManager(metrics, subs)
    collector = FetchCollector(subs, FetchConfig(), time_ms=lambda: 1000, metrics_manager=manager)
    data = batch(0, 3)
    fetches = [cf(T0, 0, data, hw=10, log_start=0), cf(T1, 4, hw=7, log_start=1)]
    aggregator = manager.new_aggregator([T0, T1])
    for completed in fetches:
        completed.metric_aggregator = aggregator
    buf.add_all(fetches)
    assert offsets(collector.collect_fetch(buf), T0) == [0, 1, 2]
    tagged = {(m.name, m.tags["partition"]): v.value() for m, v in metrics.metrics.items() if "partition" in m.tags}
    assert (tagged[("records-lag", "0")], tagged[("records-lead", "0")]) == (7, 3)
    assert (tagged[("records-lag", "1")], tagged[("records-lead", "1")]) == (3, 3)
    values = by_group(metrics)["consumer-fetch-manager-metrics"]
    assert (values["records-consumed-total"], values["bytes-consumed-total"]) == (3, len(data))
    assert (values["records-lag-max"], values["records-lead-min"]) == (7, 3)


def test_control_only_fetch_advances_position_without_records():
    subs, buf, collector, _ = setup()
    marker = build_control_batch(base_offset=0, producer_id=1, producer_epoch=0, commit=True)
    buf.add(cf(T0, 0, marker))
    fetch = collector.collect_fetch(buf)
    assert fetch.num_records == 0 and fetch.position_advanced
    assert subs.position(T0).offset == 1


def test_offset_out_of_range_resets_per_policy():
    subs, buf, collector, _ = setup("earliest")
    buf.add(cf(T0, 0, error_code=1))
    assert collector.collect_fetch(buf).is_empty()
    assert subs.is_offset_reset_needed(T0)


def test_offset_out_of_range_without_policy_raises_once():
    subs, buf, collector, _ = setup("none")
    buf.add(cf(T0, 0, error_code=1))
    with pytest.raises(errors.OffsetOutOfRangeError) as info:
        collector.collect_fetch(buf)
    assert info.value.offset_out_of_range_partitions == {T0: 0}
    assert collector.collect_fetch(buf).is_empty()  # the errored fetch was removed


def test_stale_offset_out_of_range_ignored():
    subs, buf, collector, _ = setup("none")
    buf.add(cf(T0, 0, error_code=1))
    subs.seek(T0, 7)
    assert collector.collect_fetch(buf).is_empty()
    assert subs.position(T0).offset == 7


@pytest.mark.parametrize("code", [6, 3, 74, 100, 9])
def test_leadership_and_unknown_topic_errors_refresh_metadata(code):
    subs, buf, collector, refresh = setup()
    subs.update_preferred_read_replica(T0, 2, 10**9)
    buf.add(cf(T0, 0, error_code=code))
    assert collector.collect_fetch(buf).is_empty()
    assert refresh.count == 1 and subs.preferred_read_replica(T0, 1000) is None
    assert subs.position(T0).offset == 0


def test_errors_after_records_are_deferred():
    subs, buf, collector, _ = setup("none")
    buf.add_all([cf(T0, 0, batch(0, 2)), cf(T1, 0, error_code=29)])
    fetch = collector.collect_fetch(buf)
    assert offsets(fetch, T0) == [0, 1]
    with pytest.raises(errors.TopicAuthorizationFailedError, match="topic t"):
        collector.collect_fetch(buf)


def test_record_too_large_tells_user_what_to_raise():
    subs, buf, collector, _ = setup()
    buf.add(cf(T0, 0, batch(0, 50)[:200]))
    with pytest.raises(errors.RecordTooLargeError, match="max_partition_fetch_bytes") as info:
        collector.collect_fetch(buf)
    assert "t-0=0" in str(info.value)
    # Seeking elsewhere makes the buffered data stale instead of failing forever.
    subs.seek(T0, 100)
    assert collector.collect_fetch(buf).is_empty()


def test_unexpected_error_code_is_clear():
    subs, buf, collector, _ = setup()
    buf.add(cf(T0, 0, error_code=87))
    with pytest.raises(errors.IllegalStateError, match="Unexpected error code 87"):
        collector.collect_fetch(buf)


def test_buffer_one_fetch_per_partition():
    buf = FetchBuffer()
    buf.add(cf(T0, 0, batch(0, 1)))
    with pytest.raises(errors.IllegalStateError, match="already buffered"):
        buf.add(cf(T0, 1, batch(1, 1)))
    buf.retain_all({T1})
    assert buf.buffered_partitions() == set()
    buf.add(cf(T0, 1, batch(1, 1)))
    # An answer without records, queued apart, is one of them too.
    buf.add(cf(T1, 0))
    with pytest.raises(errors.IllegalStateError, match="already buffered"):
        buf.add(cf(T1, 0))
    buf.retain_all({T0})
    assert buf.buffered_partitions() == {T0}


def test_buffer_wakes_waiter_on_data_and_on_wakeup():
    buf = FetchBuffer()
    assert buf.await_not_empty(0) is False
    results = []
    started = threading.Event()

    def waiter():
        started.set()
        results.append(buf.await_not_empty(None))

    thread = TestThread(target=waiter)
    thread.start()
    started.wait()
    buf.add(cf(T0, 0, batch(0, 1)))
    thread.join()
    assert results == [True]
    buf.poll()
    thread = TestThread(target=waiter)
    thread.start()
    started.wait()
    buf.wakeup()
    thread.join()
    assert results == [True, True]


def test_paused_data_does_not_wake_a_waiter():
    subs, buf, collector, _ = setup()
    buf.add(cf(T0, 0, batch(0, 2)))
    assert buf.await_not_empty(0) is True  # the add woke it
    subs.pause(T0)
    assert collector.collect_fetch(buf).is_empty()
    assert buf.await_not_empty(0) is False  # only paused data: nothing new to wake for
    buf.add(cf(T1, 0, batch(0, 1)))
    assert buf.await_not_empty(0) is True


def test_background_thread_feeds_while_application_collects():
    # The KIP-848 shape: one thread adds fetches (one per partition at a time), the other
    # waits and collects; every record arrives once, in order, and positions end right.
    subs, buf, collector, _ = setup(max_poll_records=3)
    chunks = {tp: [cf(tp, base, batch(base, 5)) for base in range(0, 50, 5)] for tp in (T0, T1)}
    got = {T0: [], T1: []}
    done = threading.Event()

    def feeder():
        pending = {tp: list(items) for tp, items in chunks.items()}
        while any(pending.values()):
            buffered = buf.buffered_partitions()
            ready = [tp for tp in pending if pending[tp] and tp not in buffered
                     and subs.position(tp).offset == pending[tp][0].next_fetch_offset]
            buf.add_all([pending[tp].pop(0) for tp in ready])
            if not ready:
                done.wait(0.001)
        done.set()

    thread = TestThread(target=feeder)
    thread.start()
    while not (done.is_set() and not buf.buffered_partitions()):
        buf.await_not_empty(0.05)
        for tp, records in collector.collect_fetch(buf).records.items():
            got[tp].extend(r.offset for r in records)
    thread.join()
    assert got == {T0: list(range(50)), T1: list(range(50))}
    assert subs.position(T0).offset == 50 and subs.position(T1).offset == 50


def test_update_positions_false_leaves_positions_to_the_caller():
    subs, buf, collector, _ = setup(max_poll_records=2)
    buf.add_all([cf(T0, 0, batch(0, 3)), cf(T1, 0, batch(0, 1))])
    first = collector.collect_fetch(buf, update_positions=False)
    assert offsets(first, T0) == [0, 1] and subs.position(T0).offset == 0 and subs.position(T1).offset == 0
    # The caller moves the position past what it handled (kafka-python's iterator does):
    # the buffered fetch goes on from there with no new request.
    subs.seek(T0, 2)
    second = collector.collect_fetch(buf, max_records=5, update_positions=False)
    assert offsets(second, T0) == [2] and offsets(second, T1) == [0]
    assert subs.position(T0).offset == 2 and subs.position(T1).offset == 0
    assert buf.buffered_partitions() == set()
    # A position left where it was: a partly read fetch is stale on the next poll and
    # dropped, and a fetch from the unchanged position returns the same records again.
    buf.add(cf(T1, 0, batch(0, 3)))
    assert offsets(collector.collect_fetch(buf, max_records=1, update_positions=False), T1) == [0]
    assert collector.collect_fetch(buf).is_empty() and buf.buffered_partitions() == set()
    buf.add(cf(T1, 0, batch(0, 3)))
    assert offsets(collector.collect_fetch(buf), T1) == [0, 1] and subs.position(T1).offset == 2


def test_answers_without_records_are_taken_before_data_queued_ahead_of_them():
    # T0's data is queued first and outlasts the poll; T1's empty answer (end 40) behind it
    # is taken in that same poll, so T1 stops counting as buffered and its end is known.
    subs, buf, collector, _ = setup(max_poll_records=2)
    buf.add_all([cf(T0, 0, batch(0, 5))])
    buf.add_all([cf(T1, 0, hw=40)])
    fetch = collector.collect_fetch(buf)
    assert offsets(fetch, T0) == [0, 1] and fetch.next_offsets[T1].offset == 0
    assert buf.buffered_partitions() == {T0}
    assert subs.partition_lag(T1, IsolationLevel.READ_UNCOMMITTED) == 40
    assert offsets(collector.collect_fetch(buf), T0) == [2, 3]
