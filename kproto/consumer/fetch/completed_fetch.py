"""CompletedFetch: one partition's data from one fetch response, and its parse state.

Java's ``CompletedFetch``. It owns the fetched bytes of one partition, the offset of the
next record to hand out (``next_fetch_offset``), the iteration over ``kproto.records``
batches (records are decoded only when taken), and the read_committed bookkeeping: the
response's aborted transactions (ordered by first offset) and the producer ids whose
batches are currently being skipped.

Rules, as in Java's ``nextFetchedRecord``:

* records below ``next_fetch_offset`` are skipped (a batch may start before the position);
* control batches are never returned; under read_committed an ABORT marker ends the
  producer's aborted range, and a transactional batch of an aborted producer is skipped
  whole by moving ``next_fetch_offset`` past it;
* after the last batch, ``next_fetch_offset`` is the batch's ``next_offset`` (v2 keeps the
  last offset even when compaction removed the last records, so the consumer never
  refetches the same batch forever);
* a batch's records are decoded only as far as the collector asks (the records left in
  this poll, at least ``MIN_DECODE_CHUNK``), straight into ``ConsumerRecord`` tuples (no
  intermediate ``Record``), and handed out in list slices: a 500-record poll over one
  10,000-record batch builds ~500 records, not 10,000;
* a corrupt batch or record or a failing deserializer raises only if no record was
  returned yet by this call; the next call raises again without skipping anything.
  Corruption surfaces as ``CorruptRecordError`` naming the topic, partition and the offset
  to seek past (the bad record's, from the records layer; for a bad record before the
  position, the batch's last offset; for a failed batch CRC, the batch's base offset or
  the position if later); other decoding failures (a missing codec) keep their own class.
"""

from __future__ import annotations

import heapq
import inspect
import logging
from collections.abc import Callable, Iterator
from typing import Any, Optional

from kproto.errors import CorruptRecordError, KafkaError, RecordDeserializationError
from kproto.errors import DeserializationExceptionOrigin as Origin
from kproto.messages.fetch import FetchResponse_PartitionData
from kproto.records import read_batches, starts_with_whole_batch
from kproto.records.batch_crcs import BatchCrcCheck
from kproto.structs import ConsumerRecord, IsolationLevel, TopicPartition

log = logging.getLogger("kproto.consumer.fetch")

_new_record = tuple.__new__
_KEY = ConsumerRecord._fields.index("key")  # value follows key
# The fewest records decoded per step: a poll wanting fewer still gets a chunk this big
# (the rest waits for the next poll), so tiny polls do not pay the decoder's per-call
# cost for every record or two; small enough to keep memory proportional to the poll.
MIN_DECODE_CHUNK = 64


Deserialize = Callable[[str, tuple[tuple[str, Optional[bytes]], ...], Optional[bytes]], Any]


_SEEK_PAST = "If needed, please seek past the record to continue consumption."


def deserialization_error(record: Any, topic_partition: Any, origin: Origin, note: str) -> RecordDeserializationError:
    """The error for ``record`` (a ConsumerRecord or ShareConsumerRecord with the raw key and
    value) whose ``origin`` deserializer failed, carrying what Java's
    ``RecordDeserializationException`` carries; ``note`` says what happens next."""
    return RecordDeserializationError(
        "Error deserializing {} for partition {}-{} at offset {}. {}".format(
            origin.name, record.topic, record.partition, record.offset, note),
        topic_partition, record.offset, origin=origin, timestamp=record.timestamp,
        timestamp_type=record.timestamp_type, key_buffer=record.key, value_buffer=record.value,
        headers=record.headers)


def make_deserialize(deserializer: Any) -> Optional[Deserialize]:
    """Normalise a deserializer to ``f(topic, headers, data)``; None when there is none.

    Accepts kafka-python's forms: a callable taking the bytes, or an object with
    ``deserialize(topic, headers, data)`` or ``deserialize(topic, data)``.
    """
    if deserializer is None:
        return None
    method = getattr(deserializer, "deserialize", None)
    if method is None:
        return lambda topic, headers, data: deserializer(data)
    try:
        takes_headers = len(inspect.signature(method).parameters) >= 3
    except (TypeError, ValueError):
        takes_headers = True
    if takes_headers:
        return method
    return lambda topic, headers, data: method(topic, data)


def check_crcs_together(completed: list["CompletedFetch"]) -> None:
    """Check the CRCs of the small batches of one response's partitions in one pass.

    With many partitions of small batches the per-batch checks cost mostly their fixed
    overhead (see ``kproto.records.batch_crcs``). If every CRC holds, each CompletedFetch
    skips those batches' own checks; if not, nothing changes, and the per-batch checks
    report the corrupt batch when it is reached, as they would have.
    """
    check = BatchCrcCheck()
    found = _add_fetches(check, completed)
    # One batch costs the same either way: leave it to its own check.
    if check.batches > 1 and check.ok():
        _vouch(found)


def _add_fetches(check: BatchCrcCheck,
                 fetches: list["CompletedFetch"]) -> list[tuple["CompletedFetch", frozenset[int]]]:
    """Queue in ``check`` the batches of ``fetches`` that want a CRC check (checks on, data
    held, not drained); each such fetch with the batch starts its check covers."""
    found = []
    for cf in fetches:
        if cf._check_crcs and cf.records and not cf.is_consumed:
            starts = check.add(cf.records)
            if starts:
                found.append((cf, starts))
    return found


def _vouch(found: list[tuple["CompletedFetch", frozenset[int]]]) -> None:
    """A combined check held: each fetch skips its covered batches' own checks."""
    for cf, starts in found:
        cf.crc_verified = starts


# CrcPrecheck drops fetches the buffer dropped once it holds this many unchecked ones.
_PRECHECK_PRUNE_AT = 4096


class CrcPrecheck:
    """Checks buffered fetches' CRCs ahead of their collection, a bounded slice of work
    per ``step()``: the event-loop shell's way to keep every loop callback short.

    Java checks a batch's CRC when its records are first reached (``CompletedFetch.
    maybeEnsureValid``), and kproto's threaded shells check small batches together when a
    response arrives (``check_crcs_together``); either way one step pays for a whole batch
    (a 1 MiB batch is ~3-4 ms of pure Python) or a whole response of small ones. Here the
    fetch manager hands each response's fetches to ``add`` instead, and the shell calls
    ``step()`` once per turn of its loop until it returns False before it collects: every
    batch of the fetches added goes into one sliced ``BatchCrcCheck``. If the combined
    check holds, the fetches skip their batches' own checks; if not, nothing changes and
    the per-batch checks find the corrupt batch when it is reached, as they would have.
    Fetches dropped meanwhile (a seek, an unassignment) are checked all the same: the
    work is bounded by what was buffered.
    """

    __slots__ = ("slice_bytes", "_pending", "_check", "_found")

    #: CRC work per step: ~0.5-1 ms of pure Python.
    SLICE_BYTES = 256 * 1024

    def __init__(self, slice_bytes: int = SLICE_BYTES) -> None:
        self.slice_bytes = slice_bytes
        self._pending: list[CompletedFetch] = []
        self._check: Optional[BatchCrcCheck] = None
        self._found: list[tuple[CompletedFetch, frozenset[int]]] = []

    def add(self, completed: list["CompletedFetch"]) -> None:
        """Fetches just buffered (their CRCs unchecked)."""
        pending = self._pending
        pending.extend(completed)
        if len(pending) > _PRECHECK_PRUNE_AT:
            # An application that changes its assignment again and again without
            # collecting: what the buffer dropped (drained) needs no check and must not
            # be held on to.
            self._pending = [cf for cf in pending if not cf.is_consumed]

    @property
    def pending(self) -> bool:
        """Whether checking work is left (``step`` would do some)."""
        return self._check is not None or bool(self._pending)

    def step(self) -> bool:
        """One slice of checking; whether work is left."""
        check = self._check
        if check is None:
            if not self._pending:
                return False
            check = self._check = BatchCrcCheck(max_batch_bytes=None)
            self._found = _add_fetches(check, self._pending)
            self._pending = []
        if check.step(self.slice_bytes):
            return True
        found, self._found, self._check = self._found, [], None
        if found and check.ok():
            _vouch(found)
        return bool(self._pending)


_NO_PRODUCERS: frozenset[int] = frozenset()
_NO_OFFSETS: frozenset[int] = frozenset()
_NO_TRANSACTIONS: tuple[tuple[int, int], ...] = ()


class CompletedFetch:
    """One partition's fetched data; the FetchCollector takes records from it."""

    # A response makes one per partition (1,000 partitions: 1,000 per Fetch): slots make
    # each cheaper to build and smaller.
    __slots__ = ("partition", "next_fetch_offset", "last_epoch", "is_consumed", "initialized", "records_read",
                 "bytes_read", "metric_aggregator", "_collecting", "error_code", "high_watermark",
                 "last_stable_offset", "log_start_offset", "preferred_read_replica", "records", "empty_answer",
                 "_read_committed", "_check_crcs", "crc_verified", "_key_deserializer", "_value_deserializer",
                 "_batches", "_current_batch", "_decoding", "_prefix", "_batch_records", "_index", "_batch_error",
                 "_corrupt_error", "_aborted_producer_ids", "_aborted_transactions")

    def __init__(self, tp: TopicPartition, partition_data: FetchResponse_PartitionData, fetch_offset: int,
                 isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED, check_crcs: bool = True,
                 key_deserializer: Optional[Deserialize] = None,
                 value_deserializer: Optional[Deserialize] = None) -> None:
        # AbstractFetch passes every argument by position: keywords cost more than a third
        # of the call, paid per partition of every response.
        self.partition = tp
        self.next_fetch_offset = fetch_offset
        self.last_epoch: Optional[int] = None
        self.is_consumed = False
        self.initialized = False
        self.records_read = 0
        # Metrics: bytes of the batches iterated, reported with records_read on drain()
        # to the response's FetchMetricsAggregator (set by AbstractFetch; None: no metrics).
        self.bytes_read = 0
        self.metric_aggregator: Any = None
        self._collecting = False  # inside fetch_records: records_read is not final yet
        error_code = self.error_code = partition_data.error_code
        self.high_watermark = partition_data.high_watermark
        self.last_stable_offset = partition_data.last_stable_offset
        self.log_start_offset = partition_data.log_start_offset
        replica = self.preferred_read_replica = partition_data.preferred_read_replica
        records = partition_data.records
        self.records: bytes | memoryview = records if records is not None else b""
        # Neither records, nor an error, nor a read replica to switch to: all the collector
        # does with it is take its offsets (most partitions of a Fetch over many partitions).
        self.empty_answer = not records and not error_code and replica < 0
        self._read_committed = isolation_level == IsolationLevel.READ_COMMITTED
        self._check_crcs = check_crcs
        # Start positions of batches whose CRCs were checked already (check_crcs_together).
        self.crc_verified: frozenset[int] = _NO_OFFSETS
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._batches: Optional[Iterator[Any]] = None
        self._current_batch: Any = None
        # The batch being decoded (None once it is done), the ConsumerRecord prefix of its
        # records, the records decoded and not yet handed out with the index of the next
        # one, and the error of a malformed record that ended the batch (raised once the
        # records before it are taken).
        self._decoding: Any = None
        self._prefix: tuple[Any, ...] = ()
        self._batch_records: Optional[list[ConsumerRecord]] = None
        self._index = 0
        self._batch_error: Optional[KafkaError] = None
        self._corrupt_error: Optional[KafkaError] = None
        # Only read_committed reads (and changes) these: other fetches share the immutable
        # empties, two allocations fewer per partition of every response.
        self._aborted_producer_ids: set[int] = _NO_PRODUCERS  # type: ignore[assignment]
        self._aborted_transactions: list[tuple[int, int]] = _NO_TRANSACTIONS  # type: ignore[assignment]
        if self._read_committed:
            self._aborted_producer_ids = set()
            self._aborted_transactions = [(txn.first_offset, txn.producer_id)
                                          for txn in partition_data.aborted_transactions or ()]
            heapq.heapify(self._aborted_transactions)

    @property
    def records_size(self) -> int:
        return len(self.records)

    def set_initialized(self) -> None:
        self.initialized = True

    def drain(self) -> None:
        """Mark this fetch consumed (stale, errored or fully read); nothing more comes out."""
        if not self.is_consumed:
            self.is_consumed = True
            if not self._collecting:
                self._report_metrics()
            self._batch_records = None
            self._batch_error = None
            self._batches = None
            self._decoding = None

    @staticmethod
    def drain_all(fetches: list["CompletedFetch"]) -> None:
        """``drain()`` each of ``fetches``, none of which read any records (answers without
        any): the same outcome, with their metrics reported to each aggregator at once."""
        reports: dict[Any, list[TopicPartition]] = {}
        for completed in fetches:
            if not completed.is_consumed:
                completed.is_consumed = True
                aggregator = completed.metric_aggregator
                if aggregator is not None:
                    completed.metric_aggregator = None
                    found = reports.get(aggregator)
                    if found is None:
                        reports[aggregator] = [completed.partition]
                    else:
                        found.append(completed.partition)
        for aggregator, partitions in reports.items():
            aggregator.record_empty(partitions)

    def _report_metrics(self) -> None:
        """Once, when consumed: bytes and records to the response's metrics aggregator."""
        aggregator, self.metric_aggregator = self.metric_aggregator, None
        if aggregator is not None:
            aggregator.record(self.partition, self.bytes_read, self.records_read)

    def _read_batches(self, check_crcs: bool) -> Iterator[Any]:
        # The reader wants bytes; convert the response's memoryview once, not per reader.
        if type(self.records) is not bytes:
            self.records = bytes(self.records)
        return iter(read_batches(self.records, check_crcs=check_crcs, topic=self.partition.topic,
                                 partition=self.partition.partition, verified=self.crc_verified))

    def has_batches(self) -> bool:
        """Whether the data holds at least one whole batch (raises RecordTooLargeError if the
        first batch was cut off by the fetch size)."""
        # The common case from the first entry's header; the reader tells the rest.
        return starts_with_whole_batch(self.records) or next(self._read_batches(check_crcs=False), None) is not None

    # --- taking records -------------------------------------------------------------

    def fetch_records(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` records from ``next_fetch_offset`` on, advancing it."""
        if self._corrupt_error is not None:
            # The same failure every time until the user seeks past it.
            raise self._fetch_error(self._corrupt_error)
        out: list[ConsumerRecord] = []
        if self.is_consumed or max_records <= 0:
            return out
        if not self.records:
            # No data (most partitions of a Fetch across many partitions): nothing to read.
            self.drain()
            return out
        plain = self._key_deserializer is None and self._value_deserializer is None
        self._collecting = True
        try:
            self._take(out, max_records, plain)
        finally:
            self._collecting = False
            self.records_read += len(out)
            if self.is_consumed:
                self._report_metrics()
        return out

    def _take(self, out: list[ConsumerRecord], max_records: int, plain: bool) -> None:
        """fetch_records' loop: append up to ``max_records`` records to ``out``."""
        try:
            while len(out) < max_records:
                records = self._batch_records
                if records is None:
                    if not self._decode_more(max_records - len(out)):
                        break
                    records = self._batch_records
                    assert records is not None  # _decode_more() filled the buffer
                i = self._index
                chunk = records[i:i + max_records - len(out)]
                if plain:
                    out += chunk
                    self._index = i + len(chunk)
                    if chunk:
                        self.next_fetch_offset = chunk[-1].offset + 1
                else:
                    for record in chunk:
                        # A failing deserializer raises before the index moves: the
                        # same record is tried again on the next call.
                        out.append(self._parse_record(record))
                        self._index += 1
                        self.next_fetch_offset = record.offset + 1
                if self._index >= len(records):
                    self._batch_records = None
        except RecordDeserializationError:
            if not out:
                raise
        except KafkaError as exc:
            self._corrupt_error = exc
            if not out:
                raise self._fetch_error(exc) from exc
            # What was taken before the corrupt record is returned (the position is
            # right after it); the error comes on the next call.

    def _fetch_error(self, cause: KafkaError) -> KafkaError:
        """What ``fetch_records`` raises for a decoding failure (Java's KafkaException
        "Received exception when fetching the next record"), chained to ``cause``."""
        topic, partition = self.partition
        message = ("Received exception when fetching the next record from {}-{}: {}. If needed, please seek past "
                   "the record to continue consumption.".format(topic, partition, cause))
        if isinstance(cause, CorruptRecordError):
            # The records layer names the bad record; a bad record before the position
            # (a batch may start before it) is reported at the position instead.
            offset = self.next_fetch_offset
            if cause.record_offset is not None and cause.record_offset > offset:
                offset = cause.record_offset
            error: KafkaError = CorruptRecordError(message)  # the cause's text already names the place
            error.topic, error.partition = topic, partition  # type: ignore[attr-defined]
            error.record_offset = error.offset = offset  # type: ignore[attr-defined]
        else:
            try:
                error = type(cause)(message)  # keep the class (e.g. UnsupportedCodecError)
            except TypeError:  # a class with a different constructor
                error = KafkaError(message)
        error.__cause__ = cause
        return error

    def _parse_record(self, record: ConsumerRecord) -> ConsumerRecord:
        """``record`` (raw key and value) with the deserializers applied."""
        topic = record.topic
        headers = record.headers
        key_des, value_des = self._key_deserializer, self._value_deserializer
        # Two try blocks (free until one raises) tell the origin: no per-record bookkeeping.
        try:
            key = record.key if key_des is None else key_des(topic, headers, record.key)
        except Exception as exc:
            raise deserialization_error(record, self.partition, Origin.KEY, _SEEK_PAST) from exc
        try:
            value = record.value if value_des is None else value_des(topic, headers, record.value)
        except Exception as exc:
            raise deserialization_error(record, self.partition, Origin.VALUE, _SEEK_PAST) from exc
        # The fields around key and value are copied by position: a tuple slice is much
        # cheaper per record than NamedTuple._replace().
        return _new_record(ConsumerRecord, record[:_KEY] + (key, value) + record[_KEY + 2:])

    def _next_batch(self) -> bool:
        """Move to the next batch with records to return; False (and drained) at the end."""
        read_committed = self._read_committed
        if self._batches is None:
            self._batches = self._read_batches(self._check_crcs)
        while True:
            batch = next(self._batches, None)
            if batch is None:
                if self._current_batch is not None:
                    self.next_fetch_offset = max(self.next_fetch_offset, self._current_batch.next_offset)
                self.drain()
                return False
            self._current_batch = batch
            self.bytes_read += batch.size_in_bytes
            epoch = batch.partition_leader_epoch
            self.last_epoch = epoch if epoch >= 0 else None
            if read_committed and batch.producer_id >= 0:
                self._consume_aborted_transactions_up_to(batch.last_offset)
                if batch.is_control_batch:
                    marker = batch.control_record()
                    if marker is not None and marker.is_abort:
                        self._aborted_producer_ids.discard(batch.producer_id)
                elif batch.is_transactional and batch.producer_id in self._aborted_producer_ids:
                    log.debug("skipping aborted batch of %s from producer %d, offsets %d to %d", self.partition,
                              batch.producer_id, batch.base_offset, batch.last_offset)
                    self.next_fetch_offset = max(self.next_fetch_offset, batch.next_offset)
                    continue
            if batch.is_control_batch:
                # Markers are never returned; step past them so the position can advance.
                self.next_fetch_offset = max(self.next_fetch_offset, batch.next_offset)
                continue
            if batch.next_offset <= self.next_fetch_offset:
                continue  # wholly before the position: no need to decode it
            # Decoded later, a chunk at a time, as the collector asks (_decode_more).
            self._decoding = batch
            self._prefix = (self.partition.topic, self.partition.partition,
                            -1 if self.last_epoch is None else self.last_epoch)
            return True

    def _decode_more(self, wanted: int) -> bool:
        """Decode the next records (``wanted``, at least MIN_DECODE_CHUNK) into the empty
        buffer, moving to later batches as needed; False (and drained) at the end. A
        malformed record's error is raised once the records before it were taken."""
        while True:
            error = self._batch_error
            if error is not None:
                self._batch_error = None
                raise error
            batch = self._decoding
            if batch is None:
                if not self._next_batch():
                    return False
                batch = self._decoding
            records, error = batch.decode_records(ConsumerRecord, self._prefix,
                                                  max(wanted, MIN_DECODE_CHUNK))
            if batch.decoding_done:
                self._decoding = None
            position = self.next_fetch_offset
            if error is not None:
                if error.record_offset is not None and error.record_offset < position:
                    # The bad record lies before the position (the user sought past it):
                    # the records after it cannot be found (their boundaries are lost),
                    # so the offset to seek past is the batch's last one.
                    error.record_offset = error.offset = batch.last_offset
                self._batch_error = error
            if records and records[0].offset < position:
                # The batch started before the position (the decoders guarantee
                # increasing offsets, so what is left is in order).
                records = [r for r in records if r.offset >= position]
            if records:
                self._batch_records = records
                self._index = 0
                return True

    def _consume_aborted_transactions_up_to(self, offset: int) -> None:
        heap = self._aborted_transactions
        while heap and heap[0][0] <= offset:
            self._aborted_producer_ids.add(heapq.heappop(heap)[1])

    def __repr__(self) -> str:
        return "CompletedFetch(partition={}-{}, next_fetch_offset={}, consumed={})".format(
            self.partition.topic, self.partition.partition, self.next_fetch_offset, self.is_consumed)
