"""Decode a ~1 MiB FetchResponse with kproto and with kafka-python 3.x on the same bytes.

    .venv/bin/python bench/bench_messages.py [--partitions N] [--record-bytes B] [--rounds R]
                                             [--aborted empty|null]

Builds one FetchResponse at the latest version both implement (v17) with many partitions,
encodes it with kproto, checks that kafka-python decodes the same values for every field of
every partition, then times both decoders (rounds alternate between the two so that load on
a shared machine hits both alike; best of R each) and prints both times and the ratio. Both
decoders are eager: every field of every partition is decoded into an object (kafka-python
also copies each records field into bytes; kproto's is a view of the input; an empty array,
such as an empty aborted_transactions, is left to kproto's lazy default). ``--aborted null``
sends null aborted_transactions, as Kafka does to read_uncommitted fetchers. kafka-python is
a benchmark-only dependency.

It also times a *floor*: a hand-written loop that does only what any eager decoder into
``__slots__`` objects must do on these bytes (create each object, one unpack per partition
and its stores, the records view, the topic UUIDs) and nothing else: no length checks, no
varints beyond the one-byte and two-byte forms these bytes use, no tag sections. It only
decodes this benchmark's bytes. kafka-python's time over the floor's is the best ratio such
a decoder could show here.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
import uuid
from itertools import repeat
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kproto.messages import FetchResponse  # noqa: E402

VERSION = 17


def build(partitions: int, record_bytes: int, topics: int = 20, aborted: str = "empty") -> bytes:
    per_topic = max(1, partitions // topics)
    blob = bytes(i & 0xFF for i in range(record_bytes))
    response = FetchResponse(throttle_time_ms=0, session_id=1, responses=[
        FetchResponse.FetchableTopicResponse(topic_id=uuid.UUID(int=t + 1), partitions=[
            FetchResponse.PartitionData(partition_index=p, high_watermark=100_000 + p,
                                        last_stable_offset=100_000 + p, log_start_offset=0,
                                        aborted_transactions=[] if aborted == "empty" else None,
                                        records=blob)
            for p in range(per_topic)])
        for t in range(topics)])
    return response.encode(VERSION)


def best_of(rounds: int, *fns) -> list[float]:
    """The best time of each function, running them in turn in every round."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


_HEAD = struct.Struct(">ihiB").unpack_from
_PARTITION = struct.Struct(">ihqqqBiBB").unpack_from


def floor_decode(data: bytes) -> FetchResponse:
    """The unavoidable work of an eager decode of ``build()``'s bytes (see the docstring)."""
    mv = memoryview(data)
    new = object.__new__
    topic_class, partition_class = FetchResponse.FetchableTopicResponse, FetchResponse.PartitionData
    response = new(FetchResponse)
    response.throttle_time_ms, response.error_code, response.session_id, n = _HEAD(mv, 0)
    pos = 11
    response.responses = topics = list(map(new, repeat(topic_class, n - 1)))
    for topic in topics:
        topic.topic_id = uuid.UUID(bytes=bytes(mv[pos:pos + 16]))
        n = mv[pos + 16]
        pos += 17
        topic.partitions = partitions = list(map(new, repeat(partition_class, n - 1)))
        for o in partitions:
            (o.partition_index, o.error_code, o.high_watermark, o.last_stable_offset,
             o.log_start_offset, n, o.preferred_read_replica, m, m2) = _PARTITION(mv, pos)
            if n == 0:
                o.aborted_transactions = None
            if m < 128:
                pos += 36
                end = pos + m - 1
            else:
                pos += 37
                end = pos + ((m & 127) | (m2 << 7)) - 1
            o.records = mv[pos:end]
            pos = end + 1  # the partition's empty tag section
        pos += 1  # the topic's empty tag section
    assert pos + 1 == len(data), "floor_decode only reads build()'s bytes"
    return response


PARTITION_FIELDS = ("partition_index", "error_code", "high_watermark", "last_stable_offset",
                    "log_start_offset", "preferred_read_replica")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--record-bytes", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--aborted", choices=("empty", "null"), default="empty")
    args = parser.parse_args(argv)
    try:
        from kafka.protocol.consumer.fetch import FetchResponse as KafkaPythonFetchResponse
    except ImportError:
        print("kafka-python 3.x is needed for the comparison: pip install 'kafka-python>=3'")
        return 1

    data = build(args.partitions, args.record_bytes, aborted=args.aborted)
    ours = FetchResponse.decode(data, VERSION)
    theirs = KafkaPythonFetchResponse.decode(data, version=VERSION)
    # Same bytes, same values: compare every field of every partition.
    assert (ours.throttle_time_ms, ours.error_code, ours.session_id) == \
        (theirs.throttle_time_ms, theirs.error_code, theirs.session_id)
    assert floor_decode(data) == ours  # the floor does the same decode, if only for these bytes
    for mine, other in zip(ours.responses, theirs.responses, strict=True):
        assert mine.topic_id == other.topic_id
        for a, b in zip(mine.partitions, other.partitions, strict=True):
            assert all(getattr(a, f) == getattr(b, f) for f in PARTITION_FIELDS)
            assert bytes(a.records) == bytes(b.records)
            assert a.aborted_transactions == b.aborted_transactions

    kproto_s, kafka_python_s, floor_s = best_of(
        args.rounds, lambda: FetchResponse.decode(data, VERSION),
        lambda: KafkaPythonFetchResponse.decode(data, version=VERSION),
        lambda: floor_decode(data))
    count = sum(len(t.partitions) for t in ours.responses)
    print("FetchResponse v{}: {:,} bytes, {} topics, {} partitions, {} record bytes each, "
          "{} aborted_transactions".format(VERSION, len(data), len(ours.responses), count,
                                           args.record_bytes, args.aborted))
    print("kproto        {:8.3f} ms".format(kproto_s * 1000))
    print("kafka-python  {:8.3f} ms".format(kafka_python_s * 1000))
    print("floor         {:8.3f} ms (the unavoidable work of an eager decode)".format(
        floor_s * 1000))
    print("ratio         {:8.2f}x (kafka-python time / kproto time)".format(
        kafka_python_s / kproto_s))
    print("floor ratio   {:8.2f}x (kafka-python time / floor time: the most an eager decoder "
          "could show)".format(kafka_python_s / floor_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
