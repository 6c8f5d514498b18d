"""Bad bytes: every single-byte flip of small batches, truncation at every byte position,
hand-made malformed records, and lazy decoding up to the first bad record."""

import struct

import pytest

from kproto import codecs
from kproto.errors import CorruptMessageError, CorruptRecordError, RecordTooLargeError
from kproto.records import (build_batch, build_control_batch, build_message_set, read_batches,
                            starts_with_whole_batch)
from kproto.records.builder import encode_varint
from kproto.records.crc32c import crc32c_table

SMALL = [(b"key", b"value", [("h", b"1")], 1_000), (None, b"", [], 1_001),
         (b"k2", None, [("x", None)], 1_003)]


def _small_inputs():
    out = {}
    for c in (codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD):
        out["v2-" + codecs.CODEC_NAMES[c]] = build_batch(SMALL, base_offset=10,
                                                         compression_type=c)
    out["v2-control"] = build_control_batch(base_offset=3, producer_id=1, producer_epoch=0,
                                            commit=False, timestamp=5)
    for magic in (0, 1):
        for c in (codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4):
            out["v{}-{}".format(magic, codecs.CODEC_NAMES[c])] = build_message_set(
                [(k, v, ts) for k, v, _, ts in SMALL], magic=magic, base_offset=10,
                compression_type=c)
    return out


INPUTS = _small_inputs()


def _decode(data, check_crcs=True):
    """Everything a consumer looks at: batch header fields and every record."""
    out = []
    for batch in read_batches(data, check_crcs=check_crcs, topic="t", partition=0):
        out.append((batch.magic, batch.compression_type, batch.is_control_batch,
                    list(batch.records)))
    return out


def _entry_starts(data):
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return starts


def _strip_offsets(decoded):
    return [(b[:3], [r[1:] for r in b[3]]) for b in decoded]


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_every_single_byte_flip(name):
    """With CRC checks: an error, or the same records. The bytes no CRC covers are each
    entry's offset (same records at other offsets) and length (a longer length is a fetch
    cut short: RecordTooLargeError for the first entry, fewer entries for later ones)."""
    data = INPUTS[name]
    expected = _decode(data)
    starts = _entry_starts(data)
    for pos in range(len(data)):
        start = max(s for s in starts if s <= pos)
        rel = pos - start
        for mask in (0xFF, 0x01, 0x80):
            bad = bytearray(data)
            bad[pos] ^= mask
            try:
                got = _decode(bytes(bad))
            except RecordTooLargeError as exc:
                assert start == 0 and 8 <= rel < 12 and exc.batch_size > len(data)
                continue
            except CorruptMessageError:  # includes CorruptRecordError
                continue
            if rel < 8:
                assert _strip_offsets(got) == _strip_offsets(expected), (name, pos, mask)
            elif rel < 12 and start > 0:
                assert got == expected[:len(got)], (name, pos, mask)
            else:
                assert got == expected, (name, pos, mask)


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_every_single_byte_flip_without_crc_checks(name):
    data = INPUTS[name]
    for pos in range(len(data)):
        bad = bytearray(data)
        bad[pos] ^= 0xFF
        try:
            _decode(bytes(bad), check_crcs=False)
        except RecordTooLargeError:
            assert 8 <= pos < 12
        except CorruptMessageError:
            pass


def test_bad_crc_names_topic_partition_offset():
    data = bytearray(build_batch(SMALL, base_offset=4242))
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError) as info:
        list(read_batches(bytes(data), topic="orders", partition=3))
    assert (info.value.topic, info.value.partition, info.value.record_offset) == ("orders", 3,
                                                                                4242)
    assert "orders-3" in str(info.value) and "4242" in str(info.value)
    # not checked when the consumer turns check_crcs off
    assert len(list(read_batches(bytes(data), check_crcs=False))) == 1


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.LZ4])
def test_truncation_at_every_position(codec):
    batches = [build_batch(SMALL, base_offset=10 * i, compression_type=codec)
               for i in range(3)]
    data = b"".join(batches)
    ends = [sum(len(b) for b in batches[:i + 1]) for i in range(3)]
    for cut in range(len(data) + 1):
        reader = read_batches(data[:cut])
        if 12 <= cut < ends[0]:
            with pytest.raises(RecordTooLargeError) as info:
                list(reader)
            assert info.value.batch_size == ends[0]
            assert info.value.fetched_size == cut
            continue
        got = list(reader)
        whole = sum(1 for e in ends if e <= cut)
        assert len(got) == whole
        assert reader.valid_bytes == (ends[whole - 1] if whole else 0)
        assert reader.truncated == (cut not in [0] + ends)
        assert [len(list(b.records)) for b in got] == [3] * whole


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_the_whole_batch_shortcut_agrees_with_the_reader(name):
    # The consumer's shortcut for "the data holds a whole first batch" (every partition of
    # every response asks) may only answer True where the reader yields one without
    # raising; its False sends the consumer to the reader. Every cut and byte flip.
    data = INPUTS[name] + build_batch(SMALL, base_offset=20)
    variants = [data[:cut] for cut in range(len(data) + 1)]
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0xFF
        variants.append(bytes(flipped))
    for variant in variants:
        for form in (variant, memoryview(variant)):
            if starts_with_whole_batch(form):
                assert next(iter(read_batches(form, check_crcs=False))).magic == 2
    assert starts_with_whole_batch(data) == name.startswith("v2")
    assert not starts_with_whole_batch(b"")


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_truncation_at_every_position(magic):
    data = build_message_set([(b"k", b"v" * 20, 7)] * 3, magic=magic)
    entry = len(data) // 3
    for cut in range(len(data) + 1):
        reader = read_batches(data[:cut])
        if 12 <= cut < entry:
            with pytest.raises(RecordTooLargeError):
                list(reader)
            continue
        assert len(list(reader.records())) == cut // entry


def _v2_with_body(body, count, codec=codecs.NONE):
    """A v2 batch around hand-written record bytes, with a valid CRC."""
    payload = codecs.compress(codec, body)
    after_crc = struct.pack(">hiqqqhii", codec, max(count - 1, 0), 1000, 1000, -1, -1, -1,
                            count) + payload
    return struct.pack(">qiibI", 0, 49 + len(payload), -1, 2, crc32c_table(after_crc)) + after_crc


def _record(*fields):
    body = b"\x00" + b"".join(fields)
    return encode_varint(len(body)) + body


def _good(offset_delta):
    return _record(encode_varint(0), encode_varint(offset_delta), encode_varint(1), b"k",
                   encode_varint(1), b"v", encode_varint(0))


GOOD = _good(0)
GOOD1 = _good(1)  # a valid second record: offset deltas only grow


@pytest.mark.parametrize("body,count", [
    (GOOD, 2),  # fewer records than declared
    (GOOD + GOOD1, 1),  # more records than declared
    (GOOD + GOOD, 2),  # the same offset twice
    (GOOD1 + GOOD, 2),  # offsets going backwards
    (_good(-1), 1),  # a negative offset delta
    (GOOD[:-1], 1),  # record shorter than its fields
    (GOOD + b"\x00", 1),  # trailing byte
    (_record(encode_varint(0), encode_varint(0), encode_varint(-2), encode_varint(0),
             encode_varint(0)), 1),  # key length -2
    (_record(encode_varint(0), encode_varint(0), encode_varint(-1), encode_varint(50),
             b"short", encode_varint(0)), 1),  # value longer than the record
    (_record(encode_varint(0), encode_varint(0), encode_varint(-1), encode_varint(-1),
             encode_varint(2**31)), 1),  # absurd header count
    (_record(encode_varint(0), encode_varint(0), encode_varint(-1), encode_varint(-1),
             encode_varint(1), encode_varint(-1), encode_varint(-1)), 1),  # null header key
    (_record(encode_varint(0), encode_varint(0), encode_varint(-1), encode_varint(-1),
             encode_varint(1), encode_varint(2), b"\xff\xfe", encode_varint(-1)), 1),  # bad utf-8
    (b"\xff" * 12, 1),  # varint longer than 10 bytes
    (encode_varint(-5) + b"\x00" * 10, 1),  # negative record length
])
@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP])
def test_malformed_records(body, count, codec):
    (batch,) = list(read_batches(_v2_with_body(body, count, codec), topic="t", partition=1))
    with pytest.raises(CorruptRecordError) as info:
        list(batch.records)
    assert info.value.topic == "t" and info.value.partition == 1


def test_good_hand_made_record_decodes():
    (batch,) = list(read_batches(_v2_with_body(GOOD + GOOD1, 2)))
    assert [(r.key, r.value) for r in batch.records] == [(b"k", b"v")] * 2


def test_records_before_the_first_bad_one_come_first_and_its_error_names_it():
    bad = _record(encode_varint(0), encode_varint(2), encode_varint(-3))
    (batch,) = list(read_batches(_v2_with_body(GOOD + GOOD1 + bad, 3)))
    it = batch.records
    assert next(it).value == b"v" and next(it).value == b"v"
    with pytest.raises(CorruptRecordError) as info:
        next(it)
    # the offset after the last good record (base 0, delta 1), not the batch's
    assert info.value.record_offset == 2
    records, error = batch.decode_records()
    assert [r.offset for r in records] == [0, 1] and error.record_offset == 2


def test_bad_first_record_names_the_base_offset():
    data = bytearray(build_batch(SMALL, base_offset=70))
    data[61] = 0x7F  # the first record's length: far beyond the batch
    (batch,) = list(read_batches(bytes(data), check_crcs=False))
    records, error = batch.decode_records()
    assert records == [] and error.record_offset == 70


def test_batches_decode_lazily_up_to_the_first_bad_one():
    good = build_batch(SMALL, base_offset=0)
    bad = bytearray(build_batch(SMALL, base_offset=3))
    bad[30] ^= 0x10
    it = iter(read_batches(good + bytes(bad)))
    assert len(list(next(it).records)) == 3
    with pytest.raises(CorruptRecordError):
        next(it)


@pytest.mark.parametrize("data,match", [
    (struct.pack(">qi", 0, 5) + b"\x00" * 5, "minimum"),  # entry shorter than any message
    (struct.pack(">qi", 0, 20) + b"\x00" * 4 + b"\x07" + b"\x00" * 15, "magic"),
    (struct.pack(">qi", 0, 30) + b"\x00" * 4 + b"\x02" + b"\x00" * 25, "minimum"),
])
def test_malformed_entries(data, match):
    with pytest.raises(CorruptRecordError, match=match):
        list(read_batches(data))


def test_unknown_codec_in_batch_is_corrupt():
    good = _v2_with_body(GOOD, 1)
    bad = _v2_with_body(GOOD, 1)
    bad = bytearray(bad)
    bad[22] = 6  # attributes low byte: codec 6
    after = bytes(bad[21:])
    bad[17:21] = struct.pack(">I", crc32c_table(after))
    assert len(list(list(read_batches(good))[0].records)) == 1
    (batch,) = list(read_batches(bytes(bad)))
    with pytest.raises(CorruptRecordError, match="codec"):
        list(batch.records)


def test_decompression_bomb_in_a_batch():
    data = build_batch([(None, bytes(4 * 1024 * 1024))], compression_type=codecs.ZSTD)
    (batch,) = list(read_batches(data, max_decompressed_size=1024 * 1024))
    with pytest.raises(CorruptRecordError, match="more than"):
        list(batch.records)
