"""Smoke tests of the generated messages' public surface (FetchRequest, ApiVersions, Metadata)."""

import uuid

import pytest

from kproto.errors import CorruptMessageError, IllegalArgumentError
from kproto.messages import (API_KEYS, ApiVersionsRequest, ApiVersionsResponse, FetchRequest,
                             FetchResponse, MetadataRequest, MetadataResponse)


def test_fetch_request_round_trips_every_version():
    request = FetchRequest(max_wait_ms=500, min_bytes=1, topics=[FetchRequest.FetchTopic(
        topic="t", partitions=[FetchRequest.FetchPartition(partition=3, fetch_offset=42)])])
    for version in range(FetchRequest.min_version, FetchRequest.max_version + 1):
        if version >= 13:  # topic names are replaced by ids (the name is ignorable)
            request.topics[0].topic_id = uuid.UUID(int=7)
        assert FetchRequest.decode(request.encode(version), version).topics[0].partitions[0] \
            .fetch_offset == 42


def test_fetch_response_records_are_zero_copy():
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic_id=uuid.UUID(int=1), partitions=[FetchResponse.PartitionData(
            partition_index=0, high_watermark=10, records=b"abcdef")])])
    data = bytearray(response.encode(17))
    decoded = FetchResponse.decode(memoryview(data), 17)
    records = decoded.responses[0].partitions[0].records
    assert isinstance(records, memoryview) and records == b"abcdef"
    assert records.obj is data
    assert decoded == response


def test_api_versions_and_metadata_round_trip():
    response = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(
        api_key=1, min_version=4, max_version=17)], throttle_time_ms=3)
    for version in range(0, ApiVersionsResponse.max_version + 1):
        expect_throttle = 3 if version >= 1 else 0
        decoded = ApiVersionsResponse.decode(response.encode(version), version)
        assert decoded.api_keys == response.api_keys
        assert decoded.throttle_time_ms == expect_throttle
    meta = MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(
        node_id=1, host="h", port=9092, rack=None)])
    for version in range(MetadataResponse.min_version, MetadataResponse.max_version + 1):
        assert MetadataResponse.decode(meta.encode(version), version).brokers == meta.brokers
    assert MetadataRequest.decode(MetadataRequest(topics=None).encode(12), 12).topics is None


def test_class_attributes_and_api_keys():
    assert FetchRequest.api_key == 1 and FetchRequest.response_class is FetchResponse
    assert FetchRequest.flexible_min_version == 12
    assert API_KEYS[1] == (FetchRequest, FetchResponse)
    assert API_KEYS[18] == (ApiVersionsRequest, ApiVersionsResponse)


def test_truncated_and_unknown_version():
    data = FetchRequest(topics=[FetchRequest.FetchTopic(topic="t")]).encode(4)
    with pytest.raises(CorruptMessageError) as info:
        FetchRequest.decode(data[:-3], 4)
    assert info.value.api == "FetchRequest" and info.value.version == 4
    with pytest.raises(IllegalArgumentError):
        FetchRequest().encode(99)
