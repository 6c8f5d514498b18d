"""CRC-32C (Castagnoli), the checksum of RecordBatch v2, in pure Python.

Owns ``crc32c(data, crc=0)``: incremental like ``zlib.crc32`` (pass the previous result
as ``crc`` to continue a running checksum).

Three algorithms, picked by input size:

* short inputs: a table loop, "slicing-by-8" (eight 256-entry tables consume one 64-bit
  word per iteration; ~1.2-1.4x the one-byte loop; fastest below ~110 bytes, where the
  folding's fixed cost dominates);
* long inputs (``_crc32c_fold``): the whole input becomes one big integer, i.e. one
  polynomial M(x) over GF(2), and the CRC register is ``(M(x)·x^32 + s(x)·x^n) mod
  P(x)``. The remainder is found by *folding*: split V = H·x^k + L and replace it by
  ``H·(x^k mod P) + L``, which has the same remainder but about half the bits. ``H·c`` for
  a 32-bit constant c is a carry-less multiplication: one shift and XOR of the big integer
  per set bit of c, and CPython does those at C speed per machine word. A few dozen
  big-integer operations per halving replace one Python-level loop iteration per byte.
  Wide folds multiply by a three-term polynomial congruent to x^k instead (three shifts,
  not 5-9). The last ~256 bits go through the table loop (small folds cost more per
  operation than they save).
* very long inputs (above 128 KiB, ``_crc32c_pieces``): the input is cut, from its end,
  at distances e where x^e mod P has a three-term representative R = x^a + x^b + x^c of
  small degree; each piece H between two cuts contributes H·x^e ≡ H·R, three shifts of
  the piece into one accumulator a piece wide, which is then reduced as above. Every
  input bit is converted once and shifted three times, against about four shifts per bit
  for the halvings and their masks (measured: ~1.2x from 512 KiB).

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
_FOLD_CHUNK = 128 * 1024  # inputs above this go to _crc32c_pieces (see crc32c)
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
# Widths up to this are finished by the word loop instead of folds (see _crc32c_fold).
_TAIL_BITS = 256

# Wide folds need not multiply by x^k mod P itself: any R ≡ x^k (mod P) does, and H·R
# still fits in k bits when deg R <= 2k - w. For each k here, R = x^a + x^b + x^c with
# c < 3,000 (the 4-term multiples x^k + x^a + x^b + x^c of P with the smallest top term
# c, found by meeting in the middle: _search_sparse_table): three shifts per fold
# instead of the five to nine of _FOLD_TABLE's constants, for a width only ~c/2 above
# the half. Used from _SPARSE_MIN_BITS on, where c is small against the width
# (measured, 10 KB-64 KB inputs: ~1.3-1.8x); (k, a, b, c), k about 2% apart.
_SPARSE_MIN_BITS = 16384
_SPARSE_TABLE = (
    (7000, 223, 323, 707), (7141, 364, 464, 848), (7284, 507, 607, 991), (7430, 653, 753, 1137),
    (7579, 802, 902, 1286), (7731, 954, 1054, 1438), (7886, 1109, 1209, 1593),
    (8044, 1267, 1367, 1751), (8205, 1428, 1528, 1912), (8370, 1593, 1693, 2077),
    (8538, 1761, 1861, 2245), (8709, 1932, 2032, 2416), (8884, 2107, 2207, 2591),
    (9062, 2285, 2385, 2769), (9244, 2467, 2567, 2951), (9429, 26, 1775, 2310),
    (9618, 215, 1964, 2499), (9811, 408, 2157, 2692), (10008, 605, 2354, 2889),
    (10414, 145, 982, 1449), (10623, 354, 1191, 1658), (10836, 567, 1404, 1871),
    (11053, 141, 555, 2074), (11275, 363, 777, 2296), (11501, 589, 1003, 2522),
    (11732, 820, 1234, 2753), (11967, 1055, 1469, 2988), (12452, 6, 480, 1011),
    (12702, 256, 730, 1261), (12957, 511, 985, 1516), (13217, 771, 1245, 1776),
    (13482, 1036, 1510, 2041), (13752, 198, 398, 1166), (14028, 474, 674, 1442),
    (14309, 755, 955, 1723), (14596, 1042, 1242, 2010), (14888, 21, 299, 339),
    (15186, 319, 597, 637), (15490, 623, 901, 941), (15800, 933, 1211, 1251),
    (16117, 1250, 1528, 1568), (16440, 1573, 1851, 1891), (16769, 212, 1746, 2065),
    (17105, 548, 2082, 2401), (17448, 247, 551, 563), (17797, 596, 900, 912),
    (18153, 952, 1256, 1268), (18517, 1316, 1620, 1632), (18888, 1687, 1991, 2003),
    (19266, 2065, 2369, 2381), (19652, 166, 933, 1278), (20046, 560, 1327, 1672),
    (20447, 961, 1728, 2073), (20856, 351, 1699, 2330), (21274, 769, 2117, 2748),
    (22578, 36, 1493, 1760), (23030, 488, 1945, 2212), (23491, 436, 810, 855),
    (23961, 906, 1280, 1325), (24441, 425, 1006, 1062), (24930, 914, 1495, 1551),
    (25429, 1413, 1994, 2050), (25938, 503, 1414, 2138), (26457, 1022, 1933, 2657),
    (27527, 324, 918, 1114), (28078, 875, 1469, 1665), (28640, 1437, 2031, 2227),
    (29213, 521, 685, 1034), (29798, 64, 620, 700), (30394, 660, 1216, 1296),
    (31002, 376, 1502, 1553), (31623, 997, 2123, 2174), (32256, 146, 2151, 2792),
    (32902, 543, 1994, 2741), (33561, 39, 1466, 1497), (34233, 360, 435, 1794),
    (34918, 516, 1124, 1148), (35617, 1215, 1823, 1847), (36330, 239, 1037, 1496),
    (37057, 218, 1319, 1661), (37799, 261, 1988, 2332), (38555, 652, 1711, 2986),
    (39327, 660, 1023, 2333), (40917, 772, 820, 923), (41736, 1591, 1639, 1742),
    (42571, 2426, 2474, 2577), (44292, 289, 878, 1401), (45178, 66, 313, 399),
    (46082, 72, 117, 1135), (47004, 894, 1642, 1732), (47945, 274, 1624, 2213),
    (48904, 872, 2034, 2146), (49883, 793, 1024, 2642), (50881, 757, 1481, 1764),
    (51899, 681, 1000, 1778), (52937, 1719, 2038, 2816), (55076, 670, 1858, 2250),
    (56178, 355, 1495, 1904), (57302, 129, 543, 866), (58449, 1276, 1690, 2013),
    (59618, 150, 1262, 1422), (60811, 1343, 2455, 2615), (62028, 95, 437, 2126),
    (63269, 303, 2636, 2942), (64535, 83, 907, 2628), (65826, 37, 90, 1677),
    (67143, 1354, 1407, 2994), (68486, 21, 366, 1502), (69856, 335, 467, 684),
    (71254, 1733, 1865, 2082), (72680, 794, 933, 1147), (74134, 2248, 2387, 2601),
    (75617, 951, 1016, 2040), (77130, 109, 1353, 1698), (78673, 1029, 1748, 2887),
    (80247, 906, 1893, 2371), (81852, 1562, 1658, 1864), (85160, 218, 353, 1447),
    (86864, 221, 336, 2085), (88602, 596, 1774, 2820), (90375, 151, 645, 817),
    (92183, 163, 253, 2289), (94027, 934, 1129, 2823), (97827, 246, 278, 489),
    (99784, 201, 302, 842), (101780, 735, 1070, 1360), (108011, 7, 909, 1214),
    (110172, 108, 1071, 1953), (112376, 1227, 1354, 1618), (114624, 278, 1106, 1752),
    (116917, 646, 955, 1648), (119256, 320, 2544, 2864), (121642, 17, 333, 1116),
    (124075, 292, 1337, 2538), (126557, 925, 1872, 2510), (129089, 1272, 2093, 2264),
    (131671, 181, 616, 1747), (134305, 22, 1211, 2692), (139732, 690, 954, 1388),
    (142527, 49, 1262, 1544), (145378, 77, 1905, 2205), (148286, 431, 1675, 2754),
    (151252, 599, 790, 1710), (154278, 421, 1948, 2500), (157364, 432, 773, 1371),
    (170338, 222, 2099, 2128), (173745, 1046, 1116, 1699), (177220, 137, 1185, 1259),
    (180765, 317, 1305, 1649), (184381, 621, 1557, 2208), (188069, 60, 1091, 2582),
    (191831, 303, 1137, 2508), (195668, 506, 570, 992), (199582, 416, 618, 1698),
    (203574, 591, 2325, 2489), (207646, 329, 909, 1054), (211799, 845, 2502, 2523),
    (216035, 7, 401, 1305), (220356, 415, 928, 1859), (224764, 1293, 1911, 2692),
    (229260, 264, 774, 1309), (233846, 245, 580, 2379), (238523, 197, 580, 1861),
    (243294, 211, 654, 1275), (248160, 1302, 1935, 2383), (258187, 52, 412, 1221),
    (268619, 692, 1218, 2518), (273992, 883, 2345, 2467), (279472, 1121, 1554, 1857),
    (285062, 1184, 1997, 2020), (290764, 486, 1801, 2736), (296580, 579, 879, 2965),
    (302512, 964, 2871, 2985), (308563, 390, 752, 1740), (314735, 871, 1553, 2749),
    (321030, 1423, 1858, 2216), (334001, 1130, 2071, 2428), (347496, 544, 1176, 2483),
    (354446, 363, 377, 1231), (361535, 223, 721, 2812), (368766, 1237, 2155, 2519),
    (376142, 340, 1948, 2701), (383665, 1448, 1549, 1911), (391339, 133, 1264, 1870),
    (399166, 1073, 1517, 2185), (407150, 535, 768, 1328), (415294, 660, 1820, 2110),
    (432073, 17, 805, 2613), (440715, 689, 1010, 1274), (449530, 358, 636, 1219),
    (458521, 508, 1331, 2226), (477046, 306, 351, 474), (486587, 421, 1307, 2549),
    (496319, 1044, 1367, 1799), (506246, 209, 1885, 2465), (516371, 1257, 1404, 2134),
    (526699, 458, 1104, 1680), (537233, 170, 2036, 2387), (547978, 1045, 1427, 2822),
    (558938, 1181, 1634, 1967), (570117, 1060, 2112, 2354), (581520, 1984, 2297, 2464),
    (593151, 533, 2263, 2660),
)

# The fold plan: (reach, k, exponents of the multiplier), sorted by reach, the widest
# input an entry folds (2k - the multiplier's degree): _FOLD_TABLE's entries below
# _SPARSE_MIN_BITS, _SPARSE_TABLE's from there. A width w folds with the first entry whose
# reach is >= w.
_FOLD_PLAN = ([(2 * k - 31, k, tuple(i for i in range(32) if c >> i & 1))
               for k, c in _FOLD_TABLE if 2 * k - 31 < _SPARSE_MIN_BITS]
              + [(2 * k - c, k, (a, b, c)) for k, a, b, c in _SPARSE_TABLE if 2 * k - c >= _SPARSE_MIN_BITS])
_FOLD_REACH = [reach for reach, _, _ in _FOLD_PLAN]

# The cuts of _crc32c_pieces: (e, a, b, c) with x^e ≡ x^a + x^b + x^c (mod P), a < b < c <
# 1536, e a multiple of 8 (cuts fall between bytes), each e the first such at least
# _PIECE_BITS above the one before, up to the widest input taken at once
# (_PIECE_CHUNK); made by _search_piece_table(), checked by a test. Pieces of 32 KiB: of
# 16, 32 and 64 KiB the fastest from 256 KiB on (per piece: a Python-level step against
# the shifts of ~32 KiB; the accumulator, a piece wide, is reduced once).
_PIECE_BITS = 32768 * 8
_PIECE_MIN = 64 * 1024  # bytes: the least _crc32c_pieces takes (its first piece above a cut)
_PIECE_CHUNK = 1 << 20  # longer inputs: a MiB at a time (the CRC is incremental)
_PIECE_TABLE = (
    (264192, 2, 238, 1259), (526336, 95, 741, 1317), (789056, 6, 1244, 1331),
    (1057912, 4, 265, 288), (1320056, 83, 921, 1375), (1582200, 15, 715, 1182),
    (1844344, 783, 815, 1419), (2107312, 6, 155, 400), (2370296, 6, 388, 1047),
    (2632440, 242, 616, 870), (2895824, 1, 459, 1364), (3157968, 144, 1170, 1455),
    (3421024, 1, 219, 920), (3685616, 3, 509, 1394), (3951056, 7, 752, 754),
    (4213200, 62, 611, 906), (4479616, 3, 5, 247), (4743168, 6, 546, 788),
    (5005312, 217, 296, 837), (5268288, 2, 781, 1032), (5533848, 6, 769, 1155),
    (5797184, 4, 783, 971), (6059328, 226, 1308, 1465), (6322600, 3, 610, 1203),
    (6585240, 7, 126, 1398), (6847384, 576, 915, 964), (7111520, 3, 44, 1405),
    (7374088, 4, 8, 1006), (7638952, 6, 122, 195), (7901096, 24, 1031, 1092),
    (8163240, 803, 1173, 1494), (8425384, 265, 897, 1335),
)
# Piece i lies between cuts i and i + 1 (distances from the input's end, in bits) and is
# multiplied by terms i; the last piece of the input (from distance 32: the register's 32
# bits follow the message) by x^32 itself.
_PIECE_CUTS = (32,) + tuple(e for e, _, _, _ in _PIECE_TABLE)
_PIECE_TERMS: tuple[tuple[int, ...], ...] = ((32,),) + tuple((a, b, c) for _, a, b, c in _PIECE_TABLE)
# The accumulator's width: the widest piece (the first piece of an input may run up to 64
# bits past a table gap, see _crc32c_pieces) with its multiplier's degree.
_PIECE_WIDTH = max(hi - lo + terms[-1] for lo, hi, terms in zip(_PIECE_CUTS, _PIECE_CUTS[1:], _PIECE_TERMS)) + 64


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


def _powers_and_pairs(degree: int) -> tuple[list[int], dict[int, tuple[int, int]]]:
    """x^i mod P for i < ``degree``, and x^a + x^b mod P -> (a, b) for a < b < ``degree``
    (the first pair found for each value): the tables of the meet-in-the-middle searches."""
    powers = [1]
    for _ in range(1, degree):
        v = powers[-1] << 1
        powers.append(v ^ _POLY if v >> 32 else v)
    pairs: dict[int, tuple[int, int]] = {}
    for b in range(degree):
        for a in range(b):
            pairs.setdefault(powers[a] ^ powers[b], (a, b))
    return powers, pairs


def _smallest_triple(target: int, powers: list[int], pairs: dict[int, tuple[int, int]]) -> tuple[int, int, int] | None:
    """The a < b < c with x^a + x^b + x^c ≡ ``target`` and the smallest c, if any."""
    best: tuple[int, int, int] | None = None
    for c in range(len(powers)):
        if best is not None and c >= best[2]:
            break
        ab = pairs.get(target ^ powers[c])
        if ab is not None and c not in ab:
            a, b, top = sorted((ab[0], ab[1], c))
            if best is None or top < best[2]:
                best = (a, b, top)
    return best


def _search_sparse_table(start: int = 7000, stop: int = 600_000, step: float = 1.02,
                         max_degree: int = 3000) -> list[tuple[int, int, int, int]]:
    """How ``_SPARSE_TABLE`` was made (~20 s, ~0.5 GB): for k from ``start`` growing by
    ``step``, the a < b < c < ``max_degree`` with x^a + x^b + x^c ≡ x^k (mod P) and the
    smallest c (k without one are left out)."""
    powers, pairs = _powers_and_pairs(max_degree)
    table = []
    k = start
    while k < stop:
        best = _smallest_triple(_x_pow_mod(k), powers, pairs)
        if best is not None:
            table.append((k, *best))
        k = int(k * step) + 1
    return table


def _search_piece_table(spacing: int = _PIECE_BITS, stop: int = _PIECE_CHUNK * 8 + 32,
                        max_degree: int = 1536, pair_degree: int = 3000) -> list[tuple[int, int, int, int]]:
    """How ``_PIECE_TABLE`` was made (~10 s, ~0.5 GB): from ``spacing`` on, each cut the
    first multiple of 8 at least ``spacing`` above the previous one whose x^e has a
    representative x^a + x^b + x^c with c < ``max_degree`` (the one with the smallest c
    found by meeting in the middle over pairs below ``pair_degree``), until one reaches
    ``stop``."""
    powers, pairs = _powers_and_pairs(pair_degree)
    table: list[tuple[int, int, int, int]] = []
    e = spacing
    while not table or table[-1][0] < stop:
        best = _smallest_triple(_x_pow_mod(e), powers, pairs)
        if best is not None and best[2] < max_degree:
            table.append((e, *best))
            e += spacing
        else:
            e += 8
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
    plan = _FOLD_PLAN
    reach = _FOLD_REACH
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
        # H·x^(k+r)·... with r = d - d8: H·x^r·R + L at width k + r (the shifts below
        # gain r), which still fits (d8 + deg R <= k).
        _, k, terms = plan[find(reach, w)]
        split = (w - k) >> 3
        r = w - k - (split << 3)
        h = int.from_bytes(data[:split], "little") ^ seed
        shift = 2 * k - w + r
        acc = h << (shift - terms[0])
        for t in terms[1:]:
            acc ^= h << (shift - t)
        rv = acc ^ int.from_bytes(data[split:], "little")
        w = k + r
    return _reduce(rv, w)


def _reduce(rv: int, w: int) -> int:
    """The CRC (final XOR applied) of the register value V, held reversed at width ``w``
    in ``rv`` (see _crc32c_fold): folds down to a few hundred bits, then the word loop."""
    plan = _FOLD_PLAN
    reach = _FOLD_REACH
    find = bisect.bisect_left
    while w > _TAIL_BITS:
        # the first plan entry that reaches w: about half the width
        _, k, terms = plan[find(reach, w)]
        # V = H·x^k + L at width w -> H·R + L at width k (R ≡ x^k, R = sum of x^t over
        # terms). Reversed: L is the top k bits, H the low w - k bits, and H·x^t lands
        # shifted left by 2k - w - t.
        d = w - k
        h = rv & ((1 << d) - 1)
        base = 2 * k - w
        acc = h << (base - terms[0])
        for t in terms[1:]:
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


def _crc32c_pieces(data: bytes | bytearray | memoryview, crc: int) -> int:
    # As in _crc32c_fold, the input at width w = n + 32 bits is M·x^32 + s·x^n, reversed;
    # a piece between cuts lo < hi (distances from the end) is H·x^lo with H the piece's
    # own polynomial, reversed in int.from_bytes of its bytes, and H·x^t lands in the
    # accumulator (reversed at _PIECE_WIDTH) shifted left by _PIECE_WIDTH - (hi - lo) - t.
    w = len(data) * 8 + 32
    if not _PIECE_MIN * 8 <= w - 32 <= _PIECE_CHUNK * 8:
        raise ValueError("_crc32c_pieces takes {} to {} bytes".format(_PIECE_MIN, _PIECE_CHUNK))
    view = memoryview(data)
    cuts = _PIECE_CUTS
    terms = _PIECE_TERMS
    width = _PIECE_WIDTH
    # The first piece runs from the input's start to the highest cut at least 64 bits
    # below it (never a sliver: it holds the incoming register's 32 bits).
    j = bisect.bisect_right(cuts, w - 64) - 1
    end = (w - cuts[j]) >> 3
    h = int.from_bytes(view[:end], "little") ^ (crc ^ 0xFFFFFFFF)
    base = width - (w - cuts[j])
    a, b, c = terms[j]
    acc = (h << (base - a)) ^ (h << (base - b)) ^ (h << (base - c))
    for i in range(j - 1, 0, -1):
        lo, hi = cuts[i], cuts[i + 1]
        start = end
        end = (w - lo) >> 3
        h = int.from_bytes(view[start:end], "little")
        base = width - (hi - lo)
        a, b, c = terms[i]
        acc ^= (h << (base - a)) ^ (h << (base - b)) ^ (h << (base - c))
    # The last piece, distances 32 to cuts[1]: times x^32 (a shift of width - cuts[1]).
    acc ^= int.from_bytes(view[end:], "little") << (width - cuts[1])
    return _reduce(acc, width)


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
    if size <= _PIECE_CHUNK:
        return _crc32c_pieces(data, crc)
    view = memoryview(data)
    for start in range(0, size, _PIECE_CHUNK):
        crc = crc32c(view[start:start + _PIECE_CHUNK], crc)
    return crc
