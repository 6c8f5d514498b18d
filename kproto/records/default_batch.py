"""RecordBatch v2 (magic 2) decoding: the batch header eagerly, the records lazily.

Owns ``RecordBatch`` (Java's DefaultRecordBatch): the 61-byte header is unpacked with one
``struct.unpack_from`` when the batch is reached; the records are decompressed and decoded
only when asked for, and only as many as asked: ``decode_records(limit=n)`` decodes at
most n and keeps a cursor (position, last offset, count) on the batch so the next call
resumes, and ``records`` decodes in chunks of ``_ITER_CHUNK``; so a consumer that stops at
``max_poll_records`` never builds the rest of a big batch (a compressed batch is still
decompressed whole on the first call).

Layout (Kafka's DefaultRecordBatch)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 (CRC-32C of everything after it) | attributes int16 | lastOffsetDelta int32 |
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
    baseSequence int32 | recordCount int32 | records...

    record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
            keyLength varint | key | valueLength varint | value | headerCount varint |
            [headerKeyLength varint | headerKey | headerValueLength varint | headerValue]

The record loop is the hottest code of kproto: one function call per chunk appending to a
list (a generator resumed per record costs more), on one ``bytes`` object with an integer
position; it binds everything it uses to locals, decodes one- and two-byte varints inline
(nearly every length and delta in practice; the zigzag step is a table lookup) and
three-byte record and value lengths (values of ~8 KiB to 1 MiB), calls a helper only for
longer ones, and builds each record tuple in one step with the caller's
prefix (the consumer's ``ConsumerRecord`` directly). Bounds are not checked per field:
indexing past the end raises IndexError, slicing past the end is caught by the per-record
check that the fields end exactly where the record's length said; both end the list with
a ``CorruptRecordError`` naming the bad record's offset.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator, Optional

from kproto import codecs
from kproto.errors import CorruptMessageError, CorruptRecordError
from kproto.records.crc32c import crc32c
from kproto.records.record import (CREATE_TIME, LOG_APPEND_TIME, ControlRecord, Record)

__all__ = ["RecordBatch", "HEADER_SIZE", "ATTR_COMPRESSION_MASK", "ATTR_TIMESTAMP_TYPE",
           "ATTR_TRANSACTIONAL", "ATTR_CONTROL", "ATTR_DELETE_HORIZON"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
CRC_START = 21  # the CRC covers attributes .. end of batch
ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")

_new_tuple = tuple.__new__

# Records decoded per step when ``records`` is iterated: big enough that the per-call cost
# vanishes, small enough that stopping early leaves most of a big batch undecoded.
_ITER_CHUNK = 256

# Zigzag decoding of the one- and two-byte varints (nearly every length and delta in
# practice) by one list lookup. A one-byte varint b (< 0x80) is _ZZ[b]; a two-byte one,
# first byte a (>= 0x80) then b (< 0x80), has the raw value (a - 0x80) + (b << 7) and is
# _ZZ[(b << 7) + a]: indices from 0x80 up hold zigzag(i - 0x80), and no one-byte varint
# reaches them.
_ZZ = ([(v >> 1) ^ -(v & 1) for v in range(0x80)]
       + [((v - 0x80) >> 1) ^ -((v - 0x80) & 1) for v in range(0x80, (0x7F << 7) + 0x100)])


class _Malformed(Exception):
    """Internal: a record's fields do not match its declared length or count."""


def _varint_slow(buf: bytes, pos: int) -> tuple[int, int]:
    """A varint of 3+ bytes (or any length) at ``pos``: (raw unsigned value, new pos)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _Malformed("varint longer than 10 bytes")


def _zigzag_slow(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint of any length at ``pos``: (signed value, new pos)."""
    v, pos = _varint_slow(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def _decode_records(buf: bytes, pos: int, end: int, limit: int, base_offset: int,
                    last_offset: int, base_timestamp: int, timestamp_type: int,
                    log_append_time: int | None, record_class: type,
                    prefix: tuple[Any, ...]) -> tuple[list[Any], int, str | None]:
    """Up to ``limit`` records from ``pos`` in one call: ``(records, new pos, None)``, or
    ``(the records before the first malformed one, pos, what is wrong with it)``.

    Each record is ``record_class`` over ``prefix + (offset, timestamp, ...)``, so the
    consumer gets its ``ConsumerRecord`` (prefix ``(topic, partition, leader_epoch)``)
    without an intermediate ``Record``. One loop appending to a list costs less per record
    than a generator resumed per record. ``last_offset`` is the offset of the record
    before ``pos`` (base offset - 1 at the start): offsets must grow across calls too.
    """
    out: list[Any] = []
    append = out.append
    new = _new_tuple
    zz = _ZZ
    slow = _zigzag_slow
    # The consumer's prefix (topic, partition, leader epoch) unpacked once, so each record
    # is one tuple literal copied into its class: ``prefix + (...)`` built two tuples more.
    if len(prefix) == 3:
        topic, partition, epoch = prefix
        shape = 3
    else:
        topic = partition = epoch = None
        shape = 0 if not prefix else -1
    try:
        # A range iterator bounds the chunk: cheaper per record than counting by hand.
        for _ in range(limit):
            if pos >= end:
                break
            # Every varint below: one byte if < 0x80, two bytes through _ZZ, else the
            # helper (which also zigzag-decodes).
            v = buf[pos]
            if v < 0x80:
                pos += 1
                rec_end = pos + zz[v]
            else:
                b = buf[pos + 1]
                if b < 0x80:
                    pos += 2
                    rec_end = pos + zz[(b << 7) + v]
                else:
                    # three bytes: records of 8 KiB to 1 MiB
                    c = buf[pos + 2]
                    if c < 0x80:
                        v = (v - 0x80) | ((b - 0x80) << 7) | (c << 14)
                        pos += 3
                        rec_end = pos + ((v >> 1) ^ -(v & 1))
                    else:
                        v, pos = slow(buf, pos)
                        rec_end = pos + v
            # (a length of zero or below is caught by the pos == rec_end check below)
            if rec_end > end:
                raise _Malformed("record length out of range")
            # attributes (unused by every Kafka version so far), then timestampDelta
            v = buf[pos + 1]
            if v < 0x80:
                v = zz[v]
                pos += 2
            else:
                b = buf[pos + 2]
                if b < 0x80:
                    v = zz[(b << 7) + v]
                    pos += 3
                else:
                    v, pos = slow(buf, pos + 1)
            timestamp = base_timestamp + v if log_append_time is None else log_append_time
            v = buf[pos]
            if v < 0x80:
                offset = base_offset + zz[v]
                pos += 1
            else:
                b = buf[pos + 1]
                if b < 0x80:
                    offset = base_offset + zz[(b << 7) + v]
                    pos += 2
                else:
                    v, pos = slow(buf, pos)
                    offset = base_offset + v
            # Deltas only grow (compaction leaves gaps): anything else is corrupt, and
            # would make the consumer return offsets out of order.
            if offset <= last_offset:
                raise _Malformed("offset delta {} after {}".format(
                    offset - base_offset, last_offset - base_offset))
            last_offset = offset
            # key (slicing past the end is caught by the pos == rec_end check below)
            v = buf[pos]
            if v < 0x80:
                ksize = zz[v]
                pos += 1
            else:
                b = buf[pos + 1]
                if b < 0x80:
                    ksize = zz[(b << 7) + v]
                    pos += 2
                else:
                    ksize, pos = slow(buf, pos)
            if ksize >= 0:
                v = pos + ksize
                key = buf[pos:v]
                pos = v
            elif ksize == -1:
                key = None
            else:
                raise _Malformed("negative key length")
            # value
            v = buf[pos]
            if v < 0x80:
                vsize = zz[v]
                pos += 1
            else:
                b = buf[pos + 1]
                if b < 0x80:
                    vsize = zz[(b << 7) + v]
                    pos += 2
                else:
                    c = buf[pos + 2]
                    if c < 0x80:
                        vsize = (v - 0x80) | ((b - 0x80) << 7) | (c << 14)
                        vsize = (vsize >> 1) ^ -(vsize & 1)
                        pos += 3
                    else:
                        vsize, pos = slow(buf, pos)
            if vsize >= 0:
                v = pos + vsize
                value = buf[pos:v]
                pos = v
            elif vsize == -1:
                value = None
            else:
                raise _Malformed("negative value length")
            # headers: almost always none (the shared empty tuple, which keeps the record
            # untracked by the garbage collector)
            v = buf[pos]
            pos += 1
            if v == 0:
                headers: tuple[tuple[str, Optional[bytes]], ...] = ()
                hsize = -1
            else:
                if v >= 0x80:
                    hcount, pos = slow(buf, pos - 1)
                else:
                    hcount = zz[v]
                # Each header takes at least two bytes: a count beyond that is corrupt
                # (and must not drive a long loop).
                if hcount < 0 or 2 * hcount > rec_end - pos:
                    raise _Malformed("bad header count")
                headers, hsize, pos = _read_headers(buf, pos, hcount)
            if pos != rec_end:
                raise _Malformed("record fields do not match the record length")
            if shape == 3:
                append(new(record_class, (topic, partition, epoch, offset, timestamp, timestamp_type, key, value,
                                          headers, None, ksize, vsize, hsize)))
            elif shape == 0:
                append(new(record_class, (offset, timestamp, timestamp_type, key, value,
                                          headers, None, ksize, vsize, hsize)))
            else:
                append(new(record_class, prefix + (offset, timestamp, timestamp_type, key, value,
                                                   headers, None, ksize, vsize, hsize)))
    except (IndexError, _Malformed, UnicodeDecodeError) as exc:
        return out, pos, "malformed record: {}".format(exc)
    return out, pos, None


def _read_headers(buf: bytes, pos: int, count: int) -> tuple[tuple[tuple[str, Optional[bytes]], ...], int, int]:
    headers = []
    size = 0
    for _ in range(count):
        v, pos = _varint_slow(buf, pos)
        klen = (v >> 1) ^ -(v & 1)
        if klen < 0:
            raise _Malformed("negative header key length")
        key = buf[pos:pos + klen].decode("utf-8")
        pos += klen
        v, pos = _varint_slow(buf, pos)
        vlen = (v >> 1) ^ -(v & 1)
        if vlen >= 0:
            value = buf[pos:pos + vlen]
            pos += vlen
            size += klen + vlen
        elif vlen == -1:
            value = None
            size += klen
        else:
            raise _Malformed("negative header value length")
        headers.append((key, value))
    return tuple(headers), size, pos


class _Cursor:
    """Where a batch's record decoding stands: the (decompressed) bytes, the position of
    the next record, the offset of the last record decoded, the count so far, and whether
    it is done (with the error that ended it, if any)."""

    __slots__ = ("buf", "pos", "end", "last_offset", "decoded", "done", "error")

    def __init__(self, buf: bytes, pos: int, end: int, last_offset: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end
        self.last_offset = last_offset
        self.decoded = 0
        self.done = False
        self.error: CorruptRecordError | None = None


class RecordBatch:
    """One v2 record batch inside a fetch's bytes; header fields are plain attributes.

    ``records`` (or iterating the batch) decodes the records lazily; ``ensure_valid()``
    checks the CRC. ``topic``/``partition`` only label errors.
    """

    __slots__ = ("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
                 "attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
                 "producer_id", "producer_epoch", "base_sequence", "record_count",
                 "size_in_bytes", "topic", "partition", "max_decompressed_size",
                 "_data", "_start", "_end", "_cursor")

    def __init__(self, data: bytes, start: int, end: int, topic: str | None = None,
                 partition: int | None = None,
                 max_decompressed_size: int = codecs.DEFAULT_MAX_SIZE) -> None:
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
         self.crc, self.attributes, self.last_offset_delta, self.base_timestamp,
         self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
         self.record_count) = _HEADER.unpack_from(data, start)
        self.size_in_bytes = end - start
        self.topic = topic
        self.partition = partition
        self.max_decompressed_size = max_decompressed_size
        self._data = data
        self._start = start
        self._end = end
        self._cursor: _Cursor | None = None

    # --- attributes ------------------------------------------------------------------
    @property
    def compression_type(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & ATTR_TIMESTAMP_TYPE else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control_batch(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (stored in base_timestamp when the flag is set), else None."""
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after this batch (compaction may have removed its last records)."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def leader_epoch(self) -> int:
        """Alias of partition_leader_epoch (kafka-python's name)."""
        return self.partition_leader_epoch

    # --- validation ------------------------------------------------------------------
    def compute_crc(self) -> int:
        return crc32c(memoryview(self._data)[self._start + CRC_START:self._end])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError unless the stored CRC matches the batch bytes."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise self._corrupt("CRC-32C mismatch: stored {:#010x}, computed {:#010x}".format(
                self.crc, computed))

    def _corrupt(self, message: str, offset: int | None = None) -> CorruptRecordError:
        """The error for this batch; ``offset`` is the bad record's (default: the batch's)."""
        if offset is None:
            offset = self.base_offset
        return CorruptRecordError("record batch at offset {}: {}".format(
            self.base_offset, message), topic=self.topic, partition=self.partition,
            offset=offset)

    # --- records ---------------------------------------------------------------------
    def decode_records(self, record_class: type = Record, prefix: tuple[Any, ...] = (),
                       limit: int | None = None) -> tuple[list[Any], CorruptRecordError | None]:
        """Decode the batch's next records: all that are left, or at most ``limit``.

        The batch keeps where decoding stopped (its cursor), so successive calls hand out
        every record once, in order; ``decoding_done`` says when none is left (a call then
        returns ``([], None)``). The first call decompresses the batch (kept until the
        end). Returns ``(records, None)``, or ``(the records before the first malformed
        one, a CorruptRecordError whose offset is the bad record's)``: the offset after the
        last good record (base offset + its offset delta + 1), or the base offset if none
        was good, so a consumer can return what was good and the user can seek past the bad
        record only; decoding stops there (later calls return ``([], that error)``).
        Records are ``record_class`` tuples of ``prefix`` followed by the ``Record`` fields
        (the consumer passes ``ConsumerRecord`` and ``(topic, partition, leader_epoch)``).
        A batch that cannot be decompressed raises at once (``CorruptRecordError``, or
        ``UnsupportedCodecError`` for a missing package).
        """
        cursor = self._cursor
        if cursor is None:
            cursor = self._cursor = self._open_cursor()
        return self._decode_next(cursor, record_class, prefix, limit)

    @property
    def decoding_done(self) -> bool:
        """Whether ``decode_records`` has handed out every record (or stopped at an error)."""
        cursor = self._cursor
        return cursor is not None and cursor.done

    def _open_cursor(self) -> _Cursor:
        """A cursor at the first record (the batch decompressed if it is compressed)."""
        start = self._start + HEADER_SIZE
        end = self._end
        buf = self._data
        codec = self.attributes & ATTR_COMPRESSION_MASK
        if self.record_count < 0:
            raise self._corrupt("negative record count")
        if codec:
            if codec not in codecs.CODEC_NAMES:
                raise self._corrupt("unknown compression codec id {}".format(codec))
            try:
                buf = codecs.decompress(codec, memoryview(buf)[start:end],
                                        max_size=self.max_decompressed_size)
            except CorruptMessageError as exc:
                raise self._corrupt(str(exc)) from exc
            start = 0
            end = len(buf)
        return _Cursor(buf, start, end, self.base_offset - 1)

    def _decode_next(self, cursor: _Cursor, record_class: type, prefix: tuple[Any, ...],
                     limit: int | None) -> tuple[list[Any], CorruptRecordError | None]:
        if cursor.done:
            return [], cursor.error
        attributes = self.attributes
        log_append_time = self.max_timestamp if attributes & ATTR_TIMESTAMP_TYPE else None
        if limit is None:
            limit = cursor.end  # more than there can be records (each takes bytes)
        records, pos, problem = _decode_records(
            cursor.buf, cursor.pos, cursor.end, limit, self.base_offset, cursor.last_offset,
            self.base_timestamp, LOG_APPEND_TIME if attributes & ATTR_TIMESTAMP_TYPE else CREATE_TIME,
            log_append_time, record_class, prefix)
        cursor.pos = pos
        if records:
            cursor.last_offset = records[-1][len(prefix)]
            cursor.decoded += len(records)
        if problem is None:
            if pos < cursor.end:
                return records, None
            if cursor.decoded == self.record_count:
                cursor.done = True
                return records, None
            problem = "malformed record: batch declares {} records, holds {}".format(
                self.record_count, cursor.decoded)
        # the bad record's offset: right after the last good one (or the base offset)
        cursor.error = self._corrupt(problem, cursor.last_offset + 1)
        cursor.done = True
        return records, cursor.error

    @property
    def records(self) -> Iterator[Record]:
        """A fresh iterator over the records (independent of ``decode_records``' cursor),
        decoding them in chunks as they are reached; the records before a malformed one
        come out before its error is raised."""
        return self._iter_records()

    def _iter_records(self) -> Iterator[Record]:
        cursor = self._open_cursor()
        while not cursor.done:
            records, error = self._decode_next(cursor, Record, (), _ITER_CHUNK)
            yield from records
            if error is not None:
                raise error

    def __iter__(self) -> Iterator[Record]:
        return self.records

    def control_records(self) -> Iterator[ControlRecord]:
        """The decoded markers of a control batch (one per record)."""
        for rec in self.records:
            key = rec.key or b""
            value = rec.value or b""
            if len(key) < 4:
                raise self._corrupt("control record key too short")
            version, ctype = _CONTROL_KEY.unpack_from(key)
            # EndTxnMarker value: version int16, coordinatorEpoch int32 (absent for types
            # other than commit/abort, which Java ignores).
            coordinator_epoch = -1
            if len(value) >= 6:
                _, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
            elif ctype in (0, 1):
                raise self._corrupt("control record value too short")
            yield ControlRecord(rec.offset, rec.timestamp, version, ctype, coordinator_epoch)

    def control_record(self) -> ControlRecord | None:
        """The (first) marker of a control batch, or None if this is not one or it is empty."""
        if not self.attributes & ATTR_CONTROL:
            return None
        for marker in self.control_records():
            return marker
        return None

    def __repr__(self) -> str:
        return ("RecordBatch(base_offset={}, last_offset={}, records={}, codec={}, size={}, "
                "control={}, transactional={})".format(
                    self.base_offset, self.last_offset, self.record_count,
                    codecs.CODEC_NAMES.get(self.compression_type, self.compression_type),
                    self.size_in_bytes, self.is_control_batch, self.is_transactional))
