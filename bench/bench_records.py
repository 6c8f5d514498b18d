"""Records/s decoding 1 MiB of 100-byte records: kproto vs kafka-python 3.x MemoryRecords.

    .venv/bin/python bench/bench_records.py [--mib 1] [--repeat 9] [--batch-kib 16,1024]

The same bytes for both, codecs none and lz4, with and without CRC checks, in 16 KiB
producer batches (batch.size=16384) and in one batch of the whole MiB (what librdkafka and
Java producers write with a large batch.size; Tansu kept ~4,400 records a batch). "kproto" iterates ``read_batches`` and every
record; "kafka-python" iterates ``MemoryRecords`` and every record, calling
``validate_crc()`` per batch when CRCs are checked (what its Fetcher does with
check_crcs=True). Both touch every record's offset, key and value. Best of N interleaved runs.
"consumer" is kproto's consume path without the network: ``CompletedFetch.fetch_records(500)``
over the same bytes until empty (ConsumerRecords, as ``poll()`` returns them; a big batch
is decoded 500 records at a time as the polls reach them).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kproto import codecs  # noqa: E402
from kproto.records import RecordBatchBuilder, read_batches  # noqa: E402

BATCH_BYTES = 16 * 1024
VALUE_SIZE = 100


def make_fetch(total_bytes: int, codec: int, batch_bytes: int = BATCH_BYTES) -> tuple[bytes, int]:
    """~total_bytes of uncompressed records in ~batch_bytes batches; (bytes, record count)."""
    rnd = os.urandom(VALUE_SIZE // 2).hex().encode()  # printable, compresses ~2x
    parts, offset, produced = [], 0, 0
    ts = 1_700_000_000_000
    while produced < total_bytes:
        b = RecordBatchBuilder(base_offset=offset, compression_type=codec)
        size = 0
        while size < batch_bytes and produced + size < total_bytes:
            key = b"key-%08d" % offset
            value = (rnd[offset % 50:] + rnd[:offset % 50])[:VALUE_SIZE]
            b.append(key, value, timestamp=ts + offset)
            size += len(key) + len(value) + 8
            offset += 1
        produced += size
        parts.append(b.build())
    return b"".join(parts), offset


def run_kproto(data: bytes, check: bool) -> int:
    n = 0
    for batch in read_batches(data, check_crcs=check):
        for r in batch.records:
            r.offset, r.key, r.value
            n += 1
    return n


def run_kproto_consumer(data: bytes, check: bool) -> int:
    from kproto.consumer.fetch.completed_fetch import CompletedFetch
    from kproto.messages import FetchResponse
    from kproto.structs import TopicPartition

    part = FetchResponse.PartitionData(records=data)
    fetch = CompletedFetch(TopicPartition("bench", 0), part, 0, check_crcs=check)
    n = 0
    while True:
        records = fetch.fetch_records(500)
        if not records:
            return n
        for r in records:
            r.offset, r.key, r.value
            n += 1


def run_kafka_python(data: bytes, check: bool) -> int:
    from kafka.record.memory_records import MemoryRecords

    n = 0
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if check and not batch.validate_crc():
            raise RuntimeError("bad crc")
        for r in batch:
            r.offset, r.key, r.value
            n += 1
    return n


def best_times(data: bytes, check: bool, repeat: int) -> tuple[float, float, float]:
    """Best times of kproto, kproto's consumer path and kafka-python, runs interleaved so
    load affects them alike."""
    tk = tc = tp = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run_kproto(data, check)
        t1 = time.perf_counter()
        run_kproto_consumer(data, check)
        t2 = time.perf_counter()
        run_kafka_python(data, check)
        t3 = time.perf_counter()
        tk, tc, tp = min(tk, t1 - t0), min(tc, t2 - t1), min(tp, t3 - t2)
    return tk, tc, tp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--batch-kib", default="16,1024",
                    help="batch sizes to run, comma-separated KiB (default 16,1024)")
    args = ap.parse_args()
    print("{:<6} {:>7} {:<5} {:>8} {:>14} {:>16} {:>14} {:>7}".format(
        "codec", "batch", "crc", "records", "kproto rec/s", "consumer rec/s", "kafka-py rec/s",
        "ratio"))
    for codec in (codecs.NONE, codecs.LZ4):
        for batch_kib in (int(k) for k in args.batch_kib.split(",")):
            data, count = make_fetch(int(args.mib * 1024 * 1024), codec, batch_kib * 1024)
            for check in (False, True):
                assert (run_kproto(data, check) == run_kproto_consumer(data, check)
                        == run_kafka_python(data, check) == count)
                tk, tc, tp = best_times(data, check, args.repeat)
                print("{:<6} {:>5}Ki {:<5} {:>8} {:>14,.0f} {:>16,.0f} {:>14,.0f} {:>6.2f}x".format(
                    codecs.CODEC_NAMES[codec], batch_kib, "on" if check else "off", count,
                    count / tk, count / tc, count / tp, tp / tk))


if __name__ == "__main__":
    main()
