"""Checking the CRC-32C of many small record batches in one pass: ``BatchCrcCheck``.

Why: a pure-Python CRC-32C call costs several microseconds before it reads a byte (see
``crc32c``), so a fetch of 1,000 partitions holding a few small batches each spends more
on those fixed costs than on the bytes. One CRC over all of them costs the bytes only.

How: a batch's CRC covers its bytes from the attributes (byte 21) to its end. Without the
initial and final inversions ("raw"), the CRC of a message followed by its own CRC
(reflected: least significant byte first) is zero. CRC-32C's initial inversion equals
inverting the message's first four bytes, its final inversion inverting the stored value.
So each batch contributes ``region (first four bytes inverted) + stored CRC inverted,
little-endian`` to a stream, and the stream's raw CRC is the sum, over batches, of each
piece's remainder shifted by the bytes after it. It is zero when every batch is valid.
One corrupt batch always makes it non-zero, as its own check would: its remainder is
non-zero, and a shift (multiplying by a power of x) cannot make it divisible by the
polynomial, whose constant term is 1. Two or more corrupt batches could cancel out only
with probability 2^-32 (that of any one CRC passing corrupt data).

When the combined check fails, nothing is marked verified: the reader's per-batch checks
then find the corrupt batch and report it exactly as before. Large batches are left to
those per-batch checks (their fixed cost is negligible, and copying them into the stream
would only add work); so are legacy (magic 0/1) entries, which use CRC-32 (zlib's, C).

Sliced (``BatchCrcCheck(max_batch_bytes=None)``): batches of every size are added and
nothing is computed until ``step(budget)``, which feeds at most ``budget`` bytes of the
stream to the CRC (a large batch's bytes a slice at a time, as the CRC is incremental, with
no copy of them). The event-loop shell checks buffered fetches that way, a slice per turn
of the loop, so no callback holds the loop for a whole batch's CRC (a 1 MiB batch costs
~3-4 ms of pure Python).
"""

from __future__ import annotations

import struct

from kproto.records.crc32c import crc32c

__all__ = ["BatchCrcCheck", "SMALL_BATCH_BYTES"]

#: Batches up to this size go into the combined check; larger ones are checked alone.
SMALL_BATCH_BYTES = 32 * 1024
# The stream is checked (and its memory released) whenever it holds this many bytes.
_FLUSH_BYTES = 1 << 20
# baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32
_HEAD = struct.Struct(">qiibI")
_HEAD_SIZE = _HEAD.size  # 21: where the CRC's coverage starts
_LOG_OVERHEAD = 12
_MIN_V2_LENGTH = 61 - _LOG_OVERHEAD  # a v2 batch header holds at least this after length
_INVERT = 0xFFFFFFFF


class BatchCrcCheck:
    """Collects small v2 batches from any number of partitions' fetched bytes
    (``add``), then checks every CRC among them at once (``ok``)."""

    __slots__ = ("_pieces", "_next", "_size", "_raw", "_max_batch", "_flush_at", "batches")

    def __init__(self, max_batch_bytes: int | None = SMALL_BATCH_BYTES) -> None:
        """``max_batch_bytes``: the largest batch taken (None: all, and the check sliced:
        no CRC work before ``step``; see the module docstring)."""
        self._pieces: list[bytes | memoryview] = []
        self._next = 0  # the first piece not yet fed to the CRC (sliced checks)
        self._size = 0  # bytes of the pieces not yet fed
        self._raw = 0  # the stream's raw CRC register over what was flushed
        self._max_batch = (1 << 31) if max_batch_bytes is None else max_batch_bytes
        self._flush_at = (1 << 62) if max_batch_bytes is None else _FLUSH_BYTES
        self.batches = 0  # how many batches were added

    def add(self, data: bytes | memoryview) -> frozenset[int]:
        """Queue ``data``'s whole v2 batches (up to the largest size taken); return their
        start positions.

        The walk stops at the first entry that is cut off, not a v2 batch, or malformed:
        the reader deals with those (and with everything after them) as it always does.
        The positions are verified only if ``ok()`` later returns True.
        """
        view = data if type(data) is memoryview else memoryview(data)
        total = len(view)
        pos = 0
        starts = []
        pieces = self._pieces
        size = self._size
        unpack = _HEAD.unpack_from
        max_batch = self._max_batch
        while total - pos >= _HEAD_SIZE:
            _, length, _, magic, crc = unpack(view, pos)
            end = pos + _LOG_OVERHEAD + length
            if magic != 2 or length < _MIN_V2_LENGTH or end > total:
                break
            if length <= max_batch:
                body = pos + _HEAD_SIZE
                head = int.from_bytes(view[body:body + 4], "little") ^ _INVERT
                pieces.append(head.to_bytes(4, "little"))
                pieces.append(view[body + 4:end])
                pieces.append((crc ^ _INVERT).to_bytes(4, "little"))
                size += end - body + 4
                starts.append(pos)
            pos = end
        self._size = size
        self.batches += len(starts)
        if size >= self._flush_at:
            self._flush()
        return frozenset(starts)

    def _flush(self) -> None:
        pieces = self._pieces
        if self._next:
            pieces = pieces[self._next:]
        if pieces:
            # crc32c(data, c) starts from register c ^ 0xFFFFFFFF and returns the final
            # register ^ 0xFFFFFFFF: passing and taking the raw register through it.
            self._raw = crc32c(b"".join(pieces), self._raw ^ _INVERT) ^ _INVERT
        self._pieces = []
        self._next = 0
        self._size = 0

    def step(self, budget: int) -> bool:
        """Feed at most ``budget`` (> 0) bytes of the queued stream to the CRC; whether
        any are left. Small pieces are joined (one CRC call for many batches), a large
        one is cut (a memoryview slice: no copy of the batch itself)."""
        pieces = self._pieces
        i = self._next
        count = len(pieces)
        group: list[bytes | memoryview] = []
        taken = 0
        while i < count and taken < budget:
            piece = pieces[i]
            room = budget - taken
            if len(piece) > room:
                view = piece if type(piece) is memoryview else memoryview(piece)
                group.append(view[:room])
                pieces[i] = view[room:]
                taken = budget
                break
            group.append(piece)
            taken += len(piece)
            i += 1
        if group:
            data = group[0] if len(group) == 1 else b"".join(group)
            self._raw = crc32c(data, self._raw ^ _INVERT) ^ _INVERT
        self._size -= taken
        if i >= count:
            self._pieces = []
            self._next = 0
            return False
        self._next = i
        return True

    def ok(self) -> bool:
        """Whether every batch added holds its CRC (see the module docstring)."""
        self._flush()
        return self._raw == 0
