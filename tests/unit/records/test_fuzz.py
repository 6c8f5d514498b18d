"""Random and mutated inputs: read_batches and record iteration only ever raise kproto's
corrupt-data errors (or RecordTooLargeError for a cut first batch), never IndexError,
struct.error, a hang or a huge allocation. Also: Record lines up with ConsumerRecord."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kproto import codecs
from kproto.errors import CorruptMessageError, RecordTooLargeError
from kproto.records import build_batch, build_control_batch, build_message_set, read_batches
from kproto.structs import ConsumerRecord

SEEDS = [
    build_batch([(b"k", b"v" * 40, [("h", b"x")]), (None, None)], base_offset=5,
                compression_type=c) for c in range(5)
] + [
    build_control_batch(base_offset=1, producer_id=2, producer_epoch=0, commit=True),
    build_message_set([(b"a", b"b" * 30, 1), (None, b"c", 2)], magic=1,
                      compression_type=codecs.GZIP),
    build_message_set([(b"a", b"b", 1)], magic=0),
]


def _consume(data, check_crcs):
    out = 0
    try:
        for batch in read_batches(data, check_crcs=check_crcs, topic="f", partition=0,
                                  max_decompressed_size=1 << 20):
            batch.control_record()
            for rec in batch.records:
                out += 1
    except (CorruptMessageError, RecordTooLargeError):
        pass
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SEEDS), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)),
                                        min_size=1, max_size=6),
       st.booleans(), st.integers(0, 200))
def test_mutated_batches(seed, edits, check_crcs, cut):
    data = bytearray(seed)
    for pos, value in edits:
        data[pos % len(data)] = value
    data = bytes(data[:len(data) - cut if cut < len(data) else len(data)])
    _consume(data, check_crcs)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.booleans())
def test_random_bytes(data, check_crcs):
    _consume(data, check_crcs)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=1, max_size=300), st.integers(1, 4))
def test_random_compressed_payloads_in_a_valid_batch(payload, codec):
    """A batch whose CRC is right but whose compressed payload is garbage."""
    import struct

    from kproto.records.crc32c import crc32c

    after_crc = struct.pack(">hiqqqhii", codec, 0, 0, 0, -1, -1, -1, 1) + payload
    data = struct.pack(">qiibI", 0, 49 + len(payload), 0, 2, crc32c(after_crc)) + after_crc
    _consume(data, True)


def test_record_fields_are_consumer_record_tail():
    (batch,) = list(read_batches(build_batch([(b"k", b"v", [("h", b"1")], 123)],
                                             base_offset=9)))
    (rec,) = list(batch.records)
    cr = ConsumerRecord("topic", 0, batch.partition_leader_epoch, *rec)
    assert (cr.offset, cr.timestamp, cr.key, cr.value, cr.headers) == (9, 123, b"k", b"v",
                                                                      (("h", b"1"),))
    assert (cr.serialized_key_size, cr.serialized_value_size, cr.serialized_header_size) == (
        1, 1, 2)
    assert ConsumerRecord._fields[3:] == type(rec)._fields


@pytest.mark.parametrize("count", [2**31 - 1, -1])
def test_absurd_record_count_does_not_allocate(count):
    import struct

    from kproto.records.crc32c import crc32c

    after_crc = struct.pack(">hiqqqhii", 0, 0, 0, 0, -1, -1, -1, count)
    data = struct.pack(">qiibI", 0, 49, 0, 2, crc32c(after_crc)) + after_crc
    (batch,) = list(read_batches(data))
    with pytest.raises(CorruptMessageError):
        list(batch.records)
