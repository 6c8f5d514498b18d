"""Kafka wire primitives: readers and writers for every schema type.

Readers take ``(mv, pos)`` (``mv`` a ``memoryview`` of unsigned bytes) and return
``(value, new_pos)``; writers append to a ``bytearray``. Every length read from the wire is
checked against the bytes left *before* anything is allocated, so a hostile 2^31 length in a
20-byte buffer fails at once. Readers raise ``DecodeFailure`` (reason + byte offset); the
decode entry point (``kproto.protocol.base``) turns it into ``kproto.errors.CorruptMessageError``
naming the API and version, because only it knows them.

Classic forms use fixed-width lengths (int16 for strings, int32 for bytes and arrays, -1 for
null); compact forms (flexible versions) use an unsigned varint holding ``length + 1`` (0 for
null). Tagged fields are a varint count followed by ``(varint tag, varint size, bytes)``.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Callable, Iterable

__all__ = [
    "DecodeFailure", "INT8", "INT16", "INT32", "INT64", "UINT16", "UINT32", "FLOAT64", "BOOL",
    "ZERO_UUID",
    "read_int8", "read_int16", "read_int32", "read_int64", "read_uint16", "read_uint32",
    "read_float64", "read_bool", "read_uuid", "read_uvarint", "read_varint", "read_varlong",
    "read_string", "read_nullable_string", "read_compact_string", "read_compact_nullable_string",
    "read_bytes", "read_nullable_bytes", "read_compact_bytes", "read_compact_nullable_bytes",
    "read_records", "read_compact_records", "read_array_length", "read_compact_array_length",
    "read_array", "read_compact_array", "read_tagged_fields", "check_count",
    "write_int8", "write_int16", "write_int32", "write_int64", "write_uint16", "write_uint32",
    "write_float64", "write_bool", "write_uuid", "write_uvarint", "write_varint", "write_varlong",
    "write_string", "write_nullable_string", "write_compact_string",
    "write_compact_nullable_string", "write_bytes", "write_nullable_bytes",
    "write_compact_bytes", "write_compact_nullable_bytes", "write_array", "write_compact_array",
    "write_tagged_fields", "uvarint_size",
]


class DecodeFailure(Exception):
    """Bytes could not be decoded at ``offset``; internal, translated at the decode entry."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(reason, offset)
        self.reason = reason
        self.offset = offset


INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")
ZERO_UUID = uuid.UUID(int=0)

_u16 = INT16.unpack_from
_u32 = INT32.unpack_from
_UUID = uuid.UUID
_SAFE_UNKNOWN = uuid.SafeUUID.unknown
_u_qq = struct.Struct(">QQ").unpack_from
_new_object = object.__new__
_set_slot = object.__setattr__


def _need(mv: memoryview, pos: int, n: int, what: str) -> None:
    if n > len(mv) - pos:
        raise DecodeFailure("{} of {} bytes but only {} left".format(what, n, len(mv) - pos), pos)


def check_count(mv: memoryview, pos: int, count: int, min_size: int) -> None:
    """Reject an array count whose elements (``min_size`` bytes or more each) cannot fit."""
    if count * min_size > len(mv) - pos:
        raise DecodeFailure("array of {} elements cannot fit in {} bytes".format(
            count, len(mv) - pos), pos)


# --- fixed width -----------------------------------------------------------------------

def _fixed_reader(s: struct.Struct) -> Callable[[memoryview, int], tuple[Any, ...]]:
    unpack, size = s.unpack_from, s.size

    def read(mv: memoryview, pos: int) -> tuple[Any, ...]:
        if size > len(mv) - pos:
            raise DecodeFailure("truncated: {} bytes needed".format(size), pos)
        return unpack(mv, pos)[0], pos + size
    return read


read_int8 = _fixed_reader(INT8)
read_int16 = _fixed_reader(INT16)
read_int32 = _fixed_reader(INT32)
read_int64 = _fixed_reader(INT64)
read_uint16 = _fixed_reader(UINT16)
read_uint32 = _fixed_reader(UINT32)
read_float64 = _fixed_reader(FLOAT64)
read_bool = _fixed_reader(BOOL)


def _uuid_from_slots(value: int) -> uuid.UUID:
    # uuid.UUID(int=...) runs ~1 us of argument checks in Python; a FetchResponse has one
    # uuid per topic. Build it as the uuid module itself does (it is immutable through
    # __setattr__, so object.__setattr__ on its slots), when the slots are the known ones.
    u = _new_object(_UUID)
    _set_slot(u, "int", value)
    _set_slot(u, "is_safe", _SAFE_UNKNOWN)
    return u


def _uuid_from_init(value: int) -> uuid.UUID:
    return _UUID(int=value)


_uuid_from_int = (_uuid_from_slots if {"int", "is_safe"} <= set(getattr(_UUID, "__slots__", ()))
                  else _uuid_from_init)


def read_uuid(mv: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(mv):
        raise DecodeFailure("truncated uuid", pos)
    hi, lo = _u_qq(mv, pos)
    return _uuid_from_int((hi << 64) | lo), end


def _fixed_writer(s: struct.Struct) -> Callable[[bytearray, object], None]:
    pack = s.pack

    def write(out: bytearray, value: object) -> None:
        out += pack(value)
    return write


write_int8 = _fixed_writer(INT8)
write_int16 = _fixed_writer(INT16)
write_int32 = _fixed_writer(INT32)
write_int64 = _fixed_writer(INT64)
write_uint16 = _fixed_writer(UINT16)
write_uint32 = _fixed_writer(UINT32)
write_float64 = _fixed_writer(FLOAT64)
write_bool = _fixed_writer(BOOL)


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes


# --- varints ---------------------------------------------------------------------------

def _read_unsigned(mv: memoryview, pos: int, max_shift: int, max_value: int,
                   what: str) -> tuple[int, int]:
    start = pos
    result = 0
    shift = 0
    end = len(mv)
    while True:
        if pos >= end:
            raise DecodeFailure("truncated " + what, start)
        b = mv[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > max_value:
                raise DecodeFailure(what + " out of range", start)
            return result, pos
        shift += 7
        if shift > max_shift:
            raise DecodeFailure("invalid {} (more than {} bytes)".format(
                what, max_shift // 7 + 1), start)


def read_uvarint(mv: memoryview, pos: int) -> tuple[int, int]:
    """Unsigned varint of at most 5 bytes (32 bits), as Kafka's ByteUtils.readUnsignedVarint."""
    return _read_unsigned(mv, pos, 28, 0xFFFFFFFF, "varint")


def _read_uvarlong(mv: memoryview, pos: int) -> tuple[int, int]:
    return _read_unsigned(mv, pos, 63, 0xFFFFFFFFFFFFFFFF, "varlong")


def read_varint(mv: memoryview, pos: int) -> tuple[int, int]:
    """Signed (zig-zag) varint."""
    raw, pos = read_uvarint(mv, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(mv: memoryview, pos: int) -> tuple[int, int]:
    """Signed (zig-zag) 64-bit varint."""
    raw, pos = _read_uvarlong(mv, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError("unsigned varint out of range: {}".format(value))
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_size(value: int) -> int:
    size = 1
    while value > 0x7F:
        value >>= 7
        size += 1
    return size


def write_varint(out: bytearray, value: int) -> None:
    if value < -0x80000000 or value > 0x7FFFFFFF:
        raise ValueError("varint out of range: {}".format(value))
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    if value < -(1 << 63) or value >= (1 << 63):
        raise ValueError("varlong out of range: {}".format(value))
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


# --- strings, bytes, records -------------------------------------------------------------

def _text(mv: memoryview, pos: int, n: int) -> str:
    try:
        return str(mv[pos:pos + n], "utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeFailure("invalid UTF-8 in string", pos + exc.start) from None


def _classic_length(mv: memoryview, pos: int, unpack: Callable[..., Any], width: int,
                    what: str) -> tuple[int, int]:
    """An int16/int32 length (-1 for null), checked against the bytes that follow it."""
    if pos + width > len(mv):
        raise DecodeFailure("truncated {} length".format(what), pos)
    n = unpack(mv, pos)[0]
    if n < -1:
        raise DecodeFailure("negative {} length {}".format(what, n), pos)
    if n > 0:
        _need(mv, pos + width, n, what)
    return n, pos + width


def _compact_length(mv: memoryview, pos: int, what: str) -> tuple[int, int]:
    """A varint ``length + 1`` (0 for null, returned as -1), checked against the bytes left."""
    n, pos = read_uvarint(mv, pos)
    n -= 1
    if n > 0:
        _need(mv, pos, n, what)
    return n, pos


def _required(reader: Callable[[memoryview, int], tuple[Any, ...]], what: str
              ) -> Callable[[memoryview, int], tuple[Any, ...]]:
    """The non-nullable form of a nullable reader: null on the wire is corrupt."""
    def read(mv: memoryview, pos: int) -> tuple[Any, ...]:
        value, new_pos = reader(mv, pos)
        if value is None:
            raise DecodeFailure("null in non-nullable " + what, pos)
        return value, new_pos
    read.__name__ = reader.__name__.replace("nullable_", "")
    return read


def read_nullable_string(mv: memoryview, pos: int) -> tuple[str | None, int]:
    n, pos = _classic_length(mv, pos, _u16, 2, "string")
    return (None, pos) if n < 0 else (_text(mv, pos, n), pos + n)


def read_compact_nullable_string(mv: memoryview, pos: int) -> tuple[str | None, int]:
    n, pos = _compact_length(mv, pos, "string")
    return (None, pos) if n < 0 else (_text(mv, pos, n), pos + n)


def _nullable_blob(mv: memoryview, pos: int) -> tuple[memoryview | None, int]:
    n, pos = _classic_length(mv, pos, _u32, 4, "bytes")
    return (None, pos) if n < 0 else (mv[pos:pos + n], pos + n)


def _compact_nullable_blob(mv: memoryview, pos: int) -> tuple[memoryview | None, int]:
    n, pos = _compact_length(mv, pos, "bytes")
    return (None, pos) if n < 0 else (mv[pos:pos + n], pos + n)


def read_nullable_bytes(mv: memoryview, pos: int) -> tuple[bytes | None, int]:
    blob, pos = _nullable_blob(mv, pos)
    return (None if blob is None else bytes(blob)), pos


def read_compact_nullable_bytes(mv: memoryview, pos: int) -> tuple[bytes | None, int]:
    blob, pos = _compact_nullable_blob(mv, pos)
    return (None if blob is None else bytes(blob)), pos


read_string = _required(read_nullable_string, "string")
read_compact_string = _required(read_compact_nullable_string, "string")
read_bytes = _required(read_nullable_bytes, "bytes")
read_compact_bytes = _required(read_compact_nullable_bytes, "bytes")

# Records are returned as zero-copy memoryviews of the input (None when null).
read_records = _nullable_blob
read_compact_records = _compact_nullable_blob


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError("string of {} bytes is too long for an int16 length".format(len(data)))
    out += INT16.pack(len(data))
    out += data


def write_string(out: bytearray, value: str | None) -> None:
    # None is typed in (a field nullable only in later versions) and rejected here.
    if value is None:
        raise ValueError("None in a non-nullable string")
    write_nullable_string(out, value)


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode("utf-8")
    write_uvarint(out, len(data) + 1)
    out += data


def write_compact_string(out: bytearray, value: str | None) -> None:
    if value is None:
        raise ValueError("None in a non-nullable string")
    write_compact_nullable_string(out, value)


def write_nullable_bytes(out: bytearray, value: bytes | bytearray | memoryview | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(value) if not isinstance(value, memoryview) else value.nbytes)
    out += value


def write_bytes(out: bytearray, value: bytes | bytearray | memoryview | None) -> None:
    if value is None:
        raise ValueError("None in non-nullable bytes")
    write_nullable_bytes(out, value)


def write_compact_nullable_bytes(out: bytearray,
                                 value: bytes | bytearray | memoryview | None) -> None:
    if value is None:
        out.append(0)
        return
    write_uvarint(out, (len(value) if not isinstance(value, memoryview) else value.nbytes) + 1)
    out += value


def write_compact_bytes(out: bytearray, value: bytes | bytearray | memoryview | None) -> None:
    if value is None:
        raise ValueError("None in non-nullable bytes")
    write_compact_nullable_bytes(out, value)


# --- arrays ----------------------------------------------------------------------------

def read_array_length(mv: memoryview, pos: int, min_size: int = 1) -> tuple[int, int]:
    """Classic int32 array count (-1 for null), checked against the bytes left."""
    if pos + 4 > len(mv):
        raise DecodeFailure("truncated array length", pos)
    n = _u32(mv, pos)[0]
    if n < -1:
        raise DecodeFailure("negative array length {}".format(n), pos)
    check_count(mv, pos + 4, n, min_size)
    return n, pos + 4


def read_compact_array_length(mv: memoryview, pos: int, min_size: int = 1) -> tuple[int, int]:
    """Compact array count (varint ``n + 1``; -1 for null), checked against the bytes left."""
    n, new_pos = read_uvarint(mv, pos)
    n -= 1
    check_count(mv, new_pos, n, min_size)
    return n, new_pos


def _read_items(mv: memoryview, n: int, pos: int,
                read_item: Callable[[memoryview, int], tuple[Any, ...]]) -> tuple[list[Any] | None, int]:
    if n < 0:
        return None, pos
    items = []
    for _ in range(n):
        item, pos = read_item(mv, pos)
        items.append(item)
    return items, pos


def read_array(mv: memoryview, pos: int, read_item: Callable[[memoryview, int], tuple[Any, ...]],
               min_size: int = 1) -> tuple[list[Any] | None, int]:
    """A classic array (None when null) of items read by ``read_item``."""
    n, pos = read_array_length(mv, pos, min_size)
    return _read_items(mv, n, pos, read_item)


def read_compact_array(mv: memoryview, pos: int, read_item: Callable[[memoryview, int], tuple[Any, ...]],
                       min_size: int = 1) -> tuple[list[Any] | None, int]:
    """A compact array (None when null) of items read by ``read_item``."""
    n, pos = read_compact_array_length(mv, pos, min_size)
    return _read_items(mv, n, pos, read_item)


def write_array(out: bytearray, items: list[Any] | None,
                write_item: Callable[[bytearray, object], None]) -> None:
    if items is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(items))
    for item in items:
        write_item(out, item)


def write_compact_array(out: bytearray, items: list[Any] | None,
                        write_item: Callable[[bytearray, object], None]) -> None:
    if items is None:
        out.append(0)
        return
    write_uvarint(out, len(items) + 1)
    for item in items:
        write_item(out, item)


# --- tagged fields ---------------------------------------------------------------------

def read_tagged_fields(mv: memoryview, pos: int) -> tuple[list[tuple[int, int, int]], int]:
    """The tagged-field section: ``[(tag, start, end), ...]`` (offsets into ``mv``) and the new pos.

    Tags must be strictly ascending, as Kafka writes them; a duplicate tag is corrupt.
    """
    count, pos = read_uvarint(mv, pos)
    check_count(mv, pos, count, 2)
    fields = []
    last = -1
    for _ in range(count):
        tag_pos = pos
        tag, pos = read_uvarint(mv, pos)
        if tag <= last:
            raise DecodeFailure("tagged field {} out of order or repeated".format(tag), tag_pos)
        last = tag
        size, pos = read_uvarint(mv, pos)
        _need(mv, pos, size, "tagged field {}".format(tag))
        fields.append((tag, pos, pos + size))
        pos += size
    return fields, pos


def write_tagged_fields(out: bytearray, fields: Iterable[tuple[int, bytes | bytearray]]) -> None:
    """Write ``(tag, raw bytes)`` pairs in ascending tag order."""
    ordered = sorted(fields, key=lambda item: item[0])
    write_uvarint(out, len(ordered))
    for tag, raw in ordered:
        write_uvarint(out, tag)
        write_uvarint(out, len(raw))
        out += raw
