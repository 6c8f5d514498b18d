"""CRC-32C: published check values, the folding path against the table loop at every size
class, and incremental use like zlib.crc32."""

import os

import pytest
from hypothesis import given, settings, strategies as st

from kproto.records import crc32c
from kproto.records.crc32c import FOLD_THRESHOLD, _crc32c_fold, _crc32c_small, crc32c_table


# RFC 3720 (iSCSI) appendix B.4 test vectors and the usual "123456789" check value.
@pytest.mark.parametrize("data,expected", [
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"", 0),
])
def test_published_check_values(data, expected):
    assert crc32c(data) == expected
    assert crc32c_table(data) == expected
    if data:
        assert _crc32c_fold(data, 0) == expected


@pytest.mark.parametrize("size", [1, 2, 3, 4, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100,
                                  FOLD_THRESHOLD - 1, FOLD_THRESHOLD, FOLD_THRESHOLD + 1,
                                  255, 256, 257, 1000, 1024, 4095, 4096, 4097, 65536 + 3])
def test_fold_matches_table_loop(size):
    data = os.urandom(size)
    expected = crc32c_table(data)
    assert _crc32c_fold(data, 0) == expected
    assert _crc32c_small(data, 0) == expected
    assert crc32c(data) == expected
    assert _crc32c_small(data, 0xDEADBEEF) == crc32c_table(data, 0xDEADBEEF)
    # continuing from a non-zero running CRC
    assert _crc32c_fold(data, 0xDEADBEEF) == crc32c_table(data, 0xDEADBEEF)


def test_fold_of_all_zero_and_all_one_inputs():
    for size in (200, 4096, 100_000):
        for fill in (b"\x00", b"\xff"):
            data = fill * size
            assert crc32c(data) == crc32c_table(data)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000), st.data())
def test_incremental_like_zlib_crc32(data, draw):
    cut = draw.draw(st.integers(0, len(data)))
    assert crc32c(data[cut:], crc32c(data[:cut])) == crc32c(data)


def test_large_inputs_folded_in_pieces():
    data = os.urandom(600_000)  # three pieces of at most 256 KiB
    assert crc32c(data) == _crc32c_fold(data, 0) == crc32c_table(data)
    assert crc32c(data, 7) == crc32c_table(data, 7)


def test_accepts_bytearray_and_memoryview():
    data = os.urandom(5000)
    assert crc32c(bytearray(data)) == crc32c(memoryview(data)) == crc32c(data)
    assert crc32c(memoryview(data)[:50]) == crc32c(data[:50])


def test_matches_kafka_python_reference():
    from kafka.record._crc32c import crc as kafka_python_crc

    for size in (10, 500, 20_000):
        data = os.urandom(size)
        assert crc32c(data) == kafka_python_crc(data)
