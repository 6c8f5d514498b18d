"""The generated read-ahead past an empty compact array (codegen/emit.py read_past_empty_array).

FetchResponse.PartitionData (v12+) reads its fixed fields, the aborted_transactions count byte,
preferred_read_replica and the records length's first byte with one unpack, kept only when the
array is empty. These tests drive every branch (empty, null, non-empty, a count needing two
varint bytes) and every truncation of such a message.
"""

import uuid

import pytest

from kproto.errors import CorruptMessageError
from kproto.messages import FetchResponse, MetadataResponse

P = FetchResponse.PartitionData
A = FetchResponse.AbortedTransaction


def _response(aborted, records=b"\x01\x02\x03") -> FetchResponse:
    part = P(partition_index=7, error_code=3, high_watermark=1 << 40, last_stable_offset=99,
             log_start_offset=5, preferred_read_replica=2, records=records)
    part.aborted_transactions = aborted
    after = P(partition_index=8, high_watermark=11, preferred_read_replica=-1, records=b"x")
    return FetchResponse(session_id=4, responses=[FetchResponse.FetchableTopicResponse(
        topic_id=uuid.UUID(int=9), partitions=[part, after])])


CASES = {
    "empty": [],
    "null": None,
    "one": [A(producer_id=1, first_offset=2)],
    "two_byte_count": [A(producer_id=i, first_offset=-i) for i in range(130)],
}


@pytest.mark.parametrize("version", [12, 13, 17])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_array_shape_decodes_the_fields_after_it(case, version):
    original = _response(CASES[case])
    decoded = FetchResponse.decode(original.encode(version), version)
    first, second = decoded.responses[0].partitions
    assert first.aborted_transactions == CASES[case]
    assert (first.partition_index, first.error_code, first.high_watermark,
            first.last_stable_offset, first.log_start_offset, first.preferred_read_replica,
            bytes(first.records)) == (7, 3, 1 << 40, 99, 5, 2, b"\x01\x02\x03")
    assert (second.partition_index, second.high_watermark, second.preferred_read_replica,
            bytes(second.records)) == (8, 11, -1, b"x")
    # v12 names topics, v13+ carries topic ids: compare the partitions, which every version has
    assert decoded.responses[0].partitions == original.responses[0].partitions


@pytest.mark.parametrize("records", [None, b"", bytes(200)])
def test_records_length_forms_after_the_read_ahead(records):
    # null (0), empty (1), and a two-byte varint length, each after an empty array
    decoded = FetchResponse.decode(_response([], records).encode(17), 17)
    got = decoded.responses[0].partitions[0].records
    assert (None if got is None else bytes(got)) == records


@pytest.mark.parametrize("case", ["empty", "one"])
def test_every_truncation_raises_corrupt_message(case):
    data = _response(CASES[case]).encode(17)
    for cut in range(len(data)):
        with pytest.raises(CorruptMessageError) as info:
            FetchResponse.decode(data[:cut], 17)
        assert info.value.api == "FetchResponse" and info.value.version == 17
        assert info.value.offset is None or 0 <= info.value.offset <= cut


def test_metadata_topic_read_ahead_keeps_authorized_operations():
    # MetadataResponseTopic v9+: is_internal, partitions (compact array), then
    # topic_authorized_operations; both the empty and the non-empty path.
    topic = MetadataResponse.MetadataResponseTopic
    part = MetadataResponse.MetadataResponsePartition(partition_index=3, leader_id=1)
    original = MetadataResponse(topics=[
        topic(name="a", is_internal=True, topic_authorized_operations=77),
        topic(name="b", partitions=[part], topic_authorized_operations=-5)])
    for version in (9, 10, 12):
        decoded = MetadataResponse.decode(original.encode(version), version)
        assert [(t.name, t.is_internal, t.topic_authorized_operations, t.partitions)
                for t in decoded.topics] == [("a", True, 77, []), ("b", False, -5, [part])]
