"""BatchCrcCheck: one combined CRC-32C check over many small batches.

Every outcome is compared with the per-batch checks it stands in for (``RecordBatch.
is_valid``), over batches written by kproto's builder and by hand-flipped bits.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from kproto.errors import CorruptRecordError
from kproto.records import read_batches
from kproto.records.batch_crcs import SMALL_BATCH_BYTES, BatchCrcCheck
from kproto.records.builder import build_batch, build_message_set


def _batch(base_offset: int, records: int, value_size: int) -> bytes:
    return build_batch([(b"k%d" % i, bytes([i % 251]) * value_size) for i in range(records)],
                       base_offset=base_offset)


def _log(sizes: list[tuple[int, int]]) -> bytes:
    out, offset = [], 0
    for records, value_size in sizes:
        out.append(_batch(offset, records, value_size))
        offset += records
    return b"".join(out)


def _each_valid(data: bytes) -> list[tuple[int, bool]]:
    """(start, CRC holds) per whole batch, by the per-batch check."""
    result, pos = [], 0
    for batch in read_batches(data, check_crcs=False):
        result.append((pos, batch.is_valid()))
        pos += batch.size_in_bytes
    return result


def test_valid_batches_pass_together_and_are_named():
    logs = [_log([(3, 10), (1, 100), (20, 5)]), _log([(2, 1000)]), _log([(5, 50), (5, 50)])]
    check = BatchCrcCheck()
    starts = [check.add(data) for data in logs]
    assert check.ok()
    assert check.batches == 6
    for data, found in zip(logs, starts):
        assert found == frozenset(start for start, _ in _each_valid(data))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 300)), min_size=2, max_size=6),
       st.integers(0, 2 ** 32 - 1), st.integers(0, 7))
def test_one_flipped_bit_anywhere_in_a_covered_byte_fails_the_combined_check(sizes, where, bit):
    data = bytearray(_log(sizes))
    spans = _each_valid(bytes(data))
    # A byte the CRC covers (from the attributes on) or the stored CRC itself.
    covered = [i for start, _ in spans
               for i in range(start + 17, start + 12 + int.from_bytes(data[start + 8:start + 12], "big"))]
    index = covered[where % len(covered)]
    data[index] ^= 1 << bit
    assert [valid for _, valid in _each_valid(bytes(data))].count(False) == 1
    check = BatchCrcCheck()
    check.add(bytes(data))
    assert not check.ok()


def test_two_corrupt_batches_fail_too():
    data = bytearray(_log([(4, 20)] * 5))
    spans = _each_valid(bytes(data))
    rng = random.Random(7)
    for start, _ in (spans[1], spans[3]):
        data[start + 40 + rng.randrange(20)] ^= 0x10
    check = BatchCrcCheck()
    check.add(bytes(data))
    assert not check.ok()


def test_large_batches_legacy_entries_and_a_cut_tail_are_left_to_the_reader():
    big = _batch(0, 2, SMALL_BATCH_BYTES)  # over the combined size: checked alone
    small = _batch(2, 3, 10)
    legacy = build_message_set([(b"k", b"v")], magic=1, base_offset=5)
    after = _batch(6, 1, 10)
    data = big + small + legacy + after + small[:30]
    check = BatchCrcCheck()
    assert check.add(data) == frozenset({len(big)})  # the walk stops at the legacy entry
    assert check.ok()
    # A corrupt large batch does not fail the combined check: its own check still runs.
    corrupt_big = bytearray(big)
    corrupt_big[100] ^= 1
    check = BatchCrcCheck()
    assert check.add(bytes(corrupt_big) + small) == frozenset({len(big)})
    assert check.ok()
    assert [valid for _, valid in _each_valid(bytes(corrupt_big) + small)] == [False, True]


def test_reader_skips_only_the_verified_batches():
    good = _batch(0, 2, 10)
    bad = bytearray(_batch(2, 2, 10))
    bad[-1] ^= 1
    data = good + bytes(bad)
    # Marked verified, the bad batch passes (the caller vouched for it); unmarked, it fails.
    assert len(list(read_batches(data, verified=frozenset({0, len(good)})))) == 2
    batches = iter(read_batches(data, verified=frozenset({0})))
    next(batches)
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        next(batches)


def _stream_bytes(data: bytes) -> int:
    """Bytes a combined check feeds to the CRC for ``data``'s batches: per batch its
    coverage (the length less the nine header bytes before the attributes) plus the
    stored CRC (4)."""
    return sum(int.from_bytes(data[start + 8:start + 12], "big") - 9 + 4 for start, _ in _each_valid(data))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.sampled_from([0, 10, 300, 5000, 70000])), min_size=1, max_size=5),
       st.integers(64, 40000), st.one_of(st.none(), st.integers(0, 2 ** 32 - 1)))
def test_a_sliced_check_feeds_at_most_its_budget_per_step_and_agrees_with_the_batches(sizes, budget, flip):
    data = bytearray(_log(sizes))
    if flip is not None:
        spans = _each_valid(bytes(data))
        start = spans[flip % len(spans)][0]
        data[start + 21 + (flip >> 8) % (int.from_bytes(data[start + 8:start + 12], "big") - 9)] ^= 1
    data = bytes(data)
    check = BatchCrcCheck(max_batch_bytes=None)
    # Batches of every size are taken, and nothing is computed before step().
    assert check.add(data) == frozenset(start for start, _ in _each_valid(data))
    steps = 1
    while check.step(budget):
        steps += 1
    # Each step fed exactly the budget but the last: no step did more.
    total = _stream_bytes(data)
    assert steps == max(1, -(-total // budget))
    assert check.ok() == all(valid for _, valid in _each_valid(data))


def test_a_sliced_check_finished_by_ok_and_one_large_corrupt_batch():
    data = _log([(3, 10), (2, 200_000), (4, 10)])
    check = BatchCrcCheck(max_batch_bytes=None)
    check.add(data)
    assert check.step(1000)  # part of the stream fed; ok() feeds the rest
    assert check.ok()
    bad = bytearray(data)
    bad[len(data) // 2] ^= 0x40  # inside the large batch
    check = BatchCrcCheck(max_batch_bytes=None)
    check.add(bytes(bad))
    while check.step(64 * 1024):
        pass
    assert not check.ok()
