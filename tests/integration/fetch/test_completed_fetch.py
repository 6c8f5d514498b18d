"""CompletedFetch over batches written by kproto.records' builder (and kafka-python's)."""

from __future__ import annotations

import gc
import json
import time

import pytest

from kproto.consumer.fetch.completed_fetch import (MIN_DECODE_CHUNK, CompletedFetch, RecordDeserializationError,
                                                   make_deserialize)
from kproto.errors import CorruptRecordError, DeserializationExceptionOrigin, KafkaError, UnsupportedCodecError
from kproto.messages import FetchResponse
from kproto.records import RecordBatchBuilder, build_batch, build_control_batch
from kproto.structs import ConsumerRecord, IsolationLevel, TopicPartition
from tests.brokers.raw import fetch_log

# The bytes a broker serves: Tansu is a second implementation of them (tests/conftest.py).
pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka", "tansu")

TP = TopicPartition("t", 0)


def batch(base, n, **kwargs):
    return build_batch([(b"k%d" % (base + i), b"v%d" % (base + i)) for i in range(n)], base_offset=base,
                       timestamp_type=0, **kwargs)


def txn_batch(base, n, pid):
    return batch(base, n, producer_id=pid, producer_epoch=0, is_transactional=True)


def marker(offset, pid, commit):
    return build_control_batch(base_offset=offset, producer_id=pid, producer_epoch=0, commit=commit)


def completed(records, fetch_offset=0, aborted=(), read_committed=False, **kwargs):
    part = FetchResponse.PartitionData(
        partition_index=0, high_watermark=100, records=records,
        aborted_transactions=[FetchResponse.AbortedTransaction(producer_id=p, first_offset=o) for p, o in aborted])
    return CompletedFetch(TP, part, fetch_offset, isolation_level=IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED, **kwargs)


def offsets(records):
    return [r.offset for r in records]


def test_records_in_order_with_fields():
    data = build_batch([(b"key", b"value", [("h", b"1")], 1234)], base_offset=7, partition_leader_epoch=3)
    cf = completed(data, fetch_offset=7)
    (rec,) = cf.fetch_records(10)
    assert rec == ConsumerRecord("t", 0, 3, 7, 1234, 0, b"key", b"value", (("h", b"1"),), None, 3, 5, 2)
    assert cf.next_fetch_offset == 8 and cf.last_epoch == 3 and cf.is_consumed


def test_skips_records_below_fetch_offset_and_honours_max():
    cf = completed(batch(0, 5) + batch(5, 5), fetch_offset=3)
    assert offsets(cf.fetch_records(4)) == [3, 4, 5, 6]
    assert cf.next_fetch_offset == 7 and not cf.is_consumed
    assert offsets(cf.fetch_records(100)) == [7, 8, 9]
    assert cf.fetch_records(100) == [] and cf.is_consumed


def test_next_offset_after_compacted_tail():
    # Offsets 0,1 and a last offset delta of 4 (records 2-4 compacted away).
    builder = RecordBatchBuilder(base_offset=0)
    builder.append(b"a", b"1", offset=0)
    builder.append(b"b", b"2", offset=1)
    builder.append(b"c", b"3", offset=4)
    data = builder.build()
    cf = completed(data)
    assert offsets(cf.fetch_records(10)) == [0, 1, 4]
    assert cf.next_fetch_offset == 5


def test_control_batches_never_returned_read_uncommitted():
    data = txn_batch(0, 2, pid=9) + marker(2, 9, commit=True) + batch(3, 1)
    cf = completed(data)
    assert offsets(cf.fetch_records(10)) == [0, 1, 3]


def test_read_committed_skips_aborted_transactions():
    # pid 1 commits (0-1, marker 2), pid 2 aborts (3-4, marker 5), pid 2 commits later (6, marker 7),
    # a non-transactional batch at 8.
    data = (txn_batch(0, 2, 1) + marker(2, 1, True) + txn_batch(3, 2, 2) + marker(5, 2, False)
            + txn_batch(6, 1, 2) + marker(7, 2, True) + batch(8, 1))
    cf = completed(data, aborted=[(2, 3)], read_committed=True)
    assert offsets(cf.fetch_records(100)) == [0, 1, 6, 8]
    assert cf.next_fetch_offset == 9
    # read_uncommitted sees the aborted records too (markers still hidden).
    assert offsets(completed(data, aborted=[(2, 3)]).fetch_records(100)) == [0, 1, 3, 4, 6, 8]


def test_read_committed_aborted_tail_still_advances():
    data = txn_batch(0, 3, 4) + marker(3, 4, False)
    cf = completed(data, aborted=[(4, 0)], read_committed=True)
    assert cf.fetch_records(10) == []
    assert cf.next_fetch_offset == 4 and cf.is_consumed


def test_interleaved_producers_only_aborted_one_skipped():
    data = txn_batch(0, 1, 1) + txn_batch(1, 1, 2) + txn_batch(2, 1, 1) + marker(3, 1, False) + marker(4, 2, True)
    cf = completed(data, aborted=[(1, 0)], read_committed=True)
    assert offsets(cf.fetch_records(10)) == [1]


def test_deserializers_all_forms():
    class Old:
        def deserialize(self, topic, data):
            return ("old", topic, data)

    class New:
        def deserialize(self, topic, headers, data):
            return ("new", headers, data)

    data = build_batch([(b"1", b'{"a": 1}', [("h", b"x")])], base_offset=0)
    cf = completed(data, key_deserializer=make_deserialize(Old()), value_deserializer=make_deserialize(json.loads))
    (rec,) = cf.fetch_records(1)
    assert rec.key == ("old", "t", b"1") and rec.value == {"a": 1} and rec.serialized_value_size == 8
    (rec,) = completed(data, key_deserializer=make_deserialize(New())).fetch_records(1)
    assert rec.key == ("new", (("h", b"x"),), b"1")
    assert make_deserialize(None) is None


def test_deserializer_failure_raised_only_without_records():
    # Each record its own current timestamp: the error must carry the bad record's (left to
    # the builder, two records a millisecond apart made an equality with the first flaky).
    now = int(time.time() * 1000)
    data = build_batch([(None, b"1", [], now), (None, b"bad", [], now + 1), (None, b"3", [], now + 2)],
                       base_offset=0)
    cf = completed(data, value_deserializer=make_deserialize(int))
    first = cf.fetch_records(10)
    assert [r.value for r in first] == [1]  # stops before the bad record, returns what it has
    with pytest.raises(RecordDeserializationError) as info:
        cf.fetch_records(10)
    error = info.value
    assert error.offset == 1 and error.topic_partition == TP
    # What Java's RecordDeserializationException carries: origin, the raw record, the cause.
    assert (error.origin, error.key_buffer, error.value_buffer, error.headers) == (
        DeserializationExceptionOrigin.VALUE, None, b"bad", ())
    assert (error.timestamp, error.timestamp_type) == (now + 1, first[0].timestamp_type)
    assert first[0].timestamp == now
    assert isinstance(error.__cause__, ValueError)
    with pytest.raises(RecordDeserializationError):
        cf.fetch_records(10)  # no silent skipping
    assert cf.next_fetch_offset == 1


def test_a_failing_key_deserializer_is_the_key_origin():
    data = build_batch([(b"k", b"1", [("h", b"x")])], base_offset=0)
    with pytest.raises(RecordDeserializationError) as info:
        completed(data, key_deserializer=make_deserialize(int)).fetch_records(1)
    assert (info.value.origin, info.value.key_buffer, info.value.value_buffer, info.value.headers) == (
        DeserializationExceptionOrigin.KEY, b"k", b"1", (("h", b"x"),))


def test_corrupt_batch_raises_clear_error():
    data = bytearray(batch(0, 3))
    data[-2] ^= 0xFF  # flip the last value byte: CRC mismatch, still decodable
    cf = completed(bytes(data))
    with pytest.raises(CorruptRecordError, match="seek past the record") as first:
        cf.fetch_records(10)
    assert (first.value.topic, first.value.partition, first.value.offset) == ("t", 0, 0)
    assert isinstance(first.value.__cause__, CorruptRecordError)
    with pytest.raises(CorruptRecordError) as again:
        cf.fetch_records(10)
    assert again.value.offset == 0 and cf.next_fetch_offset == 0
    # Without CRC checks the bytes decode.
    assert len(completed(bytes(data), check_crcs=False).fetch_records(10)) == 3


def test_corrupt_second_batch_returns_first_then_raises():
    bad = bytearray(batch(3, 2))
    bad[-1] ^= 0xFF
    cf = completed(batch(0, 3) + bytes(bad))
    assert offsets(cf.fetch_records(10)) == [0, 1, 2]
    with pytest.raises(CorruptRecordError) as info:
        cf.fetch_records(10)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 0, 3)
    assert cf.next_fetch_offset == 3


def test_partial_trailing_batch_is_ignored():
    data = batch(0, 2) + batch(2, 2)[:-5]
    cf = completed(data)
    assert offsets(cf.fetch_records(10)) == [0, 1]
    assert cf.next_fetch_offset == 2


def test_batches_from_kafka_python_builder():
    builder_mod = pytest.importorskip("kafka.record.memory_records")
    builder = builder_mod.MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        builder.append(timestamp=1000 + i, key=None, value=b"x%d" % i, headers=[])
    builder.close()
    cf = completed(builder.buffer())
    assert [(r.offset, r.timestamp, r.value) for r in cf.fetch_records(10)] == [
        (0, 1000, b"x0"), (1, 1001, b"x1"), (2, 1002, b"x2")]


@pytest.mark.needs("transactions", "valid_control_batch_crc")
def test_read_committed_over_a_real_transactional_producers_batches(broker):
    """Batches and markers written by confluent-kafka's transactional producer, in a Fetch
    response kproto encodes with the aborted-transaction list local brokers leave out."""
    topic = broker.new_topic(partitions=1)
    txns = broker.produce_transactions(topic, committed=6, aborted=4)
    raw = fetch_log(broker.bootstrap_servers, topic, 0).records  # Kafka may need several Fetches
    first_aborted = txns.aborted[0].offset
    from kproto.records import read_batches

    (pid,) = {b.producer_id for b in read_batches(raw) if b.base_offset <= first_aborted <= b.last_offset}
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic=topic, partitions=[
        FetchResponse.PartitionData(partition_index=0, high_watermark=100, last_stable_offset=100, records=raw,
                                    aborted_transactions=[FetchResponse.AbortedTransaction(
                                        producer_id=pid, first_offset=first_aborted)])])])
    part = FetchResponse.decode(response.encode(12), 12).responses[0].partitions[0]
    tp = TopicPartition(topic, 0)
    committed = CompletedFetch(tp, part, 0, isolation_level=IsolationLevel.READ_COMMITTED).fetch_records(100)
    assert [(r.offset, r.key, r.value) for r in committed] == [(w.offset, w.key, w.value) for w in txns.committed]
    uncommitted = CompletedFetch(tp, part, 0, isolation_level=IsolationLevel.READ_UNCOMMITTED).fetch_records(100)
    assert [r.offset for r in uncommitted] == [w.offset for w in txns.committed + txns.aborted]


def test_undecodable_record_mid_batch_keeps_position_right():
    data = bytearray(batch(0, 3))
    data[-1] = 0xFF  # the last record's header count becomes an unterminated varint
    cf = completed(bytes(data), check_crcs=False)
    assert offsets(cf.fetch_records(10)) == [0, 1]
    assert cf.next_fetch_offset == 2  # past what was returned, not past the bad record
    with pytest.raises(CorruptRecordError, match="seek past the record") as info:
        cf.fetch_records(10)
    # the bad record's own offset, so a seek past it loses nothing else of the batch
    assert info.value.partition == 0 and info.value.offset == 2
    assert cf.next_fetch_offset == 2


def test_seeking_past_an_undecodable_record_then_reports_the_batch_end():
    data = bytearray(batch(10, 3) + batch(13, 2))
    data[65] = 0x05  # the first record's key length (after length, attributes, deltas): -3
    first = completed(bytes(data), fetch_offset=10, check_crcs=False)
    with pytest.raises(CorruptRecordError) as info:
        first.fetch_records(10)
    assert info.value.offset == 10  # the bad record itself, nothing was good before it
    # The user seeks past it: the rest of its batch cannot be read (the record boundaries
    # are lost), so the error now names the batch's last offset, and past that all is well.
    again = completed(bytes(data), fetch_offset=11, check_crcs=False)
    with pytest.raises(CorruptRecordError) as info:
        again.fetch_records(10)
    assert info.value.offset == 12
    assert offsets(completed(bytes(data), fetch_offset=13, check_crcs=False).fetch_records(10)) == [13, 14]


def test_unknown_codec_keeps_its_class():
    data = bytearray(batch(0, 2))
    data[22] = (data[22] & ~0x07) | 0x06  # attributes: codec id 6 does not exist
    cf = completed(bytes(data), check_crcs=False)
    with pytest.raises(KafkaError, match="seek past the record") as info:
        cf.fetch_records(10)
    assert isinstance(info.value, (CorruptRecordError, UnsupportedCodecError))
    assert cf.next_fetch_offset == 0


@pytest.mark.parametrize("check_crcs", [True, False])
def test_hostile_bytes_give_records_or_kafka_errors_only(check_crcs):
    """Flipped or cut fetch data: records (each offset once, in order) or a KafkaError;
    never IndexError/struct.error, never a loop that does not end."""
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    clean = batch(0, 4) + batch(4, 3, compression_type=1) + batch(7, 5)

    @hypothesis.settings(max_examples=150, deadline=None, derandomize=True)
    @hypothesis.given(flips=st.lists(st.tuples(st.integers(0, len(clean) - 1), st.integers(1, 255)), max_size=4),
                      cut=st.integers(0, len(clean)), max_records=st.integers(1, 6))
    def check(flips, cut, max_records):
        data = bytearray(clean[:cut] if cut else clean)
        for pos, mask in flips:
            if pos < len(data):
                data[pos] ^= mask
        cf = completed(bytes(data), check_crcs=check_crcs)
        seen: list[int] = []
        for _ in range(len(clean)):  # far more calls than records: must finish well before
            try:
                got = cf.fetch_records(max_records)
            except KafkaError:
                break
            assert len(got) <= max_records
            seen += offsets(got)
            if cf.is_consumed and not got:
                break
        else:
            raise AssertionError("fetch_records never finished")
        assert seen == sorted(set(seen))

    check()


def live_consumer_records() -> int:
    """ConsumerRecords alive now (each holds a headers list, so the GC tracks it)."""
    return sum(1 for o in gc.get_objects() if type(o) is ConsumerRecord)


@pytest.mark.parametrize("codec", [0, 1])
def test_a_poll_over_one_big_batch_builds_only_about_what_it_returns(codec):
    """Issue 5: max_poll_records=500 over one 10,000-record batch (librdkafka and Java
    producers write batches that big) must not build all 10,000 records up front."""
    n = 10_000
    data = build_batch([(None, b"%d" % i) for i in range(n)], base_offset=0, compression_type=codec)
    cf = completed(data)
    before = live_consumer_records()
    first = cf.fetch_records(500)
    assert offsets(first) == list(range(500))
    # what was returned plus at most one chunk of decoded-but-not-returned slack
    assert live_consumer_records() - before <= 500 + MIN_DECODE_CHUNK
    second = cf.fetch_records(3)  # a tiny poll decodes one small chunk, not the rest
    assert offsets(second) == [500, 501, 502]
    assert live_consumer_records() - before <= 500 + 3 + MIN_DECODE_CHUNK
    seen = offsets(first) + offsets(second)
    del first, second
    while True:
        got = cf.fetch_records(500)
        if not got:
            break
        seen += offsets(got)
    assert seen == list(range(n)) and cf.next_fetch_offset == n and cf.is_consumed


def test_big_batch_starting_before_the_position_resumes_at_it():
    data = build_batch([(None, b"%d" % i) for i in range(1000)], base_offset=0)
    cf = completed(data, fetch_offset=700)
    assert offsets(cf.fetch_records(5)) == [700, 701, 702, 703, 704]
    assert offsets(cf.fetch_records(1000)) == list(range(705, 1000))


def test_deserializer_failure_in_a_later_chunk_is_retried_without_skipping():
    n = 3 * MIN_DECODE_CHUNK
    bad = 2 * MIN_DECODE_CHUNK + 5
    data = build_batch([(None, b"x" if i == bad else b"%d" % i) for i in range(n)], base_offset=0)
    cf = completed(data, value_deserializer=make_deserialize(int))
    got = []
    while len(got) < bad:
        got += cf.fetch_records(10)
    assert [r.value for r in got] == list(range(bad))
    with pytest.raises(RecordDeserializationError) as info:
        cf.fetch_records(10)
    assert info.value.offset == bad and cf.next_fetch_offset == bad
    with pytest.raises(RecordDeserializationError):
        cf.fetch_records(10)
