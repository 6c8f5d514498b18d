"""The builder and the decoder against each other: every codec, headers, control batches,
transactional flags, timestamp types, delete horizon, and legacy v0/v1 offset rules."""

import struct

import pytest
from hypothesis import given, settings, strategies as st

from kproto import codecs
from kproto.records import (CONTROL_ABORT, CONTROL_COMMIT, CREATE_TIME, LOG_APPEND_TIME,
                            RecordBatchBuilder, build_batch, build_control_batch,
                            build_message_set, read_batches)

CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=10), maybe_bytes), max_size=3)
record = st.tuples(maybe_bytes, maybe_bytes, headers,
                   st.integers(1_600_000_000_000, 1_800_000_000_000))


@settings(max_examples=40, deadline=None)
@given(st.lists(record, min_size=1, max_size=40), st.sampled_from(CODECS),
       st.integers(0, 2**40))
def test_v2_round_trip(records, codec, base_offset):
    data = build_batch(records, base_offset=base_offset, compression_type=codec)
    (batch,) = list(read_batches(data))
    assert batch.record_count == len(records)
    assert batch.last_offset == base_offset + len(records) - 1
    assert batch.max_timestamp == max(r[3] for r in records)
    got = list(batch.records)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (k, v, tuple(h), ts) for k, v, h, ts in records]
    assert [r.offset for r in got] == list(range(base_offset, base_offset + len(records)))


def test_batch_header_fields_and_flags():
    b = RecordBatchBuilder(base_offset=77, compression_type=codecs.ZSTD, producer_id=123456789,
                           producer_epoch=5, base_sequence=42, is_transactional=True,
                           partition_leader_epoch=9)
    b.append(b"a", b"1", timestamp=1000)
    b.append(b"b", b"2", timestamp=1500, offset=80)  # gap, as after compaction
    (batch,) = list(read_batches(b.build()))
    assert (batch.base_offset, batch.last_offset_delta, batch.partition_leader_epoch) == (77, 3, 9)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (123456789, 5, 42)
    assert batch.is_transactional and not batch.is_control_batch
    assert not batch.has_delete_horizon and batch.delete_horizon_ms is None
    assert batch.timestamp_type == CREATE_TIME
    assert [(r.offset, r.timestamp) for r in batch.records] == [(77, 1000), (80, 1500)]
    assert batch.next_offset == 81


def test_log_append_time_overrides_record_timestamps():
    b = RecordBatchBuilder(timestamp_type=LOG_APPEND_TIME, log_append_time=99_999)
    b.append(b"k", b"v", timestamp=10)
    b.append(b"k", b"v", timestamp=20)
    (batch,) = list(read_batches(b.build()))
    assert batch.timestamp_type == LOG_APPEND_TIME
    assert [(r.timestamp, r.timestamp_type) for r in batch.records] == [
        (99_999, LOG_APPEND_TIME)] * 2


def test_delete_horizon_flag():
    b = RecordBatchBuilder(delete_horizon_ms=5_000)
    b.append(b"k", None, timestamp=5_010)
    (batch,) = list(read_batches(b.build()))
    assert batch.has_delete_horizon and batch.delete_horizon_ms == 5_000
    assert [r.timestamp for r in batch.records] == [5_010]


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit):
    data = build_control_batch(base_offset=30, producer_id=4, producer_epoch=2, commit=commit,
                               coordinator_epoch=17, timestamp=1234)
    (batch,) = list(read_batches(data))
    assert batch.is_control_batch and batch.is_transactional
    marker = batch.control_record()
    assert marker.type == (CONTROL_COMMIT if commit else CONTROL_ABORT)
    assert (marker.is_commit, marker.is_abort) == (commit, not commit)
    assert (marker.offset, marker.timestamp, marker.coordinator_epoch) == (30, 1234, 17)
    (raw,) = list(batch.records)
    assert raw.key == struct.pack(">hh", 0, 1 if commit else 0)


def test_control_record_of_a_data_batch_is_none():
    (batch,) = list(read_batches(build_batch([(b"k", b"v")])))
    assert batch.control_record() is None


def test_empty_batch():
    (batch,) = list(read_batches(RecordBatchBuilder(base_offset=5).build()))
    assert batch.record_count == 0 and list(batch.records) == []


def test_many_batches_in_one_fetch():
    data = b"".join(build_batch([(b"k%d" % i, b"v")], base_offset=i, compression_type=c)
                    for i, c in enumerate(CODECS * 3))
    reader = read_batches(data)
    got = [(r.offset, r.key) for r in reader.records()]
    assert got == [(i, b"k%d" % i) for i in range(15)]
    assert reader.valid_bytes == len(data) and not reader.truncated


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4])
def test_legacy_round_trip(magic, codec):
    recs = [(b"k%d" % i if i % 2 else None, b"v" * i, 1000 + i) for i in range(7)]
    data = build_message_set(recs, magic=magic, base_offset=300, compression_type=codec)
    got = list(read_batches(data).records())
    assert [(r.offset, r.key, r.value) for r in got] == [
        (300 + i, k, v) for i, (k, v, _) in enumerate(recs)]
    if magic == 1:
        assert [r.timestamp for r in got] == [ts for _, _, ts in recs]


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_wrapper_inner_offsets(magic):
    """Inner offsets: absolute in v0, relative (counting from 0) in v1; the wrapper carries
    the last absolute offset."""
    data = build_message_set([(None, b"a", 1), (None, b"b", 2), (None, b"c", 3)], magic=magic,
                             base_offset=1000, compression_type=codecs.GZIP)
    (wrapper,) = list(read_batches(data))
    assert wrapper.offset == wrapper.last_offset == 1002
    inner = codecs.decompress(codecs.GZIP, wrapper._value)
    first_inner_offset = struct.unpack_from(">q", inner, 0)[0]
    assert first_inner_offset == (1000 if magic == 0 else 0)
    assert [r.offset for r in wrapper.records] == [1000, 1001, 1002]
    assert wrapper.base_offset == 1000 and wrapper.record_count == 3


def test_legacy_v1_log_append_time_wrapper():
    data = build_message_set([(None, b"a", 1), (None, b"b", 2)], magic=1, base_offset=0,
                             compression_type=codecs.SNAPPY, timestamp_type=LOG_APPEND_TIME,
                             log_append_time=777)
    got = list(read_batches(data).records())
    assert [(r.timestamp, r.timestamp_type) for r in got] == [(777, LOG_APPEND_TIME)] * 2


def test_legacy_magic0_lz4_uses_broken_header_checksum():
    from kproto.codecs import xxh32_short

    data = build_message_set([(None, b"x" * 100, 0)] * 3, magic=0, compression_type=codecs.LZ4)
    (wrapper,) = list(read_batches(data))
    frame = wrapper._value
    assert frame[6] == (xxh32_short(frame[0:6]) >> 8) & 0xFF
    assert [r.value for r in wrapper.records] == [b"x" * 100] * 3


def test_mixed_magics_in_one_fetch():
    data = (build_message_set([(None, b"a", 5)], magic=0, base_offset=0)
            + build_message_set([(None, b"b", 6)], magic=1, base_offset=1,
                                compression_type=codecs.GZIP)
            + build_batch([(None, b"c")], base_offset=2))
    assert [(r.offset, r.value) for r in read_batches(data).records()] == [
        (0, b"a"), (1, b"b"), (2, b"c")]


# Sizes and deltas whose zigzag varints take 1, 2, 3 and more bytes, on both sides of each
# boundary (the record loop decodes 1- and 2-byte varints inline and longer ones apart).
_WIDTHS = [0, 1, 63, 64, 65, 8191, 8192, 8193, 1_048_575, 1_048_576]


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.ZSTD])
def test_every_varint_width_in_every_field(codec):
    b = RecordBatchBuilder(base_offset=1_000, compression_type=codec)
    expected = []
    ts0 = 1_700_000_000_000
    offset = 1_000
    for i, n in enumerate(_WIDTHS[:8]):
        key = bytes([i]) * n
        value = None if i == 3 else bytes([255 - i]) * (_WIDTHS[-1 - i] % 70_000)
        # timestamps after and before the first (negative deltas), offsets with gaps
        ts = ts0 + (_WIDTHS[i] if i % 2 else -_WIDTHS[i])
        hdrs = [("h" * (i % 3), b"x" * _WIDTHS[i % 5])] if i % 2 else []
        b.append(key, value, timestamp=ts, headers=hdrs, offset=offset)
        expected.append((offset, ts, key, value, tuple(hdrs)))
        offset += 1 + _WIDTHS[i]
    (batch,) = list(read_batches(b.build()))
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records]
    assert got == expected
