"""kafka-python 3.x's record builders as an independent writer (and its MemoryRecords as an
independent reader of kproto's builder): every codec, magic 0, 1 and 2."""

import pytest

from kproto import codecs
from kproto.errors import CorruptRecordError
from kproto.records import (CREATE_TIME, NO_TIMESTAMP_TYPE, LegacyBatch, RecordBatch,
                            build_batch, build_message_set, read_batches)

RECORDS = [
    (None, b"value-0", [], 1_700_000_000_000),
    (b"key-1", None, [("h1", b"x"), ("h2", None)], 1_700_000_000_005),
    (b"", b"", [("\u00e9t\u00e9", b"\xff" * 3)], 1_700_000_000_003),
    (b"k" * 300, b"v" * 5000, [], 1_700_000_100_000),  # multi-byte varints
]


def _kafka_python_v2(codec, base_offset=0, transactional=False):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec,
                                  is_transactional=transactional,
                                  producer_id=7 if transactional else -1,
                                  producer_epoch=3 if transactional else -1,
                                  base_sequence=11 if transactional else -1,
                                  batch_size=1 << 20)
    for i, (k, v, h, ts) in enumerate(RECORDS):
        b.append(i, timestamp=ts, key=k, value=v, headers=h)
    data = bytearray(b.build())
    data[0:8] = base_offset.to_bytes(8, "big")  # the broker assigns the base offset
    return bytes(data)


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4,
                                   codecs.ZSTD])
def test_decodes_kafka_python_v2_batches(codec):
    data = _kafka_python_v2(codec, base_offset=1000, transactional=True)
    (batch,) = list(read_batches(data, check_crcs=True))
    assert isinstance(batch, RecordBatch)
    assert (batch.magic, batch.compression_type, batch.record_count) == (2, codec, 4)
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (1000, 1003, 1004)
    assert batch.is_transactional and not batch.is_control_batch
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 11)
    assert batch.base_timestamp == 1_700_000_000_000
    assert batch.max_timestamp == 1_700_000_100_000
    assert batch.size_in_bytes == len(data)
    got = list(batch.records)
    assert [r.offset for r in got] == [1000, 1001, 1002, 1003]
    for rec, (k, v, h, ts) in zip(got, RECORDS):
        assert (rec.key, rec.value, rec.headers, rec.timestamp) == (k, v, tuple(h), ts)
        assert rec.timestamp_type == CREATE_TIME
        assert rec.serialized_key_size == (-1 if k is None else len(k))
        assert rec.serialized_value_size == (-1 if v is None else len(v))
        expected_hsize = (sum(len(hk.encode()) + len(hv or b"") for hk, hv in h) if h else -1)
        assert rec.serialized_header_size == expected_hsize


# kafka-python needs the xxhash package (not a test dependency) for magic 0 lz4; kproto's
# own legacy lz4 framing is checked in tests/unit/records/test_roundtrip.py and tests/unit/codecs/.
@pytest.mark.parametrize("magic,codec", [(m, c) for m in (0, 1) for c in range(4)
                                         if (m, c) != (0, codecs.LZ4)])
def test_decodes_kafka_python_legacy_message_sets(magic, codec):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v, _, ts) in enumerate(RECORDS):
        b.append(i, timestamp=ts, key=k, value=v)
    data = bytearray(b.build())
    # kafka-python writes producer-side offsets (0..n-1 inner, and for a wrapper the last
    # inner offset); a broker assigns absolute offsets: v1 keeps relative inner offsets and
    # puts the absolute last offset on the wrapper, v0 rewrites the inner offsets.
    base = 500
    batches = list(read_batches(bytes(data), check_crcs=True))
    if codec == codecs.NONE:
        assert len(batches) == 4
        assert [b.offset for b in batches] == [0, 1, 2, 3]
    else:
        assert len(batches) == 1
        if magic == 1:
            data[0:8] = (base + 3).to_bytes(8, "big")
            batches = list(read_batches(bytes(data), check_crcs=True))
            assert [r.offset for r in batches[0].records] == [base, base + 1, base + 2,
                                                              base + 3]
            assert batches[0].base_offset == base
    assert all(isinstance(b, LegacyBatch) and b.magic == magic for b in batches)
    got = [r for b in batches for r in b.records]
    assert [(r.key, r.value) for r in got] == [(k, v) for k, v, _, _ in RECORDS]
    if magic == 1:
        assert [r.timestamp for r in got] == [ts for _, _, _, ts in RECORDS]
        assert {r.timestamp_type for r in got} == {CREATE_TIME}
    else:
        assert {(r.timestamp, r.timestamp_type) for r in got} == {(-1, NO_TIMESTAMP_TYPE)}
    assert all(r.headers == () and r.checksum is not None for r in got)


def _kafka_python_v1_wrapper(codec):
    """A magic 1 compressed wrapper exactly as kafka-python's producer writes it: wrapper
    offset 0, inner relative offsets 0..n-1 (no broker has assigned offsets yet)."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=1, compression_type=codec, batch_size=1 << 20)
    for i, (k, v, _, ts) in enumerate(RECORDS):
        b.append(i, timestamp=ts, key=k, value=v)
    return bytearray(b.build())


@pytest.mark.parametrize("codec", [codecs.GZIP, codecs.SNAPPY, codecs.LZ4])
def test_producer_side_v1_wrapper_keeps_its_inner_offsets(codec):
    data = _kafka_python_v1_wrapper(codec)
    assert int.from_bytes(data[0:8], "big") == 0  # as written, not a broker's offset
    (batch,) = list(read_batches(bytes(data), check_crcs=True))
    assert [r.offset for r in batch.records] == [0, 1, 2, 3]
    assert batch.base_offset == 0
    records, error = batch.decode_records()
    assert error is None and [r[0] for r in records] == [0, 1, 2, 3]
    assert [(r.key, r.value) for r in batch.records] == [(k, v) for k, v, _, _ in RECORDS]


def test_v1_wrapper_offset_below_its_last_inner_offset_is_corrupt():
    data = _kafka_python_v1_wrapper(codecs.GZIP)
    data[0:8] = (2).to_bytes(8, "big")  # neither 0 nor >= the last inner offset (3)
    (batch,) = list(read_batches(bytes(data), check_crcs=True))
    records, error = batch.decode_records()
    assert records == [] and isinstance(error, CorruptRecordError)
    assert "less than the last inner offset" in str(error)
    with pytest.raises(CorruptRecordError):
        list(batch.records)


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4,
                                   codecs.ZSTD])
def test_kafka_python_reads_kproto_v2(codec):
    from kafka.record.memory_records import MemoryRecords

    data = build_batch([(k, v, h, ts) for k, v, h, ts in RECORDS], base_offset=42,
                       compression_type=codec, producer_id=9, producer_epoch=1,
                       base_sequence=0, is_transactional=True)
    (batch,) = list(MemoryRecords(data))
    assert batch.validate_crc()
    assert batch.is_transactional and batch.producer_id == 9
    got = [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in batch]
    assert got == [(42 + i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(RECORDS)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP, codecs.SNAPPY])
def test_kafka_python_reads_kproto_legacy(magic, codec):
    from kafka.record.memory_records import MemoryRecords

    data = build_message_set([(k, v, ts) for k, v, _, ts in RECORDS], magic=magic,
                             base_offset=10, compression_type=codec)
    got = []
    for batch in MemoryRecords(data):
        assert batch.validate_crc()
        got.extend((r.offset, r.key, r.value) for r in batch)
    assert got == [(10 + i, k, v) for i, (k, v, _, _) in enumerate(RECORDS)]
