"""One partition's data from one ShareFetch response (Java's ``ShareCompletedFetch``).

Owns the fetched bytes, the acquired ranges (``(first_offset, last_offset,
delivery_count)``, ascending) and what was handed out of them. Rules:

* only records inside an acquired range are returned: a batch may hold records acquired
  by other members or already acknowledged, and those are skipped;
* every acquired record is returned at most once by this fetch, with its range's
  ``delivery_count``, in offset order; control batches are never returned;
* acquired offsets with no record to return (control records, compacted or missing
  offsets) become ``GAP`` acknowledgements once the fetch is consumed (``take_gaps``), so
  the broker moves past them instead of redelivering them when the lock expires;
* a record whose key or value fails to deserialize is handed out as a
  ``RecordDeserializationError`` instead (once the records before it were returned) and
  counts as delivered, so it is no GAP: the consumer acknowledges it (``RELEASE`` unless
  the application says otherwise by offset, Java's ``ShareInFlightBatchException``);
* a corrupt batch (its CRC-32C fails, checked unless ``check_crcs`` is off, or a record of
  it cannot be decoded) hands out none of its records: once the records before it were
  returned, it is raised as a ``CorruptRecordError`` whose ``offsets`` are the batch's
  acquired offsets, which count as delivered (no GAP); the consumer REJECTs them unless
  the application says otherwise by offset (Java's ``ShareCompletedFetch.rejectRecordBatch``).
  The batches after it are read as usual.

The node the response came from is kept: acknowledgements go back to it; so is the
acquisition lock duration the response gave (Java's ``ShareInFlightBatch``).
"""

from __future__ import annotations

import bisect
from typing import Any, Optional

from kproto.consumer.fetch.completed_fetch import Deserialize, deserialization_error
from kproto.consumer.share.acknowledgements import GAP, Acknowledgements
from kproto.errors import DeserializationExceptionOrigin as Origin
from kproto.errors import CorruptRecordError, KafkaError, RecordDeserializationError
from kproto.records import read_batches
from kproto.structs import ConsumerRecord, ShareConsumerRecord, TopicIdPartition

_new = tuple.__new__
_OFFSET = 3
# What a RecordDeserializationError of a share fetch says happens to its record.
_RELEASED = "The record is released unless it is acknowledged by offset (explicit mode)."


class ShareCompletedFetch:
    def __init__(self, node_id: int, tip: TopicIdPartition, records: Any, acquired: list[tuple[int, int, int]], *,
                 check_crcs: bool = True, key_deserializer: Optional[Deserialize] = None,
                 value_deserializer: Optional[Deserialize] = None, generation: int = 0,
                 acquisition_lock_timeout_ms: Optional[int] = None) -> None:
        self.node_id = node_id
        self.generation = generation  # of the node's share session that acquired the records
        # How long the broker locks these records for this member (ShareFetch v1+), None if unsaid.
        self.acquisition_lock_timeout_ms = acquisition_lock_timeout_ms
        self.partition = tip
        self.records: bytes = bytes(records) if records is not None else b""
        self.acquired = sorted(acquired)
        self._firsts = [r[0] for r in self.acquired]
        self._check_crcs = check_crcs
        self._key_des = key_deserializer
        self._value_des = value_deserializer
        self._batches: Any = None
        self._pending: list[ShareConsumerRecord] = []  # decoded, acquired, not yet returned
        self._index = 0
        self._next_offset = self.acquired[0][0] if self.acquired else 0
        # Returned, or raised as a RecordDeserializationError or in a CorruptRecordError's offsets.
        self.delivered: set[int] = set()
        self._error: Optional[KafkaError] = None
        self.is_consumed = not self.acquired
        self._gaps_taken = False

    @property
    def size_in_bytes(self) -> int:
        return len(self.records)

    def acquired_count(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.acquired)

    def delivery_count(self, offset: int) -> Optional[int]:
        i = bisect.bisect_right(self._firsts, offset) - 1
        if i >= 0:
            first, last, count = self.acquired[i]
            if first <= offset <= last:
                return count
        return None

    # --- taking records -----------------------------------------------------------------

    def fetch_records(self, max_records: int) -> list[ShareConsumerRecord]:
        """Up to ``max_records`` acquired records not returned before."""
        out: list[ShareConsumerRecord] = []
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        plain = self._key_des is None and self._value_des is None
        while len(out) < max_records and not self.is_consumed:
            if self._index >= len(self._pending):
                try:
                    more = self._decode_next_batch()
                except CorruptRecordError as exc:
                    if out:
                        self._error = exc  # the records before the corrupt batch first
                        break
                    raise
                if not more:
                    self.is_consumed = True
                    break
                continue
            if plain:
                chunk = self._pending[self._index:self._index + max_records - len(out)]
                self._index += len(chunk)
                self.delivered.update([r.offset for r in chunk])
                out += chunk
                continue
            raw = self._pending[self._index]
            self._index += 1
            try:
                record = self._deserialize(raw)
            except RecordDeserializationError as exc:
                self.delivered.add(raw.offset)
                if out:
                    self._error = exc
                    break
                raise
            self.delivered.add(raw.offset)
            out.append(record)
        return out

    def _decode_next_batch(self) -> bool:
        """Decode the next batch's acquired records into ``_pending``; False at the end."""
        if self._batches is None:
            topic, partition = self.partition.topic_partition
            # CRCs are checked below, on data batches only: a control batch is never returned
            # (it becomes a GAP), so a bad marker CRC (librdkafka's mock writes 0) cannot
            # hand out a corrupt record.
            self._batches = iter(read_batches(self.records, check_crcs=False, topic=topic, partition=partition))
        last_acquired = self.acquired[-1][1]
        while True:
            batch = next(self._batches, None)
            if batch is None or batch.base_offset > last_acquired:
                return False
            if batch.is_control_batch or batch.last_offset < self._next_offset:
                continue
            epoch = batch.partition_leader_epoch
            prefix = (self.partition.topic, self.partition.partition, epoch if epoch >= 0 else -1)
            try:
                if self._check_crcs:
                    batch.ensure_valid()
                records, error = batch.decode_records(ConsumerRecord, prefix)
            except CorruptRecordError as exc:  # a bad CRC, or a compressed batch that cannot be decompressed
                records, error = [], exc
            if error is not None:
                raise self._reject_batch(batch, error)
            wanted = self._acquired_of(records)
            self._next_offset = max(self._next_offset, batch.next_offset)
            if wanted:
                self._pending = wanted
                self._index = 0
                return True

    def _reject_batch(self, batch: Any, cause: CorruptRecordError) -> CorruptRecordError:
        """The error for corrupt ``batch``: its acquired offsets not handed out before, now
        counted as delivered, go in ``offsets`` (Java's ``rejectRecordBatch``); reading
        goes on after the batch. Even a decodable record of it is not handed out: its bytes
        are as suspect as the rest (Java checks the CRC before reading any)."""
        lo, hi = max(self._next_offset, batch.base_offset), batch.last_offset
        offsets = frozenset(
            offset
            for first, last, _ in self.acquired[max(0, bisect.bisect_right(self._firsts, lo) - 1):]
            if first <= hi
            for offset in range(max(first, lo), min(last, hi) + 1)
            if offset not in self.delivered)
        self.delivered.update(offsets)
        self._next_offset = max(self._next_offset, hi + 1)
        # The cause's text names the place already; its where-fields are carried over.
        error = CorruptRecordError(
            "{}. Its acquired records are rejected unless acknowledged by offset (explicit mode)".format(
                Exception.__str__(cause)),
            offsets=offsets)
        error.topic, error.partition = self.partition.topic_partition
        error.offset = error.record_offset = cause.offset
        error.__cause__ = cause
        return error

    def _acquired_of(self, records: list[Any]) -> list[ShareConsumerRecord]:
        """The records (ascending) at or after the next offset that lie in an acquired
        range, as ShareConsumerRecords with that range's delivery count."""
        if not records:
            return []
        lo = self._next_offset
        first_offset, last_offset = records[0][_OFFSET], records[-1][_OFFSET]
        i = max(0, bisect.bisect_right(self._firsts, max(lo, first_offset)) - 1)
        first, last, count = self.acquired[i]
        if first <= max(lo, first_offset) and last_offset <= last:
            # The common case: one acquired range covers the whole batch.
            tail = (count,)
            return [_new(ShareConsumerRecord, r + tail) for r in records if r[_OFFSET] >= lo]
        out = []
        for r in records:
            offset = r[_OFFSET]
            if offset < lo:
                continue
            found = self.delivery_count(offset)
            if found is not None:
                out.append(_new(ShareConsumerRecord, r + (found,)))
        return out

    def _deserialize(self, raw: ShareConsumerRecord) -> ShareConsumerRecord:
        key_des, value_des = self._key_des, self._value_des
        if key_des is None and value_des is None:
            return raw
        topic, headers = raw[0], raw[8]
        # Two try blocks tell the origin, as CompletedFetch's: no per-record bookkeeping.
        try:
            key = raw[6] if key_des is None else key_des(topic, headers, raw[6])
        except Exception as exc:
            raise deserialization_error(raw, self.partition.topic_partition, Origin.KEY, _RELEASED) from exc
        try:
            value = raw[7] if value_des is None else value_des(topic, headers, raw[7])
        except Exception as exc:
            raise deserialization_error(raw, self.partition.topic_partition, Origin.VALUE, _RELEASED) from exc
        return _new(ShareConsumerRecord, raw[:6] + (key, value) + raw[8:])

    # --- what is left ---------------------------------------------------------------------

    def take_gaps(self) -> Acknowledgements:
        """Once consumed: GAP for every acquired offset that had no record. Empty on later calls."""
        acks = Acknowledgements()
        if self._gaps_taken or not self.is_consumed:
            return acks
        self._gaps_taken = True
        for first, last, _ in self.acquired:
            for offset in range(first, last + 1):
                if offset not in self.delivered:
                    acks.add(offset, GAP)
        return acks

    def __repr__(self) -> str:
        return "ShareCompletedFetch({}, node={}, acquired={}, consumed={})".format(
            self.partition, self.node_id, self.acquired, self.is_consumed)
