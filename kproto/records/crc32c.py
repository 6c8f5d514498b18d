"""CRC-32C (Castagnoli), the checksum of RecordBatch v2, in pure Python.

Owns ``crc32c(data, crc=0)``: incremental like ``zlib.crc32`` (pass the previous result
as ``crc`` to continue a running checksum).

Two algorithms, picked by input size:

* short inputs: a table loop, "slicing-by-8" (eight 256-entry tables consume one 64-bit
  word per iteration; ~1.2-1.4x the one-byte loop; fastest below ~110 bytes, where the
  folding's fixed cost dominates);
* long inputs: the whole input becomes one big integer, i.e. one polynomial M(x) over
  GF(2), and the CRC register is ``(M(x)·x^32 + s(x)·x^n) mod P(x)``. The remainder is
  found by *folding*: split V = H·x^k + L and replace it by ``H·(x^k mod P) + L``, which
  has the same remainder but about half the bits. ``H·c`` for a 32-bit constant c is a
  carry-less multiplication: one shift and XOR of the big integer per set bit of c, and
  CPython does those at C speed per machine word. A few dozen big-integer operations per
  halving replace one Python-level loop iteration per byte.

The bit order: CRC-32C is a *reflected* CRC (the least significant bit of each byte is the
highest-degree coefficient), and ``int.from_bytes(data, "little")`` is exactly the
message polynomial with its bits reversed (bit b holds the coefficient of x^(w-1-b) for a
width w). The folding works on that reversed form directly, tracking the width: the
low-degree part L is the top bits, H the bottom bits, and multiplying by x^t becomes a
left shift by (width change - t). No bit reversal of the data is needed.
"""

from __future__ import annotations

import bisect
import struct

__all__ = ["crc32c", "crc32c_table"]

# Castagnoli polynomial, reflected (for the table loop) and in normal bit order with the
# x^32 term (for the folding reduction).
_POLY_REFLECTED = 0x82F63B78
_POLY = 0x11EDC6F41

# Below this many bytes the table loop wins (measured with bench/bench_crc32c.py: the
# folding has a fixed cost of ~5 us, the slicing-by-8 loop costs ~70 ns per byte).
FOLD_THRESHOLD = 112
# Inputs above this are folded piece by piece (see crc32c).
_FOLD_CHUNK = 256 * 1024


def _make_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY_REFLECTED if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()
# Slicing-by-8: _T8[k][b] is the CRC register contribution of byte b followed by k zero
# bytes, so one 64-bit little-endian word is eight lookups.
_T8 = [_TABLE]
for _ in range(7):
    _T8.append([(c >> 8) ^ _TABLE[c & 0xFF] for c in _T8[-1]])

def _clmul(a: int, b: int) -> int:
    """Carry-less product of two small polynomials (used only to build constants)."""
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        b >>= 1
    return r


def _mod_p(v: int) -> int:
    """v mod P by long division (constant building only: v is at most ~64 bits)."""
    while v.bit_length() > 32:
        v ^= _POLY << (v.bit_length() - 33)
    return v


# The fold chain. Folding V (nbits) at distance k gives H·c + L with H = V >> k, c = x^k
# mod P; it fits in k bits when nbits <= 2k - 31 (H has nbits - k bits, c 32). So a chain
# k_0 = 64 < k_1 < k_2 < ... with k_{i+1} <= 2·k_i - 31 takes any input down to 64 bits
# with one fold per level, each halving it. Within that bound each k_{i+1} is picked
# among the _FOLD_CHOICES largest allowed values as the one whose constant has the fewest
# set bits (a fold costs one shift and one XOR of the big integer per set bit): 7-9
# instead of the 16 of a random constant, about twice as fast.
_FOLD_CHOICES = 128
_FOLD_LEVELS = 20  # the last limit is ~2^26 bits (8 MiB); crc32c folds 256 KiB pieces


def _build_fold_chain() -> tuple[list[int], list[tuple[int, tuple[int, ...]]]]:
    k, c = 64, _mod_p(1 << 64)
    # limits[i]: the largest nbits the fold at chain[i] accepts
    limits = [2 * k - 31]
    chain = [(k, tuple(i for i in range(32) if c >> i & 1))]  # (k, set bits of x^k mod P)
    for _ in range(_FOLD_LEVELS):
        top = 2 * k - 31
        # x^(2k) = (x^k)^2, then step down one power at a time to x^top and below:
        # x^(j-1) = x^j / x mod P (P's constant term is 1: add P when odd, then shift).
        cj = _mod_p(_clmul(c, c))
        for _ in range(31):
            cj = (cj ^ _POLY) >> 1 if cj & 1 else cj >> 1
        best_k, best_c = top, cj
        # (never below 1.5·k, so every level still grows the chain)
        for j in range(top - 1, max(top - _FOLD_CHOICES, (3 * k) // 2), -1):
            cj = (cj ^ _POLY) >> 1 if cj & 1 else cj >> 1
            if bin(cj).count("1") < bin(best_c).count("1"):
                best_k, best_c = j, cj
        k, c = best_k, best_c
        chain.append((k, tuple(i for i in range(32) if c >> i & 1)))
        limits.append(2 * k - 31)
    return limits, chain


_FOLD_LIMITS, _FOLD_CHAIN = _build_fold_chain()


def crc32c_table(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C with the one-byte-at-a-time table loop (the reference algorithm)."""
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _crc32c_fold(data: bytes | bytearray | memoryview, crc: int) -> int:
    # The register after the input is V = M·x^32 + s·x^n mod P (n input bits, s the
    # incoming register). Reversed at width w = n + 32, M·x^32 is just the little-endian
    # integer of the input and s·x^n is the incoming CRC (final XOR undone) in bits 0..31.
    w = len(data) * 8 + 32
    rv = int.from_bytes(data, "little") ^ (crc ^ 0xFFFFFFFF)
    if w < 64:
        rv <<= 64 - w  # the same polynomial at width 64 (only tiny inputs; crc32c never)
        w = 64
    level = bisect.bisect_left(_FOLD_LIMITS, w) if w > 64 else -1
    if level >= len(_FOLD_CHAIN):
        raise ValueError("_crc32c_fold takes at most {} bytes".format(_FOLD_LIMITS[-1] // 8 - 4))
    for k, bits in reversed(_FOLD_CHAIN[:level + 1]):
        # V = H·x^k + L at width w -> H·(x^k mod P) + L at width k. Reversed: L is the
        # top k bits, H the low w - k bits, and H·x^t lands shifted left by 2k - w - t.
        d = w - k
        h = rv & ((1 << d) - 1)
        base = 2 * k - w
        acc = 0
        for t in bits:
            acc ^= h << (base - t)
        rv = acc ^ (rv >> d)
        w = k
    # Width 64: V = hi·x^32 + lo; reversed, lo is bits 32..63 and hi bits 0..31.
    # hi·x^32 mod P (reflected) is the table loop run over four zero bytes from hi.
    r = rv & 0xFFFFFFFF
    table = _TABLE
    r = table[r & 0xFF] ^ (r >> 8)
    r = table[r & 0xFF] ^ (r >> 8)
    r = table[r & 0xFF] ^ (r >> 8)
    r = table[r & 0xFF] ^ (r >> 8)
    return r ^ (rv >> 32) ^ 0xFFFFFFFF


def _crc32c_small(data: bytes | bytearray | memoryview, crc: int) -> int:
    t0, t1, t2, t3, t4, t5, t6, t7 = _T8
    crc ^= 0xFFFFFFFF
    n8 = len(data) >> 3
    for w in struct.unpack_from("<{}Q".format(n8), data):
        w ^= crc
        crc = (t7[w & 0xFF] ^ t6[(w >> 8) & 0xFF] ^ t5[(w >> 16) & 0xFF]
               ^ t4[(w >> 24) & 0xFF] ^ t3[(w >> 32) & 0xFF] ^ t2[(w >> 40) & 0xFF]
               ^ t1[(w >> 48) & 0xFF] ^ t0[w >> 56])
    for b in data[n8 << 3:]:
        crc = t0[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of ``data``, continuing from ``crc`` (the result of a previous call)."""
    size = len(data)
    if size < FOLD_THRESHOLD:
        return _crc32c_small(data, crc)
    if size <= _FOLD_CHUNK:
        return _crc32c_fold(data, crc)
    # Big integers beyond a few hundred KiB fall out of the CPU caches; folding 256 KiB
    # pieces one after the other (the CRC is incremental) keeps the speed.
    view = memoryview(data)
    for start in range(0, size, _FOLD_CHUNK):
        crc = _crc32c_fold(view[start:start + _FOLD_CHUNK], crc)
    return crc
