"""Resumable record decoding: ``decode_records(limit=n)`` continues where it stopped, and
iterating ``records`` decodes in chunks, so a reader that stops early builds few records."""

from __future__ import annotations

import gc

import pytest

from kproto import codecs
from kproto.errors import CorruptRecordError
from kproto.records import Record, build_batch, build_message_set, read_batches
from kproto.records.default_batch import _ITER_CHUNK


def live_records() -> int:
    """Record tuples alive now (they hold a headers list, so the GC tracks them)."""
    return sum(1 for o in gc.get_objects() if type(o) is Record)


def values(records):
    return [r.value for r in records]


def big_batch(n, codec=codecs.NONE, base_offset=0):
    return build_batch([(None, b"v%d" % i) for i in range(n)], base_offset=base_offset,
                       compression_type=codec)


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP])
@pytest.mark.parametrize("limit", [1, 7, 64, 1000])
def test_chunks_resume_and_add_up_to_the_whole_batch(codec, limit):
    data = big_batch(300, codec, base_offset=40)
    (whole,) = read_batches(data)
    expected, error = whole.decode_records()
    assert error is None and len(expected) == 300 and whole.decoding_done
    (batch,) = read_batches(data)
    got = []
    while not batch.decoding_done:
        chunk, error = batch.decode_records(limit=limit)
        assert error is None and 0 < len(chunk) <= limit
        got += chunk
    assert got == expected
    assert [r.offset for r in got] == list(range(40, 340))
    assert batch.decode_records(limit=limit) == ([], None)  # nothing twice


def test_prefix_and_record_class_per_chunk():
    (batch,) = read_batches(big_batch(5))
    first, _ = batch.decode_records(tuple, ("t", 3), limit=2)
    rest, _ = batch.decode_records(Record, (), limit=10)
    assert [r[:3] for r in first] == [("t", 3, 0), ("t", 3, 1)]
    assert type(rest[0]) is Record and [r.offset for r in rest] == [2, 3, 4]


def test_malformed_record_in_a_later_chunk_names_its_offset():
    data = bytearray(big_batch(10, base_offset=100))
    data[-1] = 0xFF  # the last record's header count becomes an unterminated varint
    (batch,) = read_batches(bytes(data), check_crcs=False)
    first, error = batch.decode_records(limit=4)
    assert error is None and [r.offset for r in first] == [100, 101, 102, 103]
    second, error = batch.decode_records(limit=4)
    assert error is None and [r.offset for r in second] == [104, 105, 106, 107]
    third, error = batch.decode_records(limit=4)
    # the good record before the bad one first, and the error names the bad one (109)
    assert [r.offset for r in third] == [108]
    assert isinstance(error, CorruptRecordError) and error.record_offset == 109
    assert batch.decoding_done
    again, error2 = batch.decode_records(limit=4)
    assert again == [] and error2 is error


def test_record_count_mismatch_reported_with_the_last_records():
    data = bytearray(big_batch(6))
    data[57:61] = (7).to_bytes(4, "big")  # recordCount: 7 declared, 6 present
    (batch,) = read_batches(bytes(data), check_crcs=False)
    chunk, error = batch.decode_records(limit=4)
    assert len(chunk) == 4 and error is None and not batch.decoding_done
    chunk, error = batch.decode_records(limit=4)
    assert [r.offset for r in chunk] == [4, 5] and batch.decoding_done
    assert "declares 7 records, holds 6" in str(error) and error.record_offset == 6


def test_iterating_records_builds_them_a_chunk_at_a_time():
    (batch,) = read_batches(big_batch(20 * _ITER_CHUNK))
    before = live_records()
    it = batch.records
    first = next(it)
    assert first.offset == 0
    # one chunk is decoded, not the 20 the batch holds
    assert live_records() - before <= _ITER_CHUNK
    assert sum(1 for _ in it) == 20 * _ITER_CHUNK - 1
    # iterating again starts over, independent of decode_records' cursor
    batch.decode_records(limit=3)
    assert next(iter(batch.records)).offset == 0
    assert batch.decode_records(limit=1)[0][0].offset == 3


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP])
def test_legacy_entries_resume_too(magic, codec):
    data = build_message_set([(None, b"v%d" % i) for i in range(5)], magic=magic, compression_type=codec,
                             base_offset=20)
    got = []
    for batch in read_batches(data):
        while not batch.decoding_done:
            chunk, error = batch.decode_records(tuple, ("p",), limit=2)
            assert error is None and len(chunk) <= 2
            got += chunk
    assert [(r[0], r[1], r[5]) for r in got] == [("p", 20 + i, b"v%d" % i) for i in range(5)]
