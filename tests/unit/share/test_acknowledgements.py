"""Sans-IO: share acknowledgements, a share fetch's acquired records and the share session.

Acknowledgements, ShareCompletedFetch and ShareSessionHandler against KIP-932's rules,
with record batches built by kproto's own builder and requests encoded at the versions the
protocol defines (ShareFetch/ShareAcknowledge v1 and v2, RENEW and ShareAcquireMode only in
v2, which librdkafka's mock does not serve).
"""

from __future__ import annotations

import uuid

import pytest

from kproto.consumer.share.acknowledgements import (GAP, Acknowledgements, AcknowledgeType, acknowledge_arguments,
                                                   acknowledge_type)
from kproto.consumer.share.share_completed_fetch import ShareCompletedFetch
from kproto.consumer.share.share_session_handler import FINAL_EPOCH, ShareFetchParams, ShareSessionHandler
from kproto.errors import CorruptRecordError, IllegalArgumentError, RecordDeserializationError, UnsupportedVersionError
from kproto.messages import ShareAcknowledgeRequest, ShareFetchRequest
from kproto.records.builder import build_batch, build_control_batch
from kproto.structs import TopicIdPartition, TopicPartition

TOPIC_ID = uuid.UUID(int=7)
TIP0 = TopicIdPartition(TOPIC_ID, TopicPartition("t", 0))
TIP1 = TopicIdPartition(TOPIC_ID, TopicPartition("t", 1))


def acks(**types: int) -> Acknowledgements:
    a = Acknowledgements()
    for offset, t in types.items():
        a.add(int(offset[1:]), t)
    return a


# --- Acknowledgements --------------------------------------------------------------------


def test_batches_are_runs_of_one_type_ascending():
    a = Acknowledgements()
    for offset in (5, 3, 4, 9):
        a.add(offset, AcknowledgeType.ACCEPT)
    a.add(6, AcknowledgeType.RELEASE)
    a.add(7, GAP)
    assert a.to_batches() == [(3, 5, [1]), (6, 6, [2]), (7, 7, [0]), (9, 9, [1])]
    assert a.offsets() == {3, 4, 5, 6, 9}  # gaps are not the application's
    assert a.offsets(include_gaps=True) == {3, 4, 5, 6, 7, 9}


def test_acknowledge_type_accepts_enum_name_or_code_and_refuses_others():
    assert acknowledge_type("release") is AcknowledgeType.RELEASE
    assert acknowledge_type(3) is AcknowledgeType.REJECT
    for bad in ("maybe", 0, 9, True, None):
        with pytest.raises(IllegalArgumentError):
            acknowledge_type(bad)


def test_acknowledge_takes_java_s_two_forms():
    record = object()
    assert acknowledge_arguments((record,), {}) == (record, None, AcknowledgeType.ACCEPT)
    assert acknowledge_arguments((record, "reject"), {}) == (record, None, AcknowledgeType.REJECT)
    assert acknowledge_arguments(("t", 0, 5, AcknowledgeType.REJECT), {}) == (None, ("t", 0, 5), AcknowledgeType.REJECT)
    assert acknowledge_arguments((), {"topic": "t", "partition": 1, "offset": 0, "type": 1}) == (
        None, ("t", 1, 0), AcknowledgeType.ACCEPT)
    for args in [("t", 0, 5),                 # the type is required by offset, as in Java
                 ("", 0, 5, 1), (b"t", 0, 5, 1), ("t", -1, 5, 1), ("t", 0, True, 1), ("t", 0, 5, "maybe"),
                 ("t", 0, 5, 1, 1), (record, 1, 2, 3, 4)]:
        with pytest.raises(IllegalArgumentError):
            acknowledge_arguments(args, {})


# --- ShareCompletedFetch -------------------------------------------------------------------


def _records(n: int, base: int = 0) -> bytes:
    return build_batch([(None, b"v%d" % (base + i)) for i in range(n)], base_offset=base)


def test_only_acquired_records_are_returned_once_with_their_delivery_count():
    data = _records(10)  # offsets 0-9 in one batch; this member acquired 2-4 and 7-8
    fetch = ShareCompletedFetch(1, TIP0, data, [(7, 8, 3), (2, 4, 1)])
    first = fetch.fetch_records(2)
    rest = fetch.fetch_records(100)
    assert [(r.offset, r.delivery_count) for r in first + rest] == [(2, 1), (3, 1), (4, 1), (7, 3), (8, 3)]
    assert first[0].value == b"v2" and first[0].topic == "t" and first[0].partition == 0
    assert fetch.is_consumed and fetch.fetch_records(100) == []
    assert fetch.take_gaps().items() == []  # every acquired offset had a record
    assert fetch.take_gaps().items() == []


def test_acquired_offsets_without_records_become_gaps():
    # 0-2 data, 3 a commit marker, 4-5 data; offset 6 acquired but absent (compacted).
    data = _records(3) + build_control_batch(base_offset=3, producer_id=1, producer_epoch=0, commit=True) \
        + _records(2, base=4)
    fetch = ShareCompletedFetch(1, TIP0, data, [(0, 6, 1)])
    assert [r.offset for r in fetch.fetch_records(100)] == [0, 1, 2, 4, 5]
    assert fetch.take_gaps().items() == [(3, GAP), (6, GAP)]


def test_gaps_wait_until_the_fetch_is_consumed():
    fetch = ShareCompletedFetch(1, TIP0, _records(4), [(0, 3, 1)])
    assert len(fetch.fetch_records(2)) == 2
    assert not fetch.is_consumed and fetch.take_gaps().items() == []


def test_a_record_failing_to_deserialize_is_raised_after_the_good_ones_are_returned():
    def value(data: bytes) -> str:
        if data == b"v2":
            raise ValueError("bad")
        return data.decode()

    from kproto.consumer.fetch.completed_fetch import make_deserialize
    fetch = ShareCompletedFetch(1, TIP0, _records(4), [(0, 3, 1)], value_deserializer=make_deserialize(value))
    assert [r.value for r in fetch.fetch_records(10)] == ["v0", "v1"]
    with pytest.raises(RecordDeserializationError) as info:
        fetch.fetch_records(10)
    assert (info.value.topic_partition, info.value.offset, info.value.value_buffer) == (TIP0.topic_partition, 2, b"v2")
    assert [r.value for r in fetch.fetch_records(10)] == ["v3"]
    # Counted as delivered (no GAP): the consumer acknowledges it (RELEASE unless told otherwise).
    assert fetch.is_consumed and fetch.take_gaps().items() == []


def _corrupt(batch: bytes) -> bytes:
    """``batch`` with its last value's first byte (under the CRC) flipped: v -> V."""
    at = batch.rindex(b"v")
    return batch[:at] + b"V" + batch[at + 1:]


@pytest.mark.parametrize("check_crcs", [True, False])
def test_a_corrupt_batch_is_raised_after_the_records_before_it_with_its_acquired_offsets(check_crcs):
    # Offsets 0-2 good, 3-6 corrupt (this member acquired 1-5: 3-5 of it), 7-8 good.
    bad = _corrupt(_records(4, base=3))
    if not check_crcs:  # only a record that cannot be decoded is found then: cut its varints
        bad = bad[:-6] + b"\xff" * 6
    data = _records(3) + bad + _records(2, base=7)
    fetch = ShareCompletedFetch(1, TIP0, data, [(1, 5, 1), (7, 8, 2)], check_crcs=check_crcs)
    assert [r.offset for r in fetch.fetch_records(10)] == [1, 2]
    with pytest.raises(CorruptRecordError) as info:
        fetch.fetch_records(10)
    error = info.value
    assert error.offsets == {3, 4, 5}  # the batch's acquired offsets (Java's rejectRecordBatch)
    assert (error.topic, error.partition) == ("t", 0) and "rejected unless acknowledged by offset" in str(error)
    assert isinstance(error.__cause__, CorruptRecordError)
    # The batches after it are read as usual; the rejected offsets count as delivered (no GAP).
    assert [(r.offset, r.delivery_count) for r in fetch.fetch_records(10)] == [(7, 2), (8, 2)]
    assert fetch.is_consumed and fetch.take_gaps().items() == []


def test_without_crc_checks_a_decodable_corrupt_batch_is_handed_out():
    data = _corrupt(_records(4))
    fetch = ShareCompletedFetch(1, TIP0, data, [(0, 3, 1)], check_crcs=False)
    assert [r.value for r in fetch.fetch_records(10)] == [b"v0", b"v1", b"v2", b"V3"]
    with pytest.raises(CorruptRecordError):
        ShareCompletedFetch(1, TIP0, data, [(0, 3, 1)]).fetch_records(10)


# --- ShareSessionHandler --------------------------------------------------------------------


def _roundtrip(request, version):
    cls = type(request)
    return cls.decode(request.encode(version), version)


def test_the_opening_fetch_names_every_partition_and_refuses_acknowledgements():
    handler = ShareSessionHandler(1, "g", "m")
    params = ShareFetchParams(max_records=50)
    request = handler.build_share_fetch([TIP0, TIP1], {}, params, 1)
    assert request.share_session_epoch == 0 and request.max_records == 50 and request.batch_size == 50
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in request.topics] == [(TOPIC_ID, [0, 1])]
    assert _roundtrip(request, 1).topics[0].partitions[1].partition_index == 1
    with pytest.raises(ValueError):
        handler.build_share_fetch([TIP0], {TIP0: acks(o1=1)}, params, 1)


def test_an_incremental_fetch_names_new_and_acknowledged_partitions_and_forgets_removed_ones():
    handler = ShareSessionHandler(1, "g", "m")
    params = ShareFetchParams()
    handler.build_share_fetch([TIP0, TIP1], {}, params, 1)
    handler.on_fetch_success([TIP0, TIP1])
    assert handler.epoch == 1
    tip2 = TopicIdPartition(uuid.UUID(int=8), TopicPartition("u", 0))
    request = handler.build_share_fetch([TIP0, tip2], {TIP0: acks(o1=1, o2=1, o4=2)}, params, 1)
    assert request.share_session_epoch == 1
    named = {(t.topic_id, p.partition_index): [(b.first_offset, b.last_offset, b.acknowledge_types)
                                               for b in p.acknowledgement_batches]
             for t in request.topics for p in t.partitions}
    assert named == {(TOPIC_ID, 0): [(1, 2, [1]), (4, 4, [2])], (tip2.topic_id, 0): []}
    assert [(f.topic_id, f.partitions) for f in request.forgotten_topics_data] == [(TOPIC_ID, [1])]
    decoded = _roundtrip(request, 1)
    assert decoded.forgotten_topics_data[0].partitions == [1]


def test_session_errors_reset_the_epoch_and_start_a_new_generation():
    handler = ShareSessionHandler(1, "g", "m")
    handler.on_fetch_success([TIP0])
    handler.on_acknowledge_success()
    assert handler.epoch == 2 and handler.generation == 0
    handler.reset()
    assert handler.epoch == 0 and handler.generation == 1 and not handler.session_partitions
    handler.reset()  # no session: nothing more ended
    assert handler.generation == 1
    with pytest.raises(ValueError):
        handler.build_share_acknowledge({TIP0: acks(o1=1)}, 1)


def test_the_final_acknowledge_closes_the_session():
    handler = ShareSessionHandler(1, "g", "m")
    handler.on_fetch_success([TIP0])
    request = handler.build_share_acknowledge({TIP0: acks(o3=3)}, 1, final=True)
    assert request.share_session_epoch == FINAL_EPOCH
    batch = _roundtrip(request, 1).topics[0].partitions[0].acknowledgement_batches[0]
    assert (batch.first_offset, batch.last_offset, batch.acknowledge_types) == (3, 3, [3])


def test_renew_needs_version_2_and_sets_is_renew_ack():
    handler = ShareSessionHandler(1, "g", "m")
    handler.on_fetch_success([TIP0])
    renew = {TIP0: acks(o5=AcknowledgeType.RENEW)}
    with pytest.raises(UnsupportedVersionError):
        handler.build_share_acknowledge(renew, 1)
    request = handler.build_share_acknowledge(renew, 2)
    decoded = _roundtrip(request, 2)
    assert decoded.is_renew_ack is True
    assert decoded.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types == [4]
    assert _roundtrip(handler.build_share_acknowledge({TIP0: acks(o5=1)}, 2), 2).is_renew_ack is False
    with pytest.raises(ValueError):  # RENEW never rides on a ShareFetch
        handler.build_share_fetch([TIP0], renew, ShareFetchParams(), 2)


def test_record_limit_acquire_mode_needs_version_2():
    handler = ShareSessionHandler(1, "g", "m")
    params = ShareFetchParams(share_acquire_mode="record_limit")
    with pytest.raises(UnsupportedVersionError):
        handler.build_share_fetch([TIP0], {}, params, 1)
    assert _roundtrip(handler.build_share_fetch([TIP0], {}, params, 2), 2).share_acquire_mode == 1
    default = handler.build_share_fetch([TIP0], {}, ShareFetchParams(), 2)
    assert _roundtrip(default, 2).share_acquire_mode == 0
    assert isinstance(default, ShareFetchRequest) and ShareAcknowledgeRequest.max_version >= 2
