"""Wire primitives: varints, strings, bytes, arrays, tagged fields, and their bounds checks."""

import copy
import pickle
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.protocol import primitives as p

# No per-example deadline: these checks take microseconds, and Hypothesis' default 200 ms
# deadline turns one descheduled example on a loaded 2-core CI machine into a failure.
UNTIMED = settings(deadline=None)


def _round_trip(write, read, value):
    out = bytearray()
    write(out, value)
    decoded, pos = read(memoryview(bytes(out)), 0)
    assert pos == len(out)
    return decoded, bytes(out)


@UNTIMED
@given(st.integers(0, 0xFFFFFFFF))
def test_uvarint(value):
    decoded, raw = _round_trip(p.write_uvarint, p.read_uvarint, value)
    assert decoded == value and len(raw) == p.uvarint_size(value)


@UNTIMED
@given(st.integers(-(1 << 31), (1 << 31) - 1))
def test_varint(value):
    assert _round_trip(p.write_varint, p.read_varint, value)[0] == value


@UNTIMED
@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varlong(value):
    assert _round_trip(p.write_varlong, p.read_varlong, value)[0] == value


def test_known_varint_bytes():
    out = bytearray()
    p.write_uvarint(out, 300)
    assert bytes(out) == b"\xac\x02"
    out = bytearray()
    p.write_varint(out, -1)
    assert bytes(out) == b"\x01"


def test_invalid_varints():
    with pytest.raises(p.DecodeFailure, match="more than 5"):
        p.read_uvarint(memoryview(b"\xff\xff\xff\xff\xff\x01"), 0)
    with pytest.raises(p.DecodeFailure, match="truncated"):
        p.read_uvarint(memoryview(b"\x80"), 0)
    with pytest.raises(p.DecodeFailure, match="out of range"):
        p.read_uvarint(memoryview(b"\xff\xff\xff\xff\x7f"), 0)


@UNTIMED
@given(st.one_of(st.none(), st.text(max_size=20)))
def test_strings(value):
    assert _round_trip(p.write_nullable_string, p.read_nullable_string, value)[0] == value
    assert _round_trip(p.write_compact_nullable_string, p.read_compact_nullable_string,
                       value)[0] == value


@UNTIMED
@given(st.one_of(st.none(), st.binary(max_size=20)))
def test_bytes_and_records(value):
    assert _round_trip(p.write_nullable_bytes, p.read_nullable_bytes, value)[0] == value
    assert _round_trip(p.write_compact_nullable_bytes, p.read_compact_nullable_bytes,
                       value)[0] == value
    records, _ = _round_trip(p.write_compact_nullable_bytes, p.read_compact_records, value)
    assert records == value and (value is None or isinstance(records, memoryview))


def test_null_in_non_nullable():
    with pytest.raises(p.DecodeFailure, match="null"):
        p.read_string(memoryview(b"\xff\xff"), 0)
    with pytest.raises(p.DecodeFailure, match="null"):
        p.read_compact_bytes(memoryview(b"\x00"), 0)
    with pytest.raises(ValueError):
        p.write_string(bytearray(), None)


def test_lengths_checked_before_allocation():
    with pytest.raises(p.DecodeFailure) as info:
        p.read_bytes(memoryview(b"\x7f\xff\xff\xff" + bytes(16)), 0)
    assert info.value.offset == 4
    with pytest.raises(p.DecodeFailure):
        p.read_array_length(memoryview(b"\x7f\xff\xff\xff" + bytes(16)), 0)
    with pytest.raises(p.DecodeFailure):
        p.read_compact_string(memoryview(b"\x10abc"), 0)
    with pytest.raises(p.DecodeFailure, match="UTF-8"):
        p.read_string(memoryview(b"\x00\x02\xff\xfe"), 0)


def test_arrays_and_uuid():
    items = [uuid.uuid4(), uuid.UUID(int=0)]
    out = bytearray()
    p.write_compact_array(out, items, p.write_uuid)
    decoded, pos = p.read_compact_array(memoryview(bytes(out)), 0, p.read_uuid, 16)
    assert decoded == items and pos == len(out)
    out = bytearray()
    p.write_array(out, None, p.write_int32)
    assert p.read_array(memoryview(bytes(out)), 0, p.read_int32)[0] is None


def test_tagged_fields():
    out = bytearray()
    p.write_tagged_fields(out, [(5, b"xy"), (1, b"")])
    fields, pos = p.read_tagged_fields(memoryview(bytes(out)), 0)
    assert [(tag, bytes(out[s:e])) for tag, s, e in fields] == [(1, b""), (5, b"xy")]
    assert pos == len(out)
    with pytest.raises(p.DecodeFailure, match="order"):
        p.read_tagged_fields(memoryview(b"\x02\x05\x00\x01\x00"), 0)
    with pytest.raises(p.DecodeFailure):
        p.read_tagged_fields(memoryview(b"\x01\x05\x09ab"), 0)


def test_fixed_width_readers():
    assert p.read_int32(memoryview(b"\xff\xff\xff\xfe"), 0) == (-2, 4)
    assert p.read_uint16(memoryview(b"\xff\xfe"), 0) == (0xFFFE, 2)
    assert p.read_uint32(memoryview(b"\xff\xff\xff\xfe"), 0) == (0xFFFFFFFE, 4)
    assert p.read_bool(memoryview(b"\x02"), 0) == (True, 1)
    with pytest.raises(p.DecodeFailure):
        p.read_int64(memoryview(b"\x00" * 7), 0)


@pytest.mark.parametrize("raw", [bytes(16), b"\xff" * 16, bytes(range(16)),
                                 uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e").bytes])
def test_read_uuid_is_an_ordinary_uuid(raw):
    value, pos = p.read_uuid(memoryview(b"\x07" + raw + b"\x00"), 1)
    expected = uuid.UUID(bytes=raw)
    assert pos == 17 and type(value) is uuid.UUID
    assert value == expected and hash(value) == hash(expected)
    assert (str(value), repr(value), value.version, value.is_safe) == \
        (str(expected), repr(expected), expected.version, expected.is_safe)
    assert pickle.loads(pickle.dumps(value)) == expected == copy.deepcopy(value)
    with pytest.raises(TypeError):
        value.int = 1  # immutable like any UUID
