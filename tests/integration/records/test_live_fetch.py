"""Live: librdkafka (confluent-kafka) writes to a real broker, one raw Fetch per batch
returns the bytes, kproto decodes them (the golden files, but fresh, on every broker)."""

import pytest

from kproto import codecs
from kproto.records import read_batches
from tests.brokers import seeding
from tests.data.records.regenerate import fetch_all

# The bytes a broker serves: Tansu is a second implementation of them (tests/conftest.py).
pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka", "tansu")


@pytest.mark.broker
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_fresh_batches_from_broker(broker, codec):
    topic = broker.new_topic(partitions=1)
    # Batches of 10: librdkafka sends a batch uncompressed when the codec would not make it
    # smaller, which small batches of a loaded machine hit. The first record can still
    # leave alone (seen under load), and one or two small records may not shrink:
    # batches of three or more records must carry the codec.
    written = broker.produce(topic, 40, codec=codec,
                             producer_config={"batch.num.messages": 10, "linger.ms": 60_000})
    data = fetch_all(broker, topic, written[-1].offset + 1)
    batches = list(read_batches(data, check_crcs=True, topic=topic, partition=0))
    multi = [b for b in batches if b.last_offset_delta >= 2]
    assert multi and {codecs.CODEC_NAMES[b.compression_type] for b in multi} == {codec}
    got = [r for b in batches for r in b.records]
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (w.offset, w.key, w.value, tuple(w.headers), w.timestamp) for w in written]


@pytest.mark.broker
@pytest.mark.needs("transactions", "valid_control_batch_crc")
def test_fresh_transaction_markers(broker):
    topic = broker.new_topic(partitions=1)
    tx = broker.produce_transactions(topic, committed=3, aborted=2)
    data = fetch_all(broker, topic, tx.aborted[-1].offset + 2)
    markers = [(m.offset, m.is_commit) for m in
               (b.control_record() for b in read_batches(data, check_crcs=True)) if m]
    assert markers == [(tx.committed[-1].offset + 1, True), (tx.aborted[-1].offset + 1, False)]


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_messages_from_the_broker(mock_cluster, magic):
    # Legacy messages written by kafka-python's builder, stored by the mock, fetched raw
    # (the mock answers one stored message set per Fetch, so fetch until the end). The
    # mock refuses compressed legacy messages (UNSUPPORTED_VERSION): those are covered
    # offline by tests/unit/records/test_kafka_python_writer.py.
    codec = "none"
    topic = mock_cluster.new_topic()
    written = seeding.produce_legacy(mock_cluster.bootstrap_servers, topic, 12, magic=magic,
                                     codec=codec)
    got = []
    while len(got) < len(written):
        data = mock_cluster.raw_fetch(topic, 0, len(got), version=3)
        assert data, "the broker returned nothing at offset {}".format(len(got))
        for batch in read_batches(data, topic=topic, partition=0):
            assert batch.magic == magic
            assert batch.compression_type == seeding.CODEC_IDS[codec]
            got.extend(batch.records)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in got] == \
        [(w.offset, w.key, w.value, w.timestamp, ()) for w in written]
    assert {r.timestamp_type for r in got} == ({-1} if magic == 0 else {0})
    assert all(r.checksum is not None for r in got)
