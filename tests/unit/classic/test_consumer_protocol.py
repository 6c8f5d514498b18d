"""ConsumerProtocol subscription/assignment bytes: byte equality with kafka-python's encoder,
Java's version rules, the sticky assignors' user data, and bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KPAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KPSubscription

from kproto.consumer.classic.consumer_protocol import (
    Assignment,
    Subscription,
    coerce_assignment,
    coerce_subscription,
    decode_assignment,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    encode_subscription,
)
from kproto.errors import CorruptMessageError, IllegalArgumentError
from kproto.structs import TopicPartition

topic_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz._-0123456789", min_size=1, max_size=12)
partition_ids = st.integers(min_value=0, max_value=2**31 - 1)
owned = st.dictionaries(topic_names, st.sets(partition_ids, max_size=5), max_size=4)


def _kp_subscription(version, topics, user_data, owned_map, generation, rack):
    groups = [KPSubscription.TopicPartition(topic=t, partitions=sorted(ps))
              for t, ps in sorted(owned_map.items()) if ps]
    return KPSubscription(version=version, topics=sorted(topics), user_data=user_data,
                          owned_partitions=groups, generation_id=generation, rack_id=rack)


@settings(max_examples=150, deadline=None)
@given(version=st.integers(0, 3), topics=st.sets(topic_names, max_size=6),
       user_data=st.one_of(st.none(), st.binary(max_size=20)), owned_map=owned,
       generation=st.integers(-1, 2**31 - 1), rack=st.one_of(st.none(), topic_names))
def test_subscription_bytes_equal_kafka_python(version, topics, user_data, owned_map, generation, rack):
    ours = Subscription(topics=list(topics), user_data=user_data,
                        owned_partitions=[TopicPartition(t, p) for t, ps in owned_map.items() for p in ps],
                        generation_id=generation, rack_id=rack)
    expected = _kp_subscription(version, topics, user_data, owned_map, generation, rack).encode()
    assert encode_subscription(ours, version) == expected

    back = decode_subscription(expected)
    assert back.version == version
    assert back.topics == sorted(topics)
    assert back.user_data == user_data
    if version >= 1:
        assert sorted(back.owned_partitions) == sorted(ours.owned_partitions)
    else:
        assert back.owned_partitions == []
    assert back.generation_id == (generation if version >= 2 else -1)
    assert back.rack_id == (rack if version >= 3 else None)


@settings(max_examples=100, deadline=None)
@given(version=st.integers(0, 3), owned_map=st.dictionaries(topic_names, st.lists(partition_ids, min_size=1, max_size=5),
                                                            max_size=4),
       user_data=st.one_of(st.none(), st.binary(max_size=20)))
def test_assignment_bytes_equal_kafka_python(version, owned_map, user_data):
    partitions = [TopicPartition(t, p) for t, ps in owned_map.items() for p in ps]
    expected = KPAssignment(version=version, assigned_partitions=list(owned_map.items()),
                            user_data=user_data).encode()
    assert encode_assignment(Assignment(partitions, user_data), version) == expected
    back = decode_assignment(expected)
    assert back.partitions() == partitions and back.user_data == user_data and back.version == version


def test_assignment_topics_in_first_appearance_order():
    # Java's ConsumerProtocol.serializeAssignment groups through the keyed (insertion-ordered)
    # collection: topics in the order they first appear, each with its partitions in order.
    data = encode_assignment(Assignment([TopicPartition("b", 1), TopicPartition("a", 0), TopicPartition("b", 0)]), 0)
    assert data == (b"\x00\x00" + b"\x00\x00\x00\x02"
                    + b"\x00\x01b" + b"\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x00"
                    + b"\x00\x01a" + b"\x00\x00\x00\x01\x00\x00\x00\x00" + b"\xff\xff\xff\xff")


def test_subscription_v3_layout_from_the_schema():
    sub = Subscription(topics=["t2", "t1"], user_data=None, owned_partitions=[TopicPartition("t1", 3)],
                       generation_id=7, rack_id="rack-a")
    assert encode_subscription(sub) == (
        b"\x00\x03"                                   # version
        b"\x00\x00\x00\x02\x00\x02t1\x00\x02t2"       # topics, sorted
        b"\xff\xff\xff\xff"                           # null user data
        b"\x00\x00\x00\x01\x00\x02t1\x00\x00\x00\x01\x00\x00\x00\x03"  # owned partitions
        b"\x00\x00\x00\x07"                           # generation id
        b"\x00\x06rack-a")                            # rack id


def test_newer_version_is_read_as_v3_and_trailing_fields_ignored():
    body = encode_subscription(Subscription(["t"], b"u", [TopicPartition("t", 0)], 4, "r"), 3)[2:]
    future = struct.pack(">h", 9) + body + b"\x00\x00\x00\x2a new field"
    sub = decode_subscription(future)
    assert (sub.version, sub.topics, sub.user_data, sub.owned_partitions, sub.generation_id, sub.rack_id) == (
        9, ["t"], b"u", [TopicPartition("t", 0)], 4, "r")
    # and writing "v9" writes v3
    assert encode_subscription(sub, 9)[:2] == b"\x00\x03"


def test_empty_rack_and_negative_generation_mean_absent():
    sub = decode_subscription(encode_subscription(Subscription(["t"], generation_id=-5, rack_id=""), 3))
    assert sub.rack_id is None and sub.generation is None and sub.generation_id == -1


def test_negative_version_rejected():
    with pytest.raises(CorruptMessageError):
        decode_subscription(b"\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff")
    with pytest.raises(CorruptMessageError):
        decode_assignment(b"\x80\x00")
    with pytest.raises(IllegalArgumentError):
        encode_subscription(Subscription(["t"]), -1)


@pytest.mark.parametrize("decode, data", [
    (decode_subscription, encode_subscription(Subscription(["abc", "d"], b"xyz", [TopicPartition("abc", 1)], 3, "r"))),
    (decode_assignment, encode_assignment(Assignment([TopicPartition("abc", 1), TopicPartition("d", 2)], b"u"))),
])
def test_every_truncation_is_a_corrupt_message_error(decode, data):
    decode(data)
    for cut in range(len(data)):
        with pytest.raises(CorruptMessageError):
            decode(data[:cut])


def test_absurd_array_length_fails_fast():
    with pytest.raises(CorruptMessageError):
        decode_subscription(b"\x00\x00\x7f\xff\xff\xff")
    with pytest.raises(CorruptMessageError):
        decode_assignment(b"\x00\x01\x7f\xff\xff\xff\x00")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_raises_only_corrupt_message_error(data):
    for decode in (decode_subscription, decode_assignment):
        try:
            decode(data)
        except CorruptMessageError:
            pass


def test_invalid_utf8_topic():
    with pytest.raises(CorruptMessageError):
        decode_subscription(b"\x00\x00\x00\x00\x00\x01\x00\x01\xff\xff\xff\xff\xff")


# --- sticky assignors' user data ---------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(owned_map=st.dictionaries(topic_names, st.sets(partition_ids, min_size=1, max_size=5), max_size=1),
       generation=st.integers(-1, 2**31 - 1))
def test_sticky_user_data_equals_kafka_python(owned_map, generation):
    partitions = [TopicPartition(t, p) for t, ps in owned_map.items() for p in sorted(ps)]
    expected = StickyAssignorUserData(version=1, previous_assignment=[
        StickyAssignorUserData.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in owned_map.items()],
        generation=generation).encode(header=False)
    assert encode_sticky_user_data(partitions, generation) == expected
    assert decode_sticky_user_data(expected) == (partitions, generation)


def test_sticky_user_data_topics_in_java_hashmap_order():
    # StickyAssignor groups through CollectionUtils.groupPartitionsByTopic, a HashMap: "a"
    # (hash 97) comes before "b" (98) in a 16-bucket table whatever the input order.
    data = encode_sticky_user_data([TopicPartition("b", 1), TopicPartition("a", 0)], 3)
    assert data == (b"\x00\x00\x00\x02" + b"\x00\x01a\x00\x00\x00\x01\x00\x00\x00\x00"
                    + b"\x00\x01b\x00\x00\x00\x01\x00\x00\x00\x01" + b"\x00\x00\x00\x03")


def test_sticky_user_data_versions():
    parts = [TopicPartition("t", 0), TopicPartition("t", 1)]
    v0 = encode_sticky_user_data(parts, None)
    assert decode_sticky_user_data(v0) == (parts, None)          # v0: no generation
    assert decode_sticky_user_data(None) == ([], None)
    assert decode_sticky_user_data(b"") == ([], None)
    assert decode_sticky_user_data(b"\x00\x00\x00\x05junk") == ([], -1)  # unparseable: ignored


def test_cooperative_user_data():
    assert encode_cooperative_user_data(12) == b"\x00\x00\x00\x0c"
    assert decode_cooperative_user_data(b"\x00\x00\x00\x0c") == 12
    assert decode_cooperative_user_data(None) is None
    assert decode_cooperative_user_data(b"\x01") == -1


# --- what custom assignors may hand back ---------------------------------------------------


def test_coerce_kafka_python_objects():
    kp = KPAssignment(version=0, assigned_partitions=[("t", [0, 2])], user_data=b"x")
    a = coerce_assignment(kp)
    assert a.partitions() == [TopicPartition("t", 0), TopicPartition("t", 2)] and a.user_data == b"x"
    assert coerce_assignment({"t": [1]}).partitions() == [TopicPartition("t", 1)]
    assert coerce_assignment([TopicPartition("t", 3)]).assigned_partitions == [("t", [3])]
    kps = _kp_subscription(2, {"t"}, None, {"t": {1, 0}}, 3, None)
    s = coerce_subscription(kps, "static-1")
    assert (s.topics, sorted(s.owned_partitions), s.generation_id, s.group_instance_id) == (
        ["t"], [TopicPartition("t", 0), TopicPartition("t", 1)], 3, "static-1")
    assert coerce_subscription(kps.encode()).owned_partitions == [TopicPartition("t", 0), TopicPartition("t", 1)]
