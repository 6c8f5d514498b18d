"""Hostile input: random and mutated bytes to every decoder raise only CorruptMessageError.

Also: absurd lengths fail before allocation, trailing garbage is rejected, invalid varints
are rejected, and the error names the API, version and byte offset.
"""

import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto.errors import CorruptMessageError
from kproto.messages import (ApiVersionsResponse, FetchResponse, MetadataRequest,
                             MetadataResponse)
from tests.support.schema_strategies import BY_NAME, all_pairs, message_class, message_strategy

FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# The rest of Kafka's APIs, which kproto generates but does not speak: a few examples each.
FUZZ_OTHERS = settings(FUZZ, max_examples=3)
# Mutating a drawn message costs ~10x a random byte string (a whole message strategy per
# example): 10 per version of the schemas kproto speaks (every version is still mutated;
# test_random_bytes keeps 25 per version).
FUZZ_MUTATED = settings(FUZZ, max_examples=10)


def _decode_or_corrupt(cls, data, version):
    try:
        cls.decode(data, version)
    except CorruptMessageError as exc:
        assert exc.api == cls._name and exc.version == version
        assert exc.offset is None or 0 <= exc.offset <= len(data)


@pytest.mark.parametrize("name,version", all_pairs(consumer=True))
@FUZZ
@given(data=st.binary(max_size=64))
def test_random_bytes(name, version, data):
    _decode_or_corrupt(message_class(BY_NAME[name]), data, version)


@pytest.mark.parametrize("name,version", all_pairs(consumer=False))
@FUZZ_OTHERS
@given(data=st.binary(max_size=64))
def test_random_bytes_other_apis(name, version, data):
    _decode_or_corrupt(message_class(BY_NAME[name]), data, version)


@st.composite
def mutated(draw, name, version):
    data = bytearray(draw(message_strategy(name, version)).encode(version))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "max"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[pos] ^= draw(st.integers(1, 255))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete" and data:
            del data[pos]
        elif kind == "max" and len(data) >= pos + 4:
            data[pos:pos + 4] = b"\x7f\xff\xff\xff"
    return bytes(data)


@pytest.mark.parametrize("name,version", all_pairs(consumer=True))
@FUZZ_MUTATED
@given(data=st.data())
def test_mutated_encodings(name, version, data):
    _decode_or_corrupt(message_class(BY_NAME[name]), data.draw(mutated(name, version)), version)


@pytest.mark.parametrize("name,version", all_pairs(consumer=False))
@FUZZ_OTHERS
@given(data=st.data())
def test_mutated_encodings_other_apis(name, version, data):
    _decode_or_corrupt(message_class(BY_NAME[name]), data.draw(mutated(name, version)), version)


def test_huge_array_length_fails_before_allocating():
    # MetadataResponse v0 starts with the brokers array: a 2^31-1 count in a 20-byte buffer.
    data = struct.pack(">i", 0x7FFFFFFF) + bytes(16)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptMessageError) as info:
            MetadataResponse.decode(data, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000
    assert info.value.offset == 4 and info.value.api == "MetadataResponse"
    assert "MetadataResponse v0" in str(info.value) and "byte 4" in str(info.value)


def test_huge_string_and_bytes_lengths():
    # MetadataRequest v1: topics array with one topic whose name claims 32767 bytes.
    data = struct.pack(">ih", 1, 0x7FFF) + b"abc"
    with pytest.raises(CorruptMessageError) as info:
        MetadataRequest.decode(data, 1)
    assert info.value.offset == 6
    # FetchResponse v4: records of 2^31-1 bytes in a short buffer
    good = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[FetchResponse.PartitionData(records=b"xyz")])]).encode(4)
    bad = good[:-7] + struct.pack(">i", 0x7FFFFFFF) + good[-3:]
    with pytest.raises(CorruptMessageError):
        FetchResponse.decode(bad, 4)


def test_negative_lengths():
    with pytest.raises(CorruptMessageError, match="negative"):
        MetadataResponse.decode(struct.pack(">i", -2) + bytes(8), 0)
    with pytest.raises(CorruptMessageError, match="negative"):
        MetadataRequest.decode(struct.pack(">ih", 1, -5), 1)


def test_trailing_garbage_rejected_unless_allowed():
    data = ApiVersionsResponse(error_code=0).encode(3)
    assert ApiVersionsResponse.decode(data, 3) == ApiVersionsResponse()
    with pytest.raises(CorruptMessageError, match="1 trailing bytes") as info:
        ApiVersionsResponse.decode(data + b"\x00", 3)
    assert info.value.offset == len(data)
    assert ApiVersionsResponse.decode(data + b"\x00", 3, allow_trailing=True) == \
        ApiVersionsResponse()


def test_invalid_varint_rejected():
    # ApiVersionsResponse v3: error_code, then a compact array whose varint never ends.
    data = b"\x00\x00" + b"\xff" * 6
    with pytest.raises(CorruptMessageError, match="varint") as info:
        ApiVersionsResponse.decode(data, 3)
    assert info.value.offset == 2


def test_truncation_reports_offset():
    data = ApiVersionsResponse(throttle_time_ms=5).encode(1)
    with pytest.raises(CorruptMessageError) as info:
        ApiVersionsResponse.decode(data[:-2], 1)
    assert info.value.offset == len(data) - 4
