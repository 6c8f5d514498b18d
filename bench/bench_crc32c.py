"""CRC-32C throughput: kproto.records.crc32c vs the one-byte-at-a-time table loop.

    .venv/bin/python bench/bench_crc32c.py [--repeat 5]

Same run, same random inputs, sizes 100 B to 4 MiB (plus the sizes around the switch between
the word loop and the folding with --crossover). Best of N timings, MB/s. From 256 KiB also
the halvings alone, over 128 KiB pieces one after the other (what kproto used there before
its cut table: ``_crc32c_pieces``).
Also: ``int.from_bytes`` alone over the same input (the first step of kproto's long-input
method, so a bound on it), and zlib's CRC-32 (C, another polynomial) for scale.
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kproto.records.crc32c import (_FOLD_CHUNK, _crc32c_fold, _crc32c_small, crc32c,  # noqa: E402
                                   crc32c_table)

SIZES = [100, 1024, 10 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024, 4096 * 1024]
CROSSOVER = [32, 64, 96, 128, 144, 160, 192, 256, 512]


def rate(fn, data: bytes, repeat: int) -> float:
    """MB/s of fn(data), best of ``repeat`` timings of ~0.1 s each."""
    number = max(1, 100_000 // max(len(data), 1))
    best = min(timeit.repeat(lambda: fn(data), number=number, repeat=repeat)) / number
    return len(data) / best / 1e6


def halvings(data: bytes) -> int:
    view = memoryview(data)
    crc = 0
    for start in range(0, len(data), _FOLD_CHUNK):
        crc = _crc32c_fold(view[start:start + _FOLD_CHUNK], crc)
    return crc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--crossover", action="store_true",
                    help="also time both kproto algorithms around the threshold")
    args = ap.parse_args()
    print("{:>9} {:>14} {:>14} {:>8} {:>15} {:>18} {:>16}".format(
        "size", "table MB/s", "kproto MB/s", "speedup", "halvings MB/s", "int.from_bytes MB/s",
        "zlib.crc32 MB/s"))
    for size in SIZES:
        data = os.urandom(size)
        assert crc32c(data) == crc32c_table(data)
        t = rate(crc32c_table, data, args.repeat)
        k = rate(crc32c, data, args.repeat)
        f = rate(lambda d: int.from_bytes(d, "little"), data, args.repeat)
        z = rate(zlib.crc32, data, args.repeat)
        h = "-"
        if size > 2 * _FOLD_CHUNK:
            assert halvings(data) == crc32c(data)
            h = "{:.2f}".format(rate(halvings, data, args.repeat))
        print("{:>9} {:>14.2f} {:>14.2f} {:>7.1f}x {:>15} {:>18.0f} {:>16.0f}".format(size, t, k, k / t, h, f, z))
    if args.crossover:
        print("\n{:>9} {:>14} {:>14} {:>14}".format("size", "table MB/s", "slicing-8 MB/s",
                                                   "folding MB/s"))
        for size in CROSSOVER:
            data = os.urandom(size)
            print("{:>9} {:>14.2f} {:>14.2f} {:>14.2f}".format(
                size, rate(crc32c_table, data, args.repeat),
                rate(lambda d: _crc32c_small(d, 0), data, args.repeat),
                rate(lambda d: _crc32c_fold(d, 0), data, args.repeat)))


if __name__ == "__main__":
    main()
