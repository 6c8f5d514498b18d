"""Offset ranges and how a read is cut into Spark tasks; pure functions, no I/O.

Owns :class:`OffsetRange` (one task's work: ``[from_offset, until_offset)`` of one Kafka
partition), the split of ranges for ``minPartitions`` / ``maxRecordsPerPartition``, the
streaming offsets JSON (``{"topic": {"0": 42}}``, Spark's own layout, so checkpoints read
the same) and the ``maxOffsetsPerTrigger`` rate limit.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from kproto.errors import IllegalArgumentError
from kproto.structs import TopicPartition


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one partition, read by one task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: Optional[int] = None,
                 max_records_per_partition: Optional[int] = None) -> list[OffsetRange]:
    """Drop empty ranges; then cut ranges so there are at least ``min_partitions`` (when
    there is data for that many) and none longer than ``max_records_per_partition``.

    With ``min_partitions`` each range gets a share of the tasks proportional to its size
    (at least one), so a large partition is read by several tasks and a small one by one.
    Pieces of one range differ in size by at most one offset. Offsets are counted, not
    records: compacted or transactional logs have gaps, so a piece may hold fewer records.
    """
    work = sorted(r for r in ranges if r.size > 0)
    if min_partitions is not None and 0 < len(work) < min_partitions:
        parts = _shares(work, min(min_partitions, sum(r.size for r in work)))
        work = [piece for r, n in zip(work, parts) for piece in _cut(r, n)]
    if max_records_per_partition is not None:
        work = [piece for r in work
                for piece in _cut(r, -(-r.size // max_records_per_partition))]
    return work


def _shares(work: list[OffsetRange], total_parts: int) -> list[int]:
    """``total_parts`` tasks shared among ranges in proportion to their sizes, at least one
    each; the parts left after rounding down go to the ranges with the largest pieces."""
    total = sum(r.size for r in work)
    parts = [max(1, r.size * total_parts // total) for r in work]
    while sum(parts) < total_parts:
        i = max(range(len(work)), key=lambda j: (work[j].size / parts[j], -j))
        parts[i] += 1
    return parts


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    base, extra = divmod(r.size, parts)
    pieces, start = [], r.from_offset
    for i in range(parts):
        end = start + base + (1 if i < extra else 0)
        pieces.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return pieces


# -- streaming offsets JSON -------------------------------------------------------------


def to_offset_json(offsets: Mapping[TopicPartition, int]) -> dict[Any, Any]:
    """{TopicPartition: offset} -> ``{"topic": {"0": offset}}`` (string partition keys, as
    JSON object keys are; sorted, so equal offsets give equal JSON)."""
    result: dict[Any, Any] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def from_offset_json(data: Mapping[Any, Any]) -> dict[TopicPartition, int]:
    """The inverse of :func:`to_offset_json`; anything else is an IllegalArgumentError
    (a checkpoint written by another source, or edited by hand)."""
    if not isinstance(data, Mapping):
        raise IllegalArgumentError("kproto Spark source: offsets must be a JSON object "
                                   "{topic: {partition: offset}}, got %r" % (data,))
    result = {}
    for topic, partitions in data.items():
        if not isinstance(topic, str) or not isinstance(partitions, Mapping):
            raise IllegalArgumentError("kproto Spark source: bad offsets entry %r: %r" % (topic, partitions))
        for key, offset in partitions.items():
            try:
                partition = int(key)
            except (TypeError, ValueError):
                raise IllegalArgumentError("kproto Spark source: bad partition %r of topic %r in offsets"
                                           % (key, topic)) from None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0 or partition < 0:
                raise IllegalArgumentError("kproto Spark source: bad offset %r for %s-%s in offsets"
                                           % (offset, topic, key))
            result[TopicPartition(topic, partition)] = offset
    return result


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: Optional[int]) -> dict[TopicPartition, int]:
    """The end offsets of the next micro-batch: ``latest``, or when more than ``limit``
    offsets are waiting, each partition's share of ``limit`` in proportion to its backlog,
    rounded down, and at least one offset for a partition whose share is below one: Spark's
    ``KafkaMicroBatchStream.rateLimit``, so both sources cut the same micro-batches (a batch
    may so hold a few offsets less than ``limit``, or more when many small backlogs each get
    their one). Partitions missing from ``start`` count from 0 here; the caller puts new
    partitions into ``start`` first."""
    ends = dict(latest)
    if limit is None:
        return ends
    backlog = {tp: max(0, latest[tp] - start.get(tp, 0)) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return ends
    for tp, size in backlog.items():
        if size:
            # Spark's double arithmetic, as it rounds: limit * (size / total).
            share = limit * (size / total)
            ends[tp] = min(latest[tp], start.get(tp, 0) + int(math.ceil(share) if share < 1 else math.floor(share)))
    return ends
