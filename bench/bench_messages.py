"""Decode a ~1 MiB FetchResponse with kproto and with kafka-python 3.x on the same bytes.

    .venv/bin/python bench/bench_messages.py [--partitions N] [--record-bytes B] [--rounds R]

Builds one FetchResponse at the latest version both implement (v17) with many partitions,
encodes it with kproto, checks that kafka-python decodes the same values, then times both
decoders (best of R rounds, one process) and prints both times and the ratio. kafka-python is
a benchmark-only dependency.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kproto.messages import FetchResponse  # noqa: E402

VERSION = 17


def build(partitions: int, record_bytes: int, topics: int = 20) -> bytes:
    per_topic = max(1, partitions // topics)
    blob = bytes(i & 0xFF for i in range(record_bytes))
    response = FetchResponse(throttle_time_ms=0, session_id=1, responses=[
        FetchResponse.FetchableTopicResponse(topic_id=uuid.UUID(int=t + 1), partitions=[
            FetchResponse.PartitionData(partition_index=p, high_watermark=100_000 + p,
                                        last_stable_offset=100_000 + p, log_start_offset=0,
                                        records=blob)
            for p in range(per_topic)])
        for t in range(topics)])
    return response.encode(VERSION)


def best_of(rounds: int, fn) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--record-bytes", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    try:
        from kafka.protocol.consumer.fetch import FetchResponse as KafkaPythonFetchResponse
    except ImportError:
        print("kafka-python 3.x is needed for the comparison: pip install 'kafka-python>=3'")
        return 1

    data = build(args.partitions, args.record_bytes)
    ours = FetchResponse.decode(data, VERSION)
    theirs = KafkaPythonFetchResponse.decode(data, version=VERSION)
    # Same bytes, same values: compare every partition's offsets and records.
    for mine, other in zip(ours.responses, theirs.responses, strict=True):
        assert mine.topic_id == other.topic_id
        for a, b in zip(mine.partitions, other.partitions, strict=True):
            assert (a.partition_index, a.high_watermark, bytes(a.records)) == \
                (b.partition_index, b.high_watermark, bytes(b.records))

    kproto_s = best_of(args.rounds, lambda: FetchResponse.decode(data, VERSION))
    kafka_python_s = best_of(args.rounds,
                             lambda: KafkaPythonFetchResponse.decode(data, version=VERSION))
    count = sum(len(t.partitions) for t in ours.responses)
    print("FetchResponse v{}: {:,} bytes, {} topics, {} partitions, {} record bytes each".format(
        VERSION, len(data), len(ours.responses), count, args.record_bytes))
    print("kproto        {:8.3f} ms".format(kproto_s * 1000))
    print("kafka-python  {:8.3f} ms".format(kafka_python_s * 1000))
    print("ratio         {:8.2f}x (kafka-python time / kproto time)".format(
        kafka_python_s / kproto_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
