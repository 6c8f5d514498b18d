"""Generated messages against real brokers: every version both sides speak, decoded strictly.

Read-only APIs only (ApiVersions, Metadata, FindCoordinator, ListGroups, DescribeGroups,
ListOffsets, Fetch, OffsetFetch), over a plain socket (tests.brokers.raw), at every version
in the intersection of kproto's range and the broker's advertised range.
"""

from __future__ import annotations

import pytest

from kproto.messages import (ApiVersionsRequest, DescribeGroupsRequest, FetchRequest,
                             FindCoordinatorRequest, ListGroupsRequest, ListOffsetsRequest,
                             MetadataRequest, OffsetFetchRequest)
from tests.brokers import raw

# The bytes a broker serves: Tansu is a second implementation of them (tests/conftest.py).
pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka", "tansu")


def _common_versions(ranges, cls):
    if cls.api_key not in ranges:
        return range(0)  # the broker does not speak this API (the mock has no ListGroups)
    lo, hi = ranges[cls.api_key]
    return range(max(lo, cls.min_version), min(hi, cls.max_version) + 1)


def _send(broker, request, version):
    # librdkafka's mock appends a byte to some flexible responses; the others are strict.
    return raw.roundtrip(broker.addresses[0], request, version,
                         allow_trailing=broker.name == "mock")


@pytest.fixture
def ranges(broker):
    return raw.api_versions(broker.addresses[0])


def test_api_versions_every_version(broker, ranges):
    request = ApiVersionsRequest(client_software_name="kproto", client_software_version="0.1")
    for version in _common_versions(ranges, ApiVersionsRequest):
        response = _send(broker, request, version)
        assert response.error_code == 0
        assert {k.api_key for k in response.api_keys} == set(ranges)


def test_metadata_every_version(broker, ranges):
    topic = broker.new_topic(partitions=2)
    topic_ids = set()
    for version in _common_versions(ranges, MetadataRequest):
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
        if version >= 4:  # not ignorable: older versions cannot say it
            request.allow_auto_topic_creation = False
        response = _send(broker, request, version)
        assert response.brokers and all(b.port > 0 for b in response.brokers)
        [entry] = response.topics
        assert entry.name == topic and entry.error_code == 0
        assert sorted(p.partition_index for p in entry.partitions) == [0, 1]
        if version >= 10:
            topic_ids.add(entry.topic_id)
    assert len(topic_ids) <= 1


def test_group_apis_every_version(broker, ranges):
    topic = broker.new_topic(partitions=1)
    for version in _common_versions(ranges, FindCoordinatorRequest):
        request = (FindCoordinatorRequest(key="kproto-g") if version < 4 else
                   FindCoordinatorRequest(coordinator_keys=["kproto-g"]))
        response = _send(broker, request, version)
        error = response.error_code if version < 4 else response.coordinators[0].error_code
        assert error in (0, 15)  # 15: coordinator not available yet
    for version in _common_versions(ranges, ListGroupsRequest):
        assert _send(broker, ListGroupsRequest(), version).error_code == 0
    for version in _common_versions(ranges, DescribeGroupsRequest):
        response = _send(broker, DescribeGroupsRequest(groups=["kproto-none"]), version)
        assert [g.group_id for g in response.groups] == ["kproto-none"]
    for version in _common_versions(ranges, OffsetFetchRequest):
        # Named topics: Tansu answers topics=None (all topics) with a 2-byte body.
        if version < 8:
            request = OffsetFetchRequest(group_id="kproto-none", topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
            [entry] = _send(broker, request, version).topics[0].partitions
        else:
            request = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id="kproto-none", topics=[OffsetFetchRequest.OffsetFetchRequestTopics(
                    name=topic, partition_indexes=[0])])])
            [entry] = _send(broker, request, version).groups[0].topics[0].partitions
        assert entry.partition_index == 0 and entry.committed_offset == -1


def test_list_offsets_and_fetch_every_version(broker, ranges):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 5)
    for version in _common_versions(ranges, ListOffsetsRequest):
        if version == 0 and broker.name == "tansu":
            continue  # Tansu's v0 response omits OldStyleOffsets (kproto rejects it, rightly)
        request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=0, timestamp=-1, max_num_offsets=1)])])
        [entry] = _send(broker, request, version).topics[0].partitions
        assert entry.error_code == 0
        offset = entry.old_style_offsets[0] if version == 0 else entry.offset
        if "list_offsets_latest_is_log_end" in broker.capabilities:
            assert offset == len(written)
        else:  # Tansu answers "latest" with the last offset, not the log end
            assert 0 <= offset <= len(written)
    leader = raw.partition_leader(broker.bootstrap_servers, topic, 0)
    for version in _common_versions(ranges, FetchRequest):
        if version >= 13:
            break  # topic ids: covered through the consumer's fetch tests
        request = FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
                               topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                                   FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                               partition_max_bytes=1 << 20)])])
        response = raw.roundtrip(leader, request, version, allow_trailing=broker.name == "mock")
        [part] = response.responses[0].partitions
        assert part.error_code == 0 and part.high_watermark == len(written)
        assert isinstance(part.records, memoryview) and len(part.records) > 0
