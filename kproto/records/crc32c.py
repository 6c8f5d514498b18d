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
  halving replace one Python-level loop iteration per byte. The last ~256 bits go
  through the table loop (small folds cost more per operation than they save).

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


def _x_pow_mod(k: int) -> int:
    """x^k mod P by square-and-multiply (table building and checking only)."""
    result, square = 1, 2  # x^0, x^1
    while k:
        if k & 1:
            result = _mod_p(_clmul(result, square))
        square = _mod_p(_clmul(square, square))
        k >>= 1
    return result


# The fold table. Folding V (w bits) at distance k gives H·c + L with H = V >> k, c = x^k
# mod P; it fits in k bits when w <= 2k - 31 (H has w - k bits, c 32). Each fold takes the
# smallest k of the table that allows, so every fold about halves the width; the table's
# k grow by 5-25% a step (a fold lands at most ~25% above the half), and within each step
# k is the one whose constant has the fewest set bits (a fold costs one shift and one XOR
# of the big integer per set bit): 5 or 7 (x^k mod P always has an odd number of terms, as
# P(1) = 0), against ~16 for a random constant. Made by _search_fold_table(_FOLD_MAX_BITS),
# checked by a test; (k, x^k mod P).
_FOLD_CHUNK = 128 * 1024  # inputs above this are folded piece by piece (see crc32c)
_FOLD_MAX_BITS = _FOLD_CHUNK * 8 + 32
_FOLD_TABLE = (
    (64, 0x3aab4576), (75, 0x7c0c3003), (86, 0x099a600b), (90, 0x99a600b0), (110, 0xdd8102c9),
    (120, 0x19037293), (126, 0x0615c746), (133, 0x298712c3), (142, 0x31557015),
    (163, 0xa3160837), (171, 0x0d44096f), (200, 0x71a0ce21), (220, 0xa29dc403),
    (235, 0x48b50c8b), (253, 0x4c8371c1), (268, 0x12105bb5), (334, 0x0202f8e1),
    (398, 0x3bc30401), (417, 0x82e250e0), (442, 0x29841523), (464, 0x340701e1),
    (498, 0x65011a29), (593, 0x66250a81), (685, 0x86888809), (759, 0xc4029211),
    (887, 0x2a803481), (967, 0xca804529), (1030, 0x00a310bb), (1266, 0x400702c9),
    (1425, 0xb802800b), (1662, 0x22003075), (1759, 0x4c112cc1), (1863, 0x8124688d),
    (2313, 0x00258549), (2798, 0x02e44121), (3196, 0x81490885), (3418, 0x3300a811),
    (3867, 0x14286205), (4765, 0x5004c321), (5017, 0x18430861), (6003, 0x80088c17),
    (6305, 0x301c1001), (7363, 0x02710201), (8308, 0x09c04451), (8797, 0x64582081),
    (9241, 0x18850059), (10151, 0x06e0400d), (10709, 0x9a202281), (11485, 0x1e0010b1),
    (13664, 0x22440019), (14684, 0x40059223), (15557, 0x504052a1), (19236, 0x88202841),
    (21038, 0x88020191), (22121, 0x80186009), (23343, 0x180118e1), (25258, 0x8007408b),
    (29493, 0x11440411), (31875, 0x84090601), (33607, 0x34802011), (36330, 0x881000c5),
    (41258, 0x000518a1), (43354, 0x31028003), (49862, 0x08608601), (52741, 0x100224c1),
    (57704, 0xa4820081), (62530, 0x10260211), (73444, 0x0a100009), (89494, 0x000900c1),
    (100183, 0x82048025), (105552, 0x0140030d), (118996, 0x4003a003), (125107, 0x80010691),
    (132359, 0x10c02043), (141958, 0x21020305), (150048, 0xcc000049), (158653, 0x26580001),
    (167274, 0x204400c5), (203189, 0x90208001), (216878, 0x240090c1), (228482, 0x10483021),
    (242756, 0x18206801), (302494, 0x82040009), (343946, 0x00202481), (363296, 0x48003031),
    (383184, 0x01602601), (478898, 0x20980001), (506636, 0x00421021), (564376, 0x0080c009),
)
_FOLD_KS = [k for k, _ in _FOLD_TABLE]
# Widths up to this are finished by the word loop instead of folds (see _crc32c_fold).
_TAIL_BITS = 256
_FOLD_BITS = [tuple(i for i in range(32) if c >> i & 1) for _, c in _FOLD_TABLE]


def _search_fold_table(max_bits: int) -> list[tuple[int, int]]:
    """The fold table up to inputs of ``max_bits`` (how ``_FOLD_TABLE`` was made)."""
    table = [(64, _x_pow_mod(64))]
    k = 64
    while 2 * k - 31 < max_bits:
        lo = max(k + 1, int(k * 1.05))
        c = _x_pow_mod(lo)
        best_bits, best_k, best_c = bin(c).count("1"), lo, c
        for j in range(lo + 1, max(lo, int(k * 1.25)) + 1):
            c <<= 1  # x^j = x^(j-1)·x
            if c >> 32:
                c ^= _POLY
            bits = bin(c).count("1")
            if bits < best_bits:
                best_bits, best_k, best_c = bits, j, c
        k = best_k
        table.append((k, best_c))
    return table


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
    if w > _FOLD_MAX_BITS:
        raise ValueError("_crc32c_fold takes at most {} bytes".format(_FOLD_CHUNK))
    ks = _FOLD_KS
    fold_bits = _FOLD_BITS
    find = bisect.bisect_left
    seed = crc ^ 0xFFFFFFFF
    if w < 2 * 64:
        rv = int.from_bytes(data, "little") ^ seed
        if w < 64:
            rv <<= 64 - w  # the same polynomial at width 64 (only tiny inputs; crc32c never)
            w = 64
    else:
        # The first (largest) fold splits the bytes instead of the integer: H is the first
        # d8 bits, d8 the fold's d rounded down to whole bytes, so H and L are two
        # from_bytes and no mask, shift or seed XOR of the whole input is needed. V is then
        # H·x^(k+r)·... with r = d - d8: H·x^r·(x^k mod P) + L at width k + r (the shifts
        # below gain r), which still fits (d8 <= k - 31).
        i = find(ks, (w + 32) >> 1)
        k = ks[i]
        split = (w - k) >> 3
        r = w - k - (split << 3)
        h = int.from_bytes(data[:split], "little") ^ seed
        shift = 2 * k - w + r
        bits = fold_bits[i]
        acc = h << (shift - bits[0])
        for t in bits[1:]:
            acc ^= h << (shift - t)
        rv = acc ^ int.from_bytes(data[split:], "little")
        w = k + r
    while w > _TAIL_BITS:
        # the smallest k with w <= 2k - 31: about half the width
        i = find(ks, (w + 32) >> 1)
        k = ks[i]
        # V = H·x^k + L at width w -> H·(x^k mod P) + L at width k. Reversed: L is the
        # top k bits, H the low w - k bits, and H·x^t lands shifted left by 2k - w - t.
        d = w - k
        h = rv & ((1 << d) - 1)
        base = 2 * k - w
        bits = fold_bits[i]
        acc = h << (base - bits[0])
        for t in bits[1:]:
            acc ^= h << (base - t)
        rv = acc ^ (rv >> d)
        w = k
    # The last few hundred bits: folds of small integers cost their fixed overhead per
    # operation (and the small constants have many bits), the word loop is cheaper. At
    # width w, V = H·x^32 + L with L the top 32 bits of rv; H·x^32 mod P is the table
    # loop's register over H's bytes from 0 (width padded so H is whole bytes).
    pad = (32 - w) & 7
    rv <<= pad
    w += pad - 32
    return _crc32c_small((rv & ((1 << w) - 1)).to_bytes(w >> 3, "little"), 0xFFFFFFFF) ^ (rv >> w)


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
    # Big integers beyond ~128 KiB fall out of the CPU caches; folding 128 KiB pieces one
    # after the other (the CRC is incremental) keeps the speed (measured: 1 MiB in 128 KiB
    # pieces ~1.2x faster than in 256 KiB ones, ~1.1x than in 64 KiB ones).
    view = memoryview(data)
    for start in range(0, size, _FOLD_CHUNK):
        crc = _crc32c_fold(view[start:start + _FOLD_CHUNK], crc)
    return crc
