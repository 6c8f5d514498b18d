"""CRC-32C (Castagnoli), the checksum of RecordBatch v2, in pure Python.

Owns ``crc32c(data, crc=0)``: incremental like ``zlib.crc32`` (pass the previous result
as ``crc`` to continue a running checksum).

Two algorithms, picked by input size:

* short inputs: the classic reflected one-byte table loop (fastest below a few hundred
  bytes, where per-call overhead dominates);
* long inputs: the whole input becomes one big integer, i.e. one polynomial M(x) over
  GF(2), and the CRC register is ``(M(x)·x^32 + s(x)·x^n) mod P(x)``. The remainder is
  found by *folding*: split V = H·x^k + L and replace it by ``H·(x^k mod P) + L``, which
  has the same remainder but about half the bits. ``H·c`` for a 32-bit constant c is a
  carry-less multiplication: one shift and XOR of the big integer per set bit of c, and
  CPython does those at C speed per machine word. A few dozen big-integer operations per
  halving replace one Python-level loop iteration per byte.

The bit order: CRC-32C is a *reflected* CRC (the least significant bit of each byte is the
highest-degree coefficient). ``bytes.translate`` with a bit-reversal table, then
``int.from_bytes(..., "big")``, yields the polynomial in the usual bit order (bit i is the
coefficient of x^i), so the folding works on plain integers; only the 32-bit result is
reflected back.
"""

from __future__ import annotations

__all__ = ["crc32c", "crc32c_table"]

# Castagnoli polynomial, reflected (for the table loop) and in normal bit order with the
# x^32 term (for the folding reduction).
_POLY_REFLECTED = 0x82F63B78
_POLY = 0x11EDC6F41

# Below this many bytes the table loop wins (measured by bench/bench_crc32c.py; the
# folding cost is a fixed ~60 big-int operations plus per-level work).
FOLD_THRESHOLD = 128


def _make_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY_REFLECTED if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()

# Byte -> the same byte with its bits reversed (for bytes.translate).
_REV8 = bytes(int("{:08b}".format(b)[::-1], 2) for b in range(256))


def _reflect32(v: int) -> int:
    return int("{:032b}".format(v)[::-1], 2)


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


# _XPOW[j] = x^(2^j) mod P, for fold distances k = 2^j bits. Squaring builds each from
# the previous; 2^40 bits (128 GiB) is far beyond any input.
_XPOW = [2]
for _ in range(40):
    _XPOW.append(_mod_p(_clmul(_XPOW[-1], _XPOW[-1])))
# The set bits of each constant, so folding does one shift+XOR per set bit.
_XPOW_BITS = [tuple(i for i in range(32) if c >> i & 1) for c in _XPOW]

# Normal-order (MSB-first) table: _TABLE_N[b] = b(x)·x^32 mod P, for the final 64->32 bit
# reduction.
_TABLE_N = [_mod_p(b << 32) for b in range(256)]


def crc32c_table(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C with the one-byte-at-a-time table loop (the reference algorithm)."""
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _crc32c_fold(data: bytes | bytearray | memoryview, crc: int) -> int:
    n = len(data) * 8
    m = int.from_bytes(bytes(data).translate(_REV8), "big")
    # Register after the input: (M·x^32 + s·x^n) mod P, where s is the incoming register
    # (the previous CRC with the final XOR undone) in normal bit order.
    s = _reflect32(crc ^ 0xFFFFFFFF)
    v = (m << 32) ^ (s << n)
    xpow_bits = _XPOW_BITS
    nbits = v.bit_length()
    while nbits > 64:
        # Fold at k = the largest power of two below nbits: H has at most k bits.
        j = (nbits - 1).bit_length() - 1
        k = 1 << j
        h = v >> k
        acc = v & ((1 << k) - 1)
        for i in xpow_bits[j]:
            acc ^= h << i
        v = acc
        nbits = v.bit_length()
    # v < 2^64: v = hi·x^32 + lo; hi·x^32 mod P by the MSB-first table over hi's 4 bytes.
    hi = v >> 32
    r = 0
    table_n = _TABLE_N
    for shift in (24, 16, 8, 0):
        r = ((r << 8) & 0xFFFFFFFF) ^ table_n[((r >> 24) ^ (hi >> shift)) & 0xFF]
    r ^= v & 0xFFFFFFFF
    return _reflect32(r) ^ 0xFFFFFFFF


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of ``data``, continuing from ``crc`` (the result of a previous call)."""
    if len(data) < FOLD_THRESHOLD:
        table = _TABLE
        crc ^= 0xFFFFFFFF
        for b in data:
            crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
        return crc ^ 0xFFFFFFFF
    return _crc32c_fold(data, crc)
