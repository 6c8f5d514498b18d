"""Record batches: RecordBatch v2, legacy message sets v0/v1, CRC-32C and the builder.

Owns turning a fetch's raw ``records`` bytes into batches and records, and back.

* ``read_batches(data, check_crcs=True, topic=None, partition=None)`` iterates batches
  lazily (``RecordBatch`` for magic 2, ``LegacyBatch`` for magic 0/1); a batch's records
  are decoded only when asked for and only as far as asked: ``records`` iterates
  ``Record`` tuples (decoded in chunks), ``decode_records(record_class, prefix, limit)``
  returns the next ``limit`` (default: all left) as a list with the error of a malformed
  record (if any) instead of raising, and resumes there on the next call.
  ``starts_with_whole_batch(data)`` answers the common case of "is there a whole batch"
  from the first entry's header alone.
* ``crc32c(data, crc=0)``: CRC-32C, incremental like ``zlib.crc32``.
* ``RecordBatchBuilder`` / ``build_batch`` / ``build_control_batch`` and
  ``LegacyMessageSetBuilder`` / ``build_message_set`` write batches.

Errors: corrupt bytes raise ``kproto.errors.CorruptRecordError`` (topic, partition and
offset attached); a missing optional codec package raises ``UnsupportedCodecError``; a
first batch larger than the whole fetch raises ``RecordTooLargeError`` (``batch_size``).
"""

from kproto.records.builder import (LegacyMessageSetBuilder, RecordBatchBuilder, build_batch,
                                    build_control_batch, build_message_set)
from kproto.records.crc32c import crc32c
from kproto.records.default_batch import RecordBatch
from kproto.records.legacy import LegacyBatch
from kproto.records.reader import BatchReader, read_batches, starts_with_whole_batch
from kproto.records.record import (CONTROL_ABORT, CONTROL_COMMIT, CREATE_TIME,
                                   LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, ControlRecord, Record)

__all__ = [
    "read_batches", "starts_with_whole_batch", "BatchReader", "RecordBatch", "LegacyBatch", "Record", "ControlRecord",
    "crc32c", "RecordBatchBuilder", "LegacyMessageSetBuilder", "build_batch",
    "build_control_batch", "build_message_set", "CREATE_TIME", "LOG_APPEND_TIME",
    "NO_TIMESTAMP_TYPE", "CONTROL_ABORT", "CONTROL_COMMIT",
]
