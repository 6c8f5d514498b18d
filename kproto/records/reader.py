"""Splitting a fetch's ``records`` bytes into batches: ``read_batches``.

Owns ``BatchReader`` (what ``read_batches`` returns): it walks the log entries of one
partition's fetched bytes, yielding a ``RecordBatch`` (magic 2) or ``LegacyBatch`` (magic
0/1) per entry without decoding any record. Every entry starts with ``offset int64 |
length int32``, and the magic byte sits at the same place (byte 16) in all three formats.

The end of the data (Java's ByteBufferLogInputStream and the consumer's CompletedFetch):

* a partial entry at the end is normal (the broker cuts the response at the byte limit):
  iteration stops, ``truncated`` is True and ``valid_bytes`` says how much was whole;
* if the *first* entry is already larger than all the data, no progress is possible:
  iteration raises ``RecordTooLargeError`` whose ``batch_size`` is the size needed, so the
  consumer can tell the user to raise ``max_partition_fetch_bytes``.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator, Union

from kproto import codecs
from kproto.errors import CorruptRecordError, RecordTooLargeError
from kproto.records.default_batch import HEADER_SIZE, RecordBatch
from kproto.records.legacy import LOG_OVERHEAD, MIN_MESSAGE_SIZE, LegacyBatch

__all__ = ["read_batches", "starts_with_whole_batch", "BatchReader", "Batch"]

Batch = Union[RecordBatch, LegacyBatch]

_ENTRY_HEAD = struct.Struct(">qi")
_MAGIC_POS = 16
# The smallest entry of any format (a v0 message), so the magic byte is always present.
_MIN_ENTRY = MIN_MESSAGE_SIZE[0]


class BatchReader:
    """Iterates the batches of one partition's fetched bytes (see ``read_batches``).

    Attributes after (or during) iteration: ``valid_bytes`` (bytes of whole entries read
    so far), ``truncated`` (a partial entry was found at the end).
    """

    __slots__ = ("data", "check_crcs", "topic", "partition", "max_decompressed_size",
                 "verified", "valid_bytes", "truncated")

    def __init__(self, data: bytes | bytearray | memoryview, *, check_crcs: bool = True,
                 topic: str | None = None, partition: int | None = None,
                 max_decompressed_size: int = codecs.DEFAULT_MAX_SIZE,
                 verified: frozenset[int] = frozenset()) -> None:
        # One copy of the whole fetch into ``bytes``: indexing and slicing bytes is the
        # fastest thing the record loop can do, and keys/values become bytes anyway.
        self.data = data if type(data) is bytes else bytes(data)
        self.check_crcs = check_crcs
        self.topic = topic
        self.partition = partition
        self.max_decompressed_size = max_decompressed_size
        self.verified = verified
        self.valid_bytes = 0
        self.truncated = False

    def _corrupt(self, message: str, offset: int) -> CorruptRecordError:
        return CorruptRecordError(message, topic=self.topic, partition=self.partition,
                                  offset=offset)

    def __iter__(self) -> Iterator[Batch]:
        data = self.data
        total = len(data)
        pos = 0
        check = self.check_crcs
        topic = self.topic
        partition = self.partition
        max_size = self.max_decompressed_size
        verified = self.verified
        while pos < total:
            if total - pos < LOG_OVERHEAD:
                self.truncated = True  # not even the entry's length is here
                return
            offset, length = _ENTRY_HEAD.unpack_from(data, pos)
            if length < _MIN_ENTRY:
                raise self._corrupt("log entry size {} below the minimum {}".format(
                    length, _MIN_ENTRY), offset)
            end = pos + LOG_OVERHEAD + length
            if end > total:
                self.truncated = True
                if pos == 0:
                    self._too_large(end)
                return
            magic = data[pos + _MAGIC_POS]
            if magic == 2:
                if length < HEADER_SIZE - LOG_OVERHEAD:
                    raise self._corrupt("record batch length {} below the minimum {}".format(
                        length, HEADER_SIZE - LOG_OVERHEAD), offset)
            elif magic == 1:
                if length < MIN_MESSAGE_SIZE[1]:
                    raise self._corrupt("message size {} below the minimum {}".format(
                        length, MIN_MESSAGE_SIZE[1]), offset)
            elif magic != 0:
                raise self._corrupt("unknown magic byte {}".format(magic), offset)
            if magic == 2:
                batch: Batch = RecordBatch(data, pos, end, topic, partition, max_size)
            else:
                batch = LegacyBatch(data, pos, end, topic, partition, max_size, check)
            if check and pos not in verified:
                batch.ensure_valid()
            pos = end
            self.valid_bytes = pos
            yield batch

    def _too_large(self, needed: int) -> None:
        exc = RecordTooLargeError(
            "the first record batch needs {} bytes but the fetch returned only {}; raise "
            "max_partition_fetch_bytes (or fetch_max_bytes) to at least {}".format(
                needed, len(self.data), needed))
        exc.batch_size = needed  # type: ignore[attr-defined]
        exc.fetched_size = len(self.data)  # type: ignore[attr-defined]
        exc.topic = self.topic  # type: ignore[attr-defined]
        exc.partition = self.partition  # type: ignore[attr-defined]
        raise exc

    def records(self) -> Iterator[Any]:
        """Every record of every batch, in order (control batches included as records)."""
        for batch in self:
            yield from batch.records


def starts_with_whole_batch(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` starts with a whole v2 record batch, read from its entry header alone.

    True only where iterating ``read_batches(data)`` would yield a first batch without
    raising (CRCs aside, which the iteration checks when asked); False says nothing: the
    data may be empty, truncated, too large, of an older format or corrupt, which the
    reader tells. The consumer asks this of every partition of every response (one
    ``struct`` read, where a reader and a batch cost several objects).
    """
    if len(data) < HEADER_SIZE:
        return False
    length = _ENTRY_HEAD.unpack_from(data, 0)[1]
    return (data[_MAGIC_POS] == 2 and length >= HEADER_SIZE - LOG_OVERHEAD
            and LOG_OVERHEAD + length <= len(data))


def read_batches(data: bytes | bytearray | memoryview, *, check_crcs: bool = True,
                 topic: str | None = None, partition: int | None = None,
                 max_decompressed_size: int = codecs.DEFAULT_MAX_SIZE,
                 verified: frozenset[int] = frozenset()) -> BatchReader:
    """The batches of one partition's fetched ``records`` bytes, iterated lazily.

    ``check_crcs`` verifies each batch's CRC when it is reached (the consumer's
    ``check_crcs``), except the batches starting at a position in ``verified`` (checked
    already, e.g. by a ``BatchCrcCheck``); ``topic``/``partition`` label errors;
    ``max_decompressed_size`` bounds one batch's decompressed size.
    """
    return BatchReader(data, check_crcs=check_crcs, topic=topic, partition=partition,
                       max_decompressed_size=max_decompressed_size, verified=verified)
