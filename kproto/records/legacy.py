"""Legacy message sets (magic 0 and 1), including compressed wrapper messages.

Owns ``LegacyBatch``: one top-level log entry of a v0/v1 message set, i.e. a single
uncompressed message or a compressed *wrapper* message whose value is itself a message
set (Java's AbstractLegacyRecordBatch). Layout of a log entry::

    offset int64 | messageSize int32 | crc uint32 (zlib CRC-32 of the rest) | magic int8 |
    attributes int8 (codec in bits 0-2, v1: timestamp type in bit 3) |
    [timestamp int64, v1 only] | key bytes (int32 length, -1 null) | value bytes (same)

Inner offsets of a wrapper are absolute in v0 and relative in v1 (KIP-31: the wrapper
carries the absolute offset of the *last* inner message, inner offsets count from 0); a
v1 wrapper at offset 0 (producer-side, unassigned) keeps its inner offsets, and one whose
offset is below the last inner offset is corrupt (as Java's AbstractLegacyRecordBatch).
A v1 wrapper with LogAppendTime overrides the inner timestamps with its own.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Iterator

from kproto import codecs
from kproto.errors import CorruptMessageError, CorruptRecordError
from kproto.records.record import (CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, Record)

__all__ = ["LegacyBatch", "LOG_OVERHEAD", "MIN_MESSAGE_SIZE"]

LOG_OVERHEAD = 12  # offset int64 + messageSize int32
_V0_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# crc + magic + attributes + key length + value length (+ timestamp in v1)
MIN_MESSAGE_SIZE = {0: 14, 1: 22}
ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08

_new_tuple = tuple.__new__


class _Malformed(Exception):
    """Internal: a message's fields do not fit its declared size."""


def _parse_message(buf: bytes, pos: int, end: int) -> tuple[Any, ...]:
    """The fields of the log entry at ``pos`` (which must end at or before ``end``).

    Returns (offset, crc, magic, attributes, timestamp, key, value, entry_end, crc_start).
    """
    if pos + LOG_OVERHEAD + 14 > end:
        raise _Malformed("truncated message")
    offset, size, crc, magic, attributes = _V0_HEAD.unpack_from(buf, pos)
    entry_end = pos + LOG_OVERHEAD + size
    if magic not in (0, 1):
        raise _Malformed("magic {} inside a legacy message set".format(magic))
    if size < MIN_MESSAGE_SIZE[magic] or entry_end > end:
        raise _Malformed("message size {} out of range".format(size))
    p = pos + 18
    if magic == 1:
        (timestamp,) = _I64.unpack_from(buf, p)
        p += 8
    else:
        timestamp = -1
    (klen,) = _I32.unpack_from(buf, p)
    p += 4
    if klen < -1 or p + max(klen, 0) + 4 > entry_end:
        raise _Malformed("bad key length {}".format(klen))
    key = None if klen == -1 else bytes(buf[p:p + klen])
    p += max(klen, 0)
    (vlen,) = _I32.unpack_from(buf, p)
    p += 4
    if vlen < -1 or p + max(vlen, 0) != entry_end:
        raise _Malformed("bad value length {}".format(vlen))
    value = None if vlen == -1 else bytes(buf[p:p + vlen])
    return offset, crc, magic, attributes, timestamp, key, value, entry_end, pos + 16


class LegacyBatch:
    """One v0/v1 log entry: header fields as attributes, records decoded when iterated.

    The fields that only exist in v2 read as Java's defaults (no producer id, not
    transactional, not control). ``check_crcs`` also checks each inner message of a
    compressed wrapper while iterating.
    """

    __slots__ = ("offset", "magic", "crc", "attributes", "timestamp", "size_in_bytes",
                 "topic", "partition", "max_decompressed_size", "check_crcs",
                 "_data", "_start", "_end", "_key", "_value", "_crc_start", "_inner",
                 "_cursor")

    is_transactional = False
    is_control_batch = False
    has_delete_horizon = False
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    partition_leader_epoch = -1
    leader_epoch = -1

    def __init__(self, data: bytes, start: int, end: int, topic: str | None = None,
                 partition: int | None = None,
                 max_decompressed_size: int = codecs.DEFAULT_MAX_SIZE,
                 check_crcs: bool = False) -> None:
        self.topic = topic
        self.partition = partition
        self.max_decompressed_size = max_decompressed_size
        self.check_crcs = check_crcs
        self._data = data
        self._start = start
        self._end = end
        self._inner: list[Any] | None = None
        # decode_records' state: [records, index of the next one, error after them]
        self._cursor: list[Any] | None = None
        self.size_in_bytes = end - start
        try:
            (self.offset, self.crc, self.magic, self.attributes, self.timestamp, self._key,
             self._value, _, self._crc_start) = _parse_message(data, start, end)
        except (_Malformed, struct.error) as exc:
            self.offset = _I64.unpack_from(data, start)[0]
            raise self._corrupt(str(exc)) from exc

    # --- header fields ---------------------------------------------------------------
    @property
    def compression_type(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & ATTR_TIMESTAMP_TYPE else CREATE_TIME

    @property
    def base_timestamp(self) -> int:
        return self.timestamp

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        """The first record's offset (decompresses a wrapper to find it)."""
        if not self.compression_type:
            return self.offset
        inner = self._inner_messages()
        return self._absolute_offsets(inner)[0] if inner else self.offset

    @property
    def record_count(self) -> int:
        return len(self._inner_messages()) if self.compression_type else 1

    # --- validation ------------------------------------------------------------------
    def compute_crc(self) -> int:
        return zlib.crc32(memoryview(self._data)[self._crc_start:self._end])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def ensure_valid(self) -> None:
        computed = self.compute_crc()
        if computed != self.crc:
            raise self._corrupt("CRC-32 mismatch: stored {:#010x}, computed {:#010x}".format(
                self.crc, computed))

    def _corrupt(self, message: str, offset: int | None = None) -> CorruptRecordError:
        offset = self.offset if offset is None else offset
        return CorruptRecordError("message v{} at offset {}: {}".format(
            getattr(self, "magic", "?"), offset, message), topic=self.topic,
            partition=self.partition, offset=offset)

    # --- records ---------------------------------------------------------------------
    def _inner_messages(self) -> list[Any]:
        """Parsed inner messages of a compressed wrapper (decompressed once, cached)."""
        if self._inner is not None:
            return self._inner
        codec = self.compression_type
        if codec not in codecs.CODEC_NAMES:
            raise self._corrupt("unknown compression codec id {}".format(codec))
        if self._value is None:
            raise self._corrupt("compressed wrapper message without a value")
        try:
            buf = codecs.decompress(codec, self._value, max_size=self.max_decompressed_size)
        except CorruptMessageError as exc:
            raise self._corrupt(str(exc)) from exc
        inner = []
        pos = 0
        end = len(buf)
        try:
            while pos < end:
                msg = _parse_message(buf, pos, end)
                if msg[3] & ATTR_COMPRESSION_MASK:
                    raise _Malformed("nested compression")
                if msg[2] != self.magic:
                    raise _Malformed("inner magic {} differs from the wrapper's".format(msg[2]))
                inner.append((msg, buf))
                pos = msg[7]
        except (_Malformed, struct.error) as exc:
            raise self._corrupt("inner message: {}".format(exc)) from exc
        if not inner:
            raise self._corrupt("compressed wrapper message holds no messages")
        self._inner = inner
        return inner

    def _absolute_offsets(self, inner: list[Any]) -> list[int]:
        if self.magic == 0:
            return [msg[0] for msg, _ in inner]
        # v1: relative inner offsets; the wrapper holds the last inner message's offset.
        if self.offset == 0:
            # Wrapper offset 0: a producer's message set before a broker assigned offsets
            # (kafka-python, some librdkafka versions); as in Java, the inner offsets stand.
            return [msg[0] for msg, _ in inner]
        last_inner = inner[-1][0][0]
        if self.offset < last_inner:
            raise self._corrupt("wrapper offset {} is less than the last inner offset {}".format(
                self.offset, last_inner))
        base = self.offset - last_inner
        return [base + msg[0] for msg, _ in inner]

    @property
    def records(self) -> Iterator[Record]:
        return self._iter_records()

    def __iter__(self) -> Iterator[Record]:
        return self._iter_records()

    def decode_records(self, record_class: type = Record, prefix: tuple[Any, ...] = (),
                       limit: int | None = None) -> tuple[list[Any], CorruptRecordError | None]:
        """The next records (all that are left, or at most ``limit``), as
        ``RecordBatch.decode_records``: ``(records, None)`` or ``(the records before the
        failure, its CorruptRecordError)``; successive calls continue where the last
        stopped. A compressed wrapper is decompressed and its inner messages parsed whole
        on the first call (a legacy entry is small: one message, or one wrapper); only the
        ``record_class`` tuples are built per call."""
        cursor = self._cursor
        if cursor is None:
            records: list[Any] = []
            error: CorruptRecordError | None = None
            last = -1 << 63
            try:
                for record in self._iter_records():
                    if record[0] <= last:  # only a corrupt v0 wrapper can hold such offsets
                        raise self._corrupt("inner offsets out of order", record[0])
                    last = record[0]
                    records.append(record)
            except CorruptRecordError as exc:
                error = exc
            cursor = self._cursor = [records, 0, error]
        records, index, error = cursor
        stop = len(records) if limit is None else min(len(records), index + limit)
        cursor[1] = stop
        out: list[Any] = [_new_tuple(record_class, prefix + record) for record in records[index:stop]]
        return out, error if stop == len(records) else None

    @property
    def decoding_done(self) -> bool:
        """Whether ``decode_records`` has handed out every record (or reached the error)."""
        cursor = self._cursor
        return cursor is not None and cursor[1] == len(cursor[0])

    def _iter_records(self) -> Iterator[Record]:
        ts_type = self.timestamp_type
        if not self.compression_type:
            yield self._record(self.offset, self.timestamp, ts_type, self._key, self._value,
                               self.crc)
            return
        inner = self._inner_messages()
        offsets = self._absolute_offsets(inner)
        override = self.timestamp if ts_type == LOG_APPEND_TIME else None
        for (msg, buf), offset in zip(inner, offsets):
            if self.check_crcs:
                computed = zlib.crc32(memoryview(buf)[msg[8]:msg[7]])
                if computed != msg[1]:
                    raise self._corrupt("inner message CRC-32 mismatch", offset)
            yield self._record(offset, msg[4] if override is None else override, ts_type,
                               msg[5], msg[6], msg[1])

    @staticmethod
    def _record(offset: int, timestamp: int, ts_type: int, key: bytes | None,
                value: bytes | None, crc: int) -> Record:
        return _new_tuple(Record, (offset, timestamp, ts_type, key, value, (), crc,
                                   -1 if key is None else len(key),
                                   -1 if value is None else len(value), -1))

    def control_record(self) -> None:
        """Legacy message sets have no control batches."""
        return None

    def __repr__(self) -> str:
        return "LegacyBatch(magic={}, offset={}, codec={}, size={})".format(
            self.magic, self.offset,
            codecs.CODEC_NAMES.get(self.compression_type, self.compression_type),
            self.size_in_bytes)
