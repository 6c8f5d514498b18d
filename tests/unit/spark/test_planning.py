"""kproto.spark.planning: range splitting, offsets JSON and the per-trigger rate limit."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.errors import IllegalArgumentError
from kproto.spark.planning import OffsetRange, from_offset_json, rate_limit, split_ranges, to_offset_json
from kproto.structs import TopicPartition

TP0, TP1, TP2 = (TopicPartition("t", p) for p in range(3))


def covered(pieces):
    """{(topic, partition): sorted offsets} covered by ``pieces`` (each offset once)."""
    out: dict = {}
    for r in pieces:
        out.setdefault((r.topic, r.partition), []).extend(range(r.from_offset, r.until_offset))
    return {k: sorted(v) for k, v in out.items() if v}


def test_empty_ranges_dropped_and_one_task_per_range_by_default():
    ranges = [OffsetRange("t", 1, 5, 9), OffsetRange("t", 0, 3, 3), OffsetRange("t", 2, 0, 1)]
    assert split_ranges(ranges) == [OffsetRange("t", 1, 5, 9), OffsetRange("t", 2, 0, 1)]


def test_min_partitions_splits_large_ranges_in_proportion():
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 100, 200)]
    pieces = split_ranges(ranges, min_partitions=10)
    assert len(pieces) == 10
    assert [r for r in pieces if r.partition == 1] == [OffsetRange("t", 1, 100, 200)]
    assert {r.size for r in pieces if r.partition == 0} == {100}
    # Fewer offsets than tasks asked for: one task per offset at most.
    assert len(split_ranges([OffsetRange("t", 0, 0, 3)], min_partitions=8)) == 3
    # Already enough ranges: unchanged.
    assert split_ranges(ranges, min_partitions=2) == ranges


def test_max_records_per_partition_caps_every_task():
    pieces = split_ranges([OffsetRange("t", 0, 0, 25), OffsetRange("t", 1, 0, 4)], max_records_per_partition=10)
    assert [r.size for r in pieces] == [9, 8, 8, 4]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=6),
       st.one_of(st.none(), st.integers(1, 40)), st.one_of(st.none(), st.integers(1, 3000)))
def test_split_covers_every_offset_once(spans, min_parts, max_records):
    ranges = [OffsetRange("t", p, a, a + n) for p, (a, n) in enumerate(spans)]
    pieces = split_ranges(ranges, min_parts, max_records)
    assert covered(pieces) == covered(ranges)
    assert all(r.size > 0 for r in pieces)
    total = sum(n for _, n in spans)
    if min_parts is not None:
        assert len(pieces) >= min(min_parts, total)
    if max_records is not None:
        assert all(r.size <= max_records for r in pieces)


def test_offset_json_is_sparks_layout_and_survives_json():
    offsets = {TopicPartition("b", 10): 3, TopicPartition("a", 2): 0, TopicPartition("a", 1): 7}
    data = to_offset_json(offsets)
    assert json.dumps(data) == '{"a": {"1": 7, "2": 0}, "b": {"10": 3}}'
    assert from_offset_json(json.loads(json.dumps(data))) == offsets


@pytest.mark.parametrize("bad", [[1], {"t": [0]}, {"t": {"x": 1}}, {"t": {"0": -1}}, {"t": {"0": "5"}},
                                 {"t": {"0": True}}])
def test_bad_offset_json_is_refused(bad):
    with pytest.raises(IllegalArgumentError, match="kproto Spark source"):
        from_offset_json(bad)


def test_rate_limit_shares_the_limit_by_backlog_as_spark_does():
    start = {TP0: 0, TP1: 100, TP2: 50}
    latest = {TP0: 300, TP1: 200, TP2: 50}
    assert rate_limit(start, latest, None) == latest
    assert rate_limit(start, latest, 1000) == latest
    ends = rate_limit(start, latest, 40)
    assert ends == {TP0: 30, TP1: 110, TP2: 50}
    # Spark's KafkaMicroBatchStream.rateLimit rounds each share down: 10 offsets over
    # backlogs 1:1:1 -> 3, 3, 3 (the batch holds 9) ...
    ends = rate_limit({TP0: 0, TP1: 0, TP2: 0}, {TP0: 9, TP1: 9, TP2: 9}, 10)
    assert ends == {TP0: 3, TP1: 3, TP2: 3}
    # ... and gives a share below one offset one offset (no partition starves).
    ends = rate_limit({TP0: 0, TP1: 0, TP2: 0}, {TP0: 1000, TP1: 1, TP2: 1}, 10)
    assert ends == {TP0: 9, TP1: 1, TP2: 1}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), min_size=1, max_size=5),
       st.integers(1, 20_000))
def test_rate_limit_takes_each_partitions_rounded_share(spans, limit):
    start = {TopicPartition("t", p): a for p, (a, _) in enumerate(spans)}
    latest = {TopicPartition("t", p): a + n for p, (a, n) in enumerate(spans)}
    ends = rate_limit(start, latest, limit)
    total = sum(n for _, n in spans)
    assert all(start[tp] <= ends[tp] <= latest[tp] for tp in latest)
    for tp in latest:
        backlog = latest[tp] - start[tp]
        share = limit * (backlog / total) if total else 0.0  # Spark's arithmetic
        if total <= limit or not backlog:
            assert ends[tp] == latest[tp]
        else:  # floor of the share, at least one offset, never past latest
            assert ends[tp] - start[tp] == min(backlog, max(1, int(share)))
    if total > limit:
        assert sum(ends[tp] - start[tp] for tp in latest) <= limit + len(latest)
