"""CRC-32C throughput: kproto.records.crc32c vs the one-byte-at-a-time table loop.

    .venv/bin/python bench/bench_crc32c.py [--repeat 5]

Same run, same random inputs, sizes 100 B, 1 KiB, 64 KiB and 1 MiB (plus the sizes around
the switch between kproto's two algorithms with --crossover). Best of N timings, MB/s.
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kproto.records.crc32c import (_crc32c_fold, _crc32c_small, crc32c,  # noqa: E402
                                   crc32c_table)

SIZES = [100, 1024, 64 * 1024, 1024 * 1024]
CROSSOVER = [32, 64, 96, 128, 144, 160, 192, 256, 512]


def rate(fn, data: bytes, repeat: int) -> float:
    """MB/s of fn(data), best of ``repeat`` timings of ~0.1 s each."""
    number = max(1, 100_000 // max(len(data), 1))
    best = min(timeit.repeat(lambda: fn(data), number=number, repeat=repeat)) / number
    return len(data) / best / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--crossover", action="store_true",
                    help="also time both kproto algorithms around the threshold")
    args = ap.parse_args()
    print("{:>9} {:>14} {:>14} {:>8}".format("size", "table MB/s", "kproto MB/s", "speedup"))
    for size in SIZES:
        data = os.urandom(size)
        assert crc32c(data) == crc32c_table(data)
        t = rate(crc32c_table, data, args.repeat)
        k = rate(crc32c, data, args.repeat)
        print("{:>9} {:>14.2f} {:>14.2f} {:>7.1f}x".format(size, t, k, k / t))
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
