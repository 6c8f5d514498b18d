"""The decoded record and control-record value types, shared by v2 batches and legacy sets.

Owns ``Record`` (one record as the consumer sees it) and ``ControlRecord`` (a decoded
transaction marker), plus the timestamp-type and control-type constants.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

__all__ = [
    "Record", "ControlRecord", "CREATE_TIME", "LOG_APPEND_TIME", "NO_TIMESTAMP_TYPE",
    "CONTROL_ABORT", "CONTROL_COMMIT",
]

# Timestamp types, as kafka-python's ConsumerRecord.timestamp_type reports them
# (Java's TimestampType: NO_TIMESTAMP_TYPE is -1 for magic 0).
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

# Control record types (the key's ``type`` field).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


class Record(NamedTuple):
    """One record.

    The fields are the tail of kafka-python's ``ConsumerRecord``, in its order, so the
    consumer builds one with ``ConsumerRecord(topic, partition, leader_epoch, *record)``.
    ``headers`` is a tuple of ``(str, bytes | None)`` pairs, ``()`` when there are none
    (kafka-python gives a list: a tuple of immutable fields lets Python's garbage collector
    stop tracking the record, which with a list per record took ~a quarter of decoding
    time in collections); the ``serialized_*_size`` fields are
    -1 when the key/value is null or there are no headers (kafka-python's convention).
    ``checksum`` is the legacy message CRC (None for v2 records, which have none).
    Decoders build these with ``tuple.__new__(Record, (...))`` to skip ``__new__``.
    """

    offset: int
    timestamp: int
    timestamp_type: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple[tuple[str, Optional[bytes]], ...]
    checksum: Optional[int]
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


class ControlRecord(NamedTuple):
    """A transaction marker of a control batch (Java's EndTransactionMarker + ControlRecordType).

    ``type`` is ``CONTROL_ABORT`` (0) or ``CONTROL_COMMIT`` (1); other values are kept as
    they are (Java treats them as UNKNOWN and skips the batch).
    """

    offset: int
    timestamp: int
    version: int
    type: int
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.type == CONTROL_COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == CONTROL_ABORT


def headers_size(headers: Any) -> int:
    """kafka-python's serialized_header_size of a header list (-1 when empty)."""
    if not headers:
        return -1
    return sum(len(k.encode("utf-8")) + (len(v) if v is not None else 0) for k, v in headers)
