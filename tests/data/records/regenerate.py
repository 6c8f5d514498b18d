"""Regenerate the golden record batches in this directory (run from the repo root):

    .venv/bin/python -m tests.data.records.regenerate

Records are written by an independent producer (librdkafka, through confluent-kafka) to
real brokers started on 127.0.0.1 by ``tests.brokers`` (librdkafka's mock cluster, and
Tansu for transactions, whose markers carry valid CRCs), then fetched raw with one Fetch
per batch (``tests.brokers.raw``) and stored unchanged:

* ``<name>.bin``: the concatenated ``records`` bytes of the fetches;
* ``<name>.json``: what the producer wrote, independent of kproto's decoder: per record
  offset, key, value, headers (hex, null as None) and CreateTime timestamp, from the
  producer's inputs and its delivery reports; plus the expected transaction markers.

The Fetch request/response classes are kproto's generated ``kproto.messages`` (a separate
layer, tested on its own); the record bytes are not decoded here, only split at batch
boundaries to find the next fetch offset.
"""

from __future__ import annotations

import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS_PER_CODEC = 60
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _hex(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def _next_offset(data: bytes) -> int:
    """Offset after the last whole v2 batch in ``data`` (base offset + lastOffsetDelta + 1)."""
    pos = 0
    nxt = None
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        nxt = base + delta + 1
        pos += 12 + length
    if nxt is None:
        raise RuntimeError("no whole batch in the fetch")
    return nxt


def fetch_all(broker, topic: str, end_offset: int) -> bytes:
    """Fetch a partition's batches from offset 0 up to ``end_offset`` (one or more Fetches)."""
    parts = []
    offset = 0
    while offset < end_offset:
        data = broker.raw_fetch(topic, 0, offset)
        if not data:
            raise RuntimeError("empty fetch at offset {}".format(offset))
        parts.append(data)
        offset = _next_offset(data)
    return b"".join(parts)


def _records_json(written) -> list[dict]:
    return [{"offset": w.offset, "key": _hex(w.key), "value": _hex(w.value),
             "headers": [[k, _hex(v)] for k, v in w.headers], "timestamp": w.timestamp}
            for w in written]


def _write(name: str, data: bytes, meta: dict) -> None:
    with open(os.path.join(HERE, name + ".bin"), "wb") as f:
        f.write(data)
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote {}.bin ({} bytes)".format(name, len(data)))


def main() -> None:
    import confluent_kafka

    from tests.brokers.mock_cluster import MockCluster
    from tests.brokers.tansu import TansuBroker

    producer = "librdkafka {}".format(confluent_kafka.libversion()[0])
    with MockCluster(1) as broker:
        for codec in CODECS:
            topic = broker.new_topic(partitions=1)
            written = broker.produce(topic, RECORDS_PER_CODEC, codec=codec)
            data = fetch_all(broker, topic, written[-1].offset + 1)
            _write("mock-" + codec, data, {
                "producer": producer, "broker": "librdkafka mock cluster", "codec": codec,
                "records": _records_json(written), "markers": []})
        # The mock writes its transaction markers with CRC 0 (kept: a real-world case
        # of a control batch that fails check_crcs).
        topic = broker.new_topic(partitions=1)
        tx = broker.produce_transactions(topic, committed=5, aborted=4)
        end = tx.aborted[-1].offset + 2
        _write("mock-transactions", fetch_all(broker, topic, end), {
            "producer": producer, "broker": "librdkafka mock cluster", "codec": "none",
            "records": _records_json(tx.committed + tx.aborted),
            "markers": [[tx.committed[-1].offset + 1, "commit"],
                        [tx.aborted[-1].offset + 1, "abort"]]})
    with TansuBroker() as broker:
        for codec in ("none", "zstd"):
            topic = broker.new_topic(partitions=1)
            tx = broker.produce_transactions(topic, committed=5, aborted=4, codec=codec)
            end = tx.aborted[-1].offset + 2
            _write("tansu-transactions-" + codec, fetch_all(broker, topic, end), {
                "producer": producer, "broker": "tansu", "codec": codec,
                "records": _records_json(tx.committed + tx.aborted),
                "committed": len(tx.committed),
                "markers": [[tx.committed[-1].offset + 1, "commit"],
                            [tx.aborted[-1].offset + 1, "abort"]]})


if __name__ == "__main__":
    main()
