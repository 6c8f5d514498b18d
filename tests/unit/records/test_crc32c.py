"""CRC-32C: published check values, the folding path against the table loop at every size
class, and incremental use like zlib.crc32."""

import os

import pytest
from hypothesis import given, settings, strategies as st

from kproto.records import crc32c
from kproto.records.crc32c import (_FOLD_CHUNK, _FOLD_MAX_BITS, _FOLD_PLAN, _FOLD_TABLE, _PIECE_BITS,
                                    _PIECE_CHUNK, _PIECE_CUTS, _PIECE_MIN, _PIECE_TABLE, _PIECE_WIDTH,
                                    _SPARSE_MIN_BITS, _SPARSE_TABLE, FOLD_THRESHOLD, _crc32c_fold,
                                    _crc32c_pieces, _crc32c_small, _mod_p, _search_fold_table, _x_pow_mod,
                                    crc32c_table)


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
    data = os.urandom(600_000)  # eighteen pieces of the cut table
    assert crc32c(data) == crc32c_table(data)
    assert crc32c(data, 7) == crc32c_table(data, 7)
    assert _crc32c_fold(data[:_FOLD_CHUNK], 0) == crc32c_table(data[:_FOLD_CHUNK])
    with pytest.raises(ValueError):
        _crc32c_fold(data[:_FOLD_CHUNK + 1], 0)


def test_piece_table_cuts():
    # each R = x^a + x^b + x^c is congruent to x^e, e a byte boundary; cuts a piece apart
    for e, a, b, c in _PIECE_TABLE:
        assert e % 8 == 0 and a < b < c < 1536
        assert _x_pow_mod(a) ^ _x_pow_mod(b) ^ _x_pow_mod(c) == _x_pow_mod(e)
    cuts = [e for e, _, _, _ in _PIECE_TABLE]
    assert cuts[0] >= _PIECE_BITS and all(hi - lo >= _PIECE_BITS for lo, hi in zip(cuts, cuts[1:]))
    # the cuts reach past the widest input taken at once, and every shift fits
    assert cuts[-1] >= _PIECE_CHUNK * 8 + 32
    assert _PIECE_WIDTH <= _FOLD_MAX_BITS


# Inputs whose first piece starts exactly 64 bits above a cut, or a byte further; the
# bounds of _crc32c_pieces; what crc32c cuts into MiB chunks.
_PIECE_SIZES = sorted({n for cut in _PIECE_CUTS[1::7] for n in ((cut + 32) // 8, (cut + 32) // 8 + 1)
                       if _PIECE_MIN <= n <= _PIECE_CHUNK}
                      | {_PIECE_MIN, _FOLD_CHUNK + 1, _PIECE_CHUNK})


@pytest.mark.parametrize("size", _PIECE_SIZES)
def test_pieces_match_table_loop(size):
    data = os.urandom(size)
    assert _crc32c_pieces(data, 0) == crc32c_table(data)
    assert _crc32c_pieces(memoryview(data), 0x12345678) == crc32c_table(data, 0x12345678)


def test_pieces_bounds_and_chunks():
    data = os.urandom(2 * _PIECE_CHUNK + _FOLD_CHUNK + 5)  # two MiB chunks and a folded tail
    assert crc32c(data, 99) == crc32c_table(data, 99)
    for size in (_PIECE_MIN - 1, _PIECE_CHUNK + 1):
        with pytest.raises(ValueError):
            _crc32c_pieces(data[:size], 0)


def test_fold_table_constants():
    # every constant is x^k mod P, computed here by plain long division
    for k, c in _FOLD_TABLE:
        assert c == _x_pow_mod(k)
        if k < 5000:  # long division is quadratic
            assert c == _mod_p(1 << k)
    ks = [k for k, _ in _FOLD_TABLE]
    assert ks[0] == 64 and ks == sorted(set(ks))
    # each step lets a fold halve the width: the next k is at most 2k - 31 ...
    assert all(b <= 2 * a - 31 for a, b in zip(ks, ks[1:]))
    # ... and the table reaches the largest piece folded at once
    assert 2 * ks[-1] - 31 >= _FOLD_MAX_BITS
    # the table is what the search makes (its start; the whole search takes ~0.3 s)
    start = _search_fold_table(100_000)
    assert list(_FOLD_TABLE[:len(start)]) == start


def test_sparse_table_multipliers():
    # each R = x^a + x^b + x^c is congruent to x^k, so H·R replaces H·x^k
    for k, a, b, c in _SPARSE_TABLE:
        assert a < b < c < 3000
        assert _x_pow_mod(a) ^ _x_pow_mod(b) ^ _x_pow_mod(c) == _x_pow_mod(k)


def test_fold_plan_makes_progress_up_to_the_largest_piece():
    reaches = [reach for reach, _, _ in _FOLD_PLAN]
    assert reaches == sorted(set(reaches))
    for (reach, k, terms), (previous, _, _) in zip(_FOLD_PLAN[1:], _FOLD_PLAN):
        # every width this entry folds (above the previous reach) shrinks, and the
        # multiplier's terms fit (shifts are never negative)
        assert k <= previous and reach <= 2 * k - max(terms)
    # wide folds use the three-term multipliers
    assert all(len(terms) == 3 for reach, _, terms in _FOLD_PLAN if reach >= _SPARSE_MIN_BITS)
    assert reaches[-1] >= _FOLD_MAX_BITS


# Sizes at the edges of the plan's steps: the largest input an entry folds, and one byte more.
_EDGE_SIZES = sorted({n for reach, _, _ in _FOLD_PLAN[::5] for n in ((reach - 32) // 8, (reach - 32) // 8 + 1)
                      if 0 < n <= _FOLD_CHUNK})


@pytest.mark.parametrize("size", _EDGE_SIZES)
def test_fold_at_table_step_edges(size):
    data = os.urandom(size)
    assert _crc32c_fold(data, 0x12345678) == crc32c_table(data, 0x12345678)


def test_accepts_bytearray_and_memoryview():
    data = os.urandom(5000)
    assert crc32c(bytearray(data)) == crc32c(memoryview(data)) == crc32c(data)
    assert crc32c(memoryview(data)[:50]) == crc32c(data[:50])


def test_matches_kafka_python_reference():
    from kafka.record._crc32c import crc as kafka_python_crc

    for size in (10, 500, 20_000):
        data = os.urandom(size)
        assert crc32c(data) == kafka_python_crc(data)
