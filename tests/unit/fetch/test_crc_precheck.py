"""CrcPrecheck: buffered fetches' CRCs checked ahead of collection, a slice per step."""

from __future__ import annotations

import pytest

from kproto import errors
from kproto.consumer.fetch.completed_fetch import CompletedFetch, CrcPrecheck
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_collector import FetchCollector
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.subscription_state import SubscriptionState
from kproto.messages import FetchResponse
from kproto.records import build_batch
from kproto.structs import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def batch(base: int, n: int, size: int = 10) -> bytes:
    return build_batch([(None, bytes([65 + i % 26]) * size) for i in range(n)], base_offset=base)


def cf(tp: TopicPartition, records: bytes, check_crcs: bool = True) -> CompletedFetch:
    part = FetchResponse.PartitionData(partition_index=tp.partition, high_watermark=100, records=records)
    return CompletedFetch(tp, part, 0, check_crcs=check_crcs)


def run(precheck: CrcPrecheck) -> int:
    steps = 0
    while precheck.step():
        steps += 1
    return steps


def test_every_batch_of_every_fetch_is_verified_in_slices():
    big = batch(0, 20, 1000) + batch(20, 5)
    small = batch(0, 3) + batch(3, 4)
    fetches = [cf(T0, big), cf(T1, small)]
    precheck = CrcPrecheck(slice_bytes=4096)
    precheck.add(fetches)
    assert precheck.pending
    # ~20 KB of batches in 4 KiB slices: several steps, each a full slice but the last
    # (a batch feeds the CRC its bytes less the 17 before its CRC's coverage, plus its CRC).
    assert run(precheck) == -(-(len(big) + len(small) - 4 * 17) // 4096) - 1
    assert not precheck.pending
    assert fetches[0].crc_verified == frozenset({0, len(batch(0, 20, 1000))})
    assert fetches[1].crc_verified == frozenset({0, len(batch(0, 3))})


def test_a_corrupt_batch_verifies_nothing_and_collection_names_it():
    good, bad = batch(0, 3), bytearray(batch(3, 3, 5000))
    bad[200] ^= 1
    fetch = cf(T0, good + bytes(bad))
    other = cf(T1, batch(0, 2))
    precheck = CrcPrecheck(slice_bytes=1024)
    precheck.add([fetch, other])
    run(precheck)
    assert fetch.crc_verified == frozenset() and other.crc_verified == frozenset()
    subs = SubscriptionState("earliest")
    subs.assign_from_user([T0])
    subs.seek(T0, 0)
    buffer = FetchBuffer()
    buffer.add(fetch)
    collector = FetchCollector(subs, FetchConfig(max_poll_records=100, fetch_size=1 << 20))
    # The records before the corrupt batch come first; then the per-batch check names it.
    assert [r.offset for r in collector.collect_fetch(buffer).records[T0]] == [0, 1, 2]
    with pytest.raises(errors.CorruptRecordError) as info:
        collector.collect_fetch(buffer)
    assert info.value.offset == 3


def test_fetches_without_crc_checks_consumed_or_empty_are_left_alone():
    unchecked, consumed, empty = cf(T0, batch(0, 2), check_crcs=False), cf(T1, batch(0, 2)), cf(T1, b"")
    consumed.drain()
    precheck = CrcPrecheck()
    precheck.add([unchecked, consumed, empty])
    assert precheck.pending
    assert run(precheck) == 0
    assert not precheck.pending
    assert unchecked.crc_verified == consumed.crc_verified == empty.crc_verified == frozenset()


def test_fetches_added_while_checking_are_checked_before_it_is_done():
    precheck = CrcPrecheck(slice_bytes=512)
    first, later = cf(T0, batch(0, 4, 400)), cf(T1, batch(0, 4, 400))
    precheck.add([first])
    assert precheck.step()
    precheck.add([later])
    run(precheck)
    assert first.crc_verified == later.crc_verified == frozenset({0})
