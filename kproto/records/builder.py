"""Writing record batches: v2 batches (every codec, control batches, transactional flags,
headers) and legacy v0/v1 message sets.

Owns ``RecordBatchBuilder`` (Java's MemoryRecordsBuilder for magic 2),
``LegacyMessageSetBuilder`` (magic 0/1, with compressed wrapper messages), and the
shortcuts ``build_batch``, ``build_control_batch`` and ``build_message_set``. Used by the
tests, the fuzzer and the minimal produce helper; not on the consumer's hot path, so it
favours clarity over speed.
"""

from __future__ import annotations

import struct
import time
import zlib
from typing import Any, Iterable, Optional, Sequence

from kproto import codecs
from kproto.errors import IllegalArgumentError
from kproto.records.crc32c import crc32c
from kproto.records.default_batch import (ATTR_CONTROL, ATTR_DELETE_HORIZON,
                                          ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL,
                                          CRC_START, HEADER_SIZE)
from kproto.records.record import CONTROL_ABORT, CONTROL_COMMIT, LOG_APPEND_TIME

__all__ = ["RecordBatchBuilder", "LegacyMessageSetBuilder", "build_batch",
           "build_control_batch", "build_message_set", "encode_varint"]

Headers = Sequence[tuple[str, Optional[bytes]]]


def encode_varint(value: int) -> bytes:
    """Zigzag varint (Kafka's ByteUtils.writeVarlong) of a signed 64-bit value."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _bytes_field(b: Optional[bytes]) -> bytes:
    if b is None:
        return encode_varint(-1)
    return encode_varint(len(b)) + bytes(b)


def _now_ms() -> int:
    return int(time.time() * 1000)


class RecordBatchBuilder:
    """Builds one v2 record batch; ``append`` records then ``build()`` the bytes."""

    def __init__(self, *, base_offset: int = 0, compression_type: int = codecs.NONE,
                 timestamp_type: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, is_transactional: bool = False,
                 is_control_batch: bool = False, partition_leader_epoch: int = -1,
                 delete_horizon_ms: int | None = None, log_append_time: int | None = None,
                 xerial_snappy: bool = True) -> None:
        if compression_type not in codecs.CODEC_NAMES:
            raise IllegalArgumentError("unknown compression type {}".format(compression_type))
        self.base_offset = base_offset
        self.compression_type = compression_type
        self.timestamp_type = timestamp_type
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control_batch = is_control_batch
        self.partition_leader_epoch = partition_leader_epoch
        self.delete_horizon_ms = delete_horizon_ms
        # With LogAppendTime the broker stores its append time as max_timestamp.
        self.log_append_time = log_append_time
        self.xerial_snappy = xerial_snappy
        self._records: list[tuple[int, int, Optional[bytes], Optional[bytes], Headers]] = []

    def append(self, key: Optional[bytes], value: Optional[bytes], *,
               timestamp: int | None = None, headers: Headers = (),
               offset: int | None = None) -> int:
        """Add a record; returns its offset (the next one unless ``offset`` is given)."""
        if offset is None:
            offset = self._records[-1][0] + 1 if self._records else self.base_offset
        elif self._records and offset <= self._records[-1][0]:
            raise IllegalArgumentError("offsets must increase")
        elif offset < self.base_offset:
            raise IllegalArgumentError("offset below base_offset")
        self._records.append((offset, _now_ms() if timestamp is None else timestamp,
                              key, value, tuple(headers)))
        return offset

    def append_control(self, control_type: int, *, coordinator_epoch: int = 0,
                       timestamp: int | None = None, offset: int | None = None) -> int:
        """Add a transaction marker (CONTROL_COMMIT or CONTROL_ABORT) to a control batch."""
        if not self.is_control_batch:
            raise IllegalArgumentError("control records go in a control batch")
        key = struct.pack(">hh", 0, control_type)
        value = struct.pack(">hi", 0, coordinator_epoch)
        return self.append(key, value, timestamp=timestamp, offset=offset)

    def _attributes(self) -> int:
        attrs = self.compression_type
        if self.timestamp_type == LOG_APPEND_TIME:
            attrs |= ATTR_TIMESTAMP_TYPE
        if self.is_transactional:
            attrs |= ATTR_TRANSACTIONAL
        if self.is_control_batch:
            attrs |= ATTR_CONTROL
        if self.delete_horizon_ms is not None:
            attrs |= ATTR_DELETE_HORIZON
        return attrs

    def build(self) -> bytes:
        recs = self._records
        if recs:
            first_ts = min(r[1] for r in recs)
            max_ts = max(r[1] for r in recs)
            last_delta = recs[-1][0] - self.base_offset
        else:
            first_ts = max_ts = -1
            last_delta = -1
        # Java: with a delete horizon, baseTimestamp holds it and deltas are relative to it.
        base_ts = self.delete_horizon_ms if self.delete_horizon_ms is not None else first_ts
        if self.timestamp_type == LOG_APPEND_TIME and self.log_append_time is not None:
            max_ts = self.log_append_time
        body = bytearray()
        for offset, ts, key, value, headers in recs:
            rec = bytearray(b"\x00")  # attributes
            rec += encode_varint(ts - base_ts)
            rec += encode_varint(offset - self.base_offset)
            rec += _bytes_field(key)
            rec += _bytes_field(value)
            rec += encode_varint(len(headers))
            for hkey, hvalue in headers:
                rec += _bytes_field(hkey.encode("utf-8"))
                rec += _bytes_field(hvalue)
            body += encode_varint(len(rec))
            body += rec
        payload = codecs.compress(self.compression_type, bytes(body), xerial=self.xerial_snappy)
        length = HEADER_SIZE - 12 + len(payload)
        after_crc = struct.pack(">hiqqqhii", self._attributes(), last_delta, base_ts, max_ts,
                                self.producer_id, self.producer_epoch, self.base_sequence,
                                len(recs)) + payload
        crc = crc32c(after_crc)
        head = struct.pack(">qiibI", self.base_offset, length, self.partition_leader_epoch, 2,
                           crc)
        assert len(head) == CRC_START
        return head + after_crc


def build_batch(records: Iterable[tuple[Any, ...]], **kwargs) -> bytes:
    """A v2 batch of ``(key, value)`` or ``(key, value, headers)`` or
    ``(key, value, headers, timestamp)`` tuples; kwargs go to RecordBatchBuilder."""
    builder = RecordBatchBuilder(**kwargs)
    for rec in records:
        key, value = rec[0], rec[1]
        headers = rec[2] if len(rec) > 2 else ()
        timestamp = rec[3] if len(rec) > 3 else None
        builder.append(key, value, headers=headers, timestamp=timestamp)
    return builder.build()


def build_control_batch(*, base_offset: int, producer_id: int, producer_epoch: int,
                        commit: bool, coordinator_epoch: int = 0,
                        timestamp: int | None = None, partition_leader_epoch: int = -1) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker."""
    builder = RecordBatchBuilder(base_offset=base_offset, producer_id=producer_id,
                                 producer_epoch=producer_epoch, is_transactional=True,
                                 is_control_batch=True,
                                 partition_leader_epoch=partition_leader_epoch)
    builder.append_control(CONTROL_COMMIT if commit else CONTROL_ABORT,
                           coordinator_epoch=coordinator_epoch, timestamp=timestamp)
    return builder.build()


class LegacyMessageSetBuilder:
    """Builds a v0/v1 message set; compressed sets become one wrapper message."""

    def __init__(self, *, magic: int, base_offset: int = 0,
                 compression_type: int = codecs.NONE, timestamp_type: int = 0,
                 log_append_time: int | None = None) -> None:
        if magic not in (0, 1):
            raise IllegalArgumentError("legacy message sets have magic 0 or 1")
        if compression_type not in (codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4):
            raise IllegalArgumentError("codec {} needs magic 2".format(compression_type))
        self.magic = magic
        self.base_offset = base_offset
        self.compression_type = compression_type
        self.timestamp_type = timestamp_type
        self.log_append_time = log_append_time
        self._records: list[tuple[Optional[bytes], Optional[bytes], int]] = []

    def append(self, key: Optional[bytes], value: Optional[bytes], *,
               timestamp: int | None = None) -> int:
        self._records.append((key, value, _now_ms() if timestamp is None else timestamp))
        return self.base_offset + len(self._records) - 1

    def _message(self, offset: int, attributes: int, timestamp: int,
                 key: Optional[bytes], value: Optional[bytes]) -> bytes:
        body = struct.pack(">bb", self.magic, attributes)
        if self.magic == 1:
            body += struct.pack(">q", timestamp)
        for field in (key, value):
            body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
        crc = zlib.crc32(body)
        return struct.pack(">qiI", offset, len(body) + 4, crc) + body

    def build(self) -> bytes:
        ts_attr = ATTR_TIMESTAMP_TYPE if (self.magic == 1 and
                                          self.timestamp_type == LOG_APPEND_TIME) else 0
        if self.compression_type == codecs.NONE:
            return b"".join(
                self._message(self.base_offset + i, ts_attr, ts, key, value)
                for i, (key, value, ts) in enumerate(self._records))
        if not self._records:
            return b""
        # Inner offsets: absolute for v0, relative (0..n-1) for v1.
        inner = b"".join(
            self._message(i if self.magic == 1 else self.base_offset + i, 0, ts, key, value)
            for i, (key, value, ts) in enumerate(self._records))
        payload = codecs.compress(self.compression_type, inner,
                                  legacy_lz4=self.magic == 0)
        last = self.base_offset + len(self._records) - 1
        wrapper_ts = max(ts for _, _, ts in self._records)
        if ts_attr and self.log_append_time is not None:
            wrapper_ts = self.log_append_time
        return self._message(last, self.compression_type | ts_attr, wrapper_ts, None, payload)


def build_message_set(records: Iterable[tuple[Any, ...]], *, magic: int, **kwargs) -> bytes:
    """A v0/v1 message set of ``(key, value)`` or ``(key, value, timestamp)`` tuples."""
    builder = LegacyMessageSetBuilder(magic=magic, **kwargs)
    for rec in records:
        builder.append(rec[0], rec[1], timestamp=rec[2] if len(rec) > 2 else None)
    return builder.build()
