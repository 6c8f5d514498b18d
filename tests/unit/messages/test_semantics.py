"""Semantics of the generated classes: defaults, tagged fields, version limits, errors, surface."""

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kproto.errors import CorruptMessageError, IllegalArgumentError
from kproto.messages import (ApiVersionsRequest, ConsumerGroupHeartbeatResponse,
                             ConsumerProtocolSubscription, FetchRequest, FetchResponse,
                             MetadataRequest, MetadataResponse)
from kproto.messages import fetch as fetch_module
from kproto.protocol.primitives import read_tagged_fields

ROOT = Path(__file__).resolve().parents[3]


def test_schema_defaults():
    request = FetchRequest()
    assert request.max_bytes == 0x7FFFFFFF and request.replica_id == -1
    assert request.cluster_id is None and request.rack_id == "" and request.topics == []
    assert request.replica_state == FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1)
    assert FetchRequest.FetchTopic().topic_id == uuid.UUID(int=0)
    assert MetadataRequest().allow_auto_topic_creation is True
    assert MetadataResponse.MetadataResponseBroker().rack is None
    sub = ConsumerProtocolSubscription()
    assert sub.user_data is None and sub.generation_id == -1 and sub.rack_id is None
    assert FetchResponse.PartitionData().records is None
    assert ConsumerGroupHeartbeatResponse().assignment is None


def test_mutable_defaults_are_not_shared():
    a, b = FetchRequest(), FetchRequest()
    a.topics.append(FetchRequest.FetchTopic(topic="x"))
    a.replica_state.replica_epoch = 9
    assert b.topics == [] and b.replica_state.replica_epoch == -1
    decoded = FetchRequest.decode(FetchRequest().encode(3), 3)
    decoded.forgotten_topics_data.append(1)
    assert FetchRequest.decode(FetchRequest().encode(3), 3).forgotten_topics_data == []


def test_nested_classes_by_schema_name():
    assert FetchRequest.FetchTopic is fetch_module.FetchRequest_FetchTopic
    assert FetchRequest.FetchPartition is fetch_module.FetchRequest_FetchPartition
    assert FetchResponse.PartitionData.__name__ == "FetchResponse_PartitionData"
    assert FetchResponse.EpochEndOffset().epoch == -1


def test_repr_and_to_dict():
    request = FetchRequest(max_wait_ms=500, topics=[FetchRequest.FetchTopic(topic="t")])
    text = repr(request)
    assert text.startswith("FetchRequest(") and "max_wait_ms=500" in text
    assert "FetchRequest.FetchTopic(topic='t'" in text
    tree = request.to_dict()
    assert tree["max_wait_ms"] == 500 and tree["topics"][0]["topic"] == "t"
    assert tree["topics"][0]["partitions"] == []
    response = FetchResponse.decode(FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        partitions=[FetchResponse.PartitionData(records=b"abc")])]).encode(11), 11)
    assert response.to_dict()["responses"][0]["partitions"][0]["records"] == b"abc"
    assert "<memoryview 3 bytes>" in repr(response)


def test_unknown_field_name_is_rejected():
    with pytest.raises(TypeError):
        FetchRequest(max_wait=1)
    with pytest.raises(AttributeError):
        FetchRequest().no_such_field


def test_unknown_tagged_fields_survive_decode_encode():
    plain = ApiVersionsRequest(client_software_name="k", client_software_version="1").encode(3)
    assert plain.endswith(b"\x00")
    crafted = plain[:-1] + b"\x02\x07\x02hi\x09\x00"
    decoded = ApiVersionsRequest.decode(crafted, 3)
    assert decoded._unknown_tagged_fields == [(7, b"hi"), (9, b"")]
    assert decoded.encode(3) == crafted
    assert decoded != ApiVersionsRequest.decode(plain, 3)


def test_unknown_and_known_tags_are_written_in_order():
    response = FetchResponse(node_endpoints=[FetchResponse.NodeEndpoint(node_id=1, host="h")])
    response._unknown_tagged_fields = [(3, b"zz")]
    data = response.encode(17)
    decoded = FetchResponse.decode(data, 17)
    assert decoded == response and decoded.encode(17) == data
    fields, _ = read_tagged_fields(memoryview(data), 11)  # after the fixed fields and empty array
    assert [tag for tag, _, _ in fields] == [0, 3]


def test_known_tagged_fields_written_only_when_not_default():
    partition = FetchResponse.PartitionData(partition_index=1)
    topic = FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])
    short = FetchResponse(responses=[topic]).encode(12)
    partition.diverging_epoch = FetchResponse.EpochEndOffset(epoch=4, end_offset=100)
    partition.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=4)
    longer = FetchResponse(responses=[topic]).encode(12)
    assert len(longer) > len(short)
    decoded = FetchResponse.decode(longer, 12).responses[0].partitions[0]
    assert decoded.diverging_epoch.end_offset == 100 and decoded.current_leader.leader_id == 2
    assert decoded.snapshot_id == FetchResponse.SnapshotId()


def test_tagged_field_with_wrong_size_is_corrupt():
    plain = FetchResponse().encode(16)
    # top-level tag 0 (node_endpoints) claiming 2 bytes but holding an empty array (1 byte)
    bad = plain[:-1] + b"\x01\x00\x02\x01\x00"
    with pytest.raises(CorruptMessageError, match="tagged field 0"):
        FetchResponse.decode(bad, 16)


def test_non_default_value_in_missing_version_is_rejected():
    with pytest.raises(IllegalArgumentError, match="session_id") as info:
        FetchResponse(session_id=5).encode(6)
    assert "FetchResponse v6" in str(info.value)
    # ignorable fields are dropped silently
    assert FetchResponse.decode(FetchResponse(throttle_time_ms=5).encode(0), 0).throttle_time_ms == 0
    # nested struct field, non-ignorable: a preferred read replica before version 11
    partition = FetchResponse.PartitionData(preferred_read_replica=3)
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[partition])])
    with pytest.raises(IllegalArgumentError, match="preferred_read_replica"):
        response.encode(10)
    assert FetchResponse.decode(response.encode(11), 11) == response
    partition.preferred_read_replica = -1
    assert FetchResponse.decode(response.encode(10), 10) == response


def test_values_that_cannot_be_encoded():
    with pytest.raises(IllegalArgumentError, match="FetchRequest v4"):
        FetchRequest(max_wait_ms=1 << 40).encode(4)
    with pytest.raises(IllegalArgumentError):
        FetchRequest(topics=[FetchRequest.FetchTopic(topic=None)]).encode(4)
    with pytest.raises(IllegalArgumentError):
        FetchRequest(topics=None).encode(4)
    with pytest.raises(IllegalArgumentError, match="no version"):
        FetchRequest().encode(FetchRequest.max_version + 1)
    with pytest.raises(IllegalArgumentError):
        FetchRequest.decode(b"", -1)
    with pytest.raises(IllegalArgumentError, match="nested"):
        FetchRequest.FetchTopic().encode(4)


def test_nullable_struct_and_arrays():
    response = ConsumerGroupHeartbeatResponse(member_id="m", assignment=None)
    assert ConsumerGroupHeartbeatResponse.decode(response.encode(0), 0).assignment is None
    response.assignment = ConsumerGroupHeartbeatResponse.Assignment(
        topic_partitions=[ConsumerGroupHeartbeatResponse.TopicPartitions(
            topic_id=uuid.UUID(int=3), partitions=[0, 1, 2])])
    decoded = ConsumerGroupHeartbeatResponse.decode(response.encode(0), 0)
    assert decoded.assignment.topic_partitions[0].partitions == [0, 1, 2]
    assert MetadataRequest.decode(MetadataRequest(topics=None).encode(4), 4).topics is None


def test_consumer_protocol_data_schemas():
    sub = ConsumerProtocolSubscription(topics=["a", "b"], user_data=b"u", owned_partitions=[
        ConsumerProtocolSubscription.TopicPartition(topic="a", partitions=[1])],
        generation_id=3, rack_id="r1")
    data = sub.encode(3)
    assert ConsumerProtocolSubscription.decode(data, 3) == sub
    # A newer version read with an older schema: Kafka reads the known prefix.
    older = ConsumerProtocolSubscription.decode(data, 1, allow_trailing=True)
    assert older.topics == ["a", "b"] and older.owned_partitions == sub.owned_partitions


def test_import_loads_no_third_party_module():
    code = ("import sys; import kproto.messages; "
            "names = {m.split('.')[0] for m in sys.modules}; "
            "extra = names - set(sys.stdlib_module_names) - {'kproto', '__main__'}; "
            "print(sorted(extra))")
    # -S: no site hooks (their .pth imports are not kproto's); the cwd makes kproto importable
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    assert out == "[]"


def test_import_loads_message_modules_on_first_use():
    code = ("import sys; import kproto.messages as m; "
            "loaded = lambda: sorted(k for k in sys.modules if k.startswith('kproto.messages.')); "
            "print(loaded()); from kproto.messages import FetchRequest; print(loaded()); "
            "print(m.API_KEYS[18][1].__name__, len(m.API_KEYS), 1 in m.API_KEYS); print(loaded())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.splitlines()
    assert out == ["[]", "['kproto.messages.fetch']", "ApiVersionsResponse 95 True",
                   "['kproto.messages.api_versions', 'kproto.messages.fetch']"]


def test_unknown_names_raise_attribute_error():
    import kproto.messages

    with pytest.raises(AttributeError, match="NoSuchRequest"):
        kproto.messages.NoSuchRequest  # noqa: B018
    with pytest.raises(KeyError):
        kproto.messages.API_KEYS[9999]
    assert "FetchRequest" in dir(kproto.messages)


def test_copy_and_pickle():
    import copy
    import pickle

    request = FetchRequest(max_wait_ms=5, topics=[FetchRequest.FetchTopic(topic="t")])
    clone = copy.deepcopy(request)
    assert clone == request and clone.topics[0] is not request.topics[0]
    assert pickle.loads(pickle.dumps(request)) == request
