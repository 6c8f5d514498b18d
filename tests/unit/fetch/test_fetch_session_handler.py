"""FetchSessionHandler (KIP-227): full vs incremental requests and the epoch protocol."""

from __future__ import annotations

import uuid

import pytest

from kproto.consumer.fetch.fetch_session_handler import (
    FINAL_EPOCH, INITIAL, LEGACY, FetchMetadata, FetchSessionHandler, PartitionData, TopicIdPartition, next_epoch,
)
from kproto.errors import KafkaConnectionError
from kproto.structs import TopicPartition

ID_T = uuid.UUID(int=1)
ID_U = uuid.UUID(int=2)
T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def pd(offset, topic_id=ID_T, max_bytes=100):
    return PartitionData(topic_id, offset, -1, max_bytes, 5)


def build(handler, parts):
    builder = handler.new_builder()
    for tp, data in parts.items():
        builder.add(tp, data)
    return builder.build()


def ok(handler, session_id, partitions, version=13, ids=None):
    ids = {ID_T if tp.topic == "t" else ID_U for tp in partitions} if ids is None and version >= 13 else ids or set()
    return handler.handle_response(0, session_id, set(partitions), ids, version)


def test_next_epoch_wraps_and_sessionless_stays():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(-1) == FINAL_EPOCH


def test_full_then_incremental_sequence():
    handler = FetchSessionHandler(1)
    first = build(handler, {T0: pd(0), T1: pd(0)})
    assert first.metadata == INITIAL and first.metadata.is_full
    assert list(first.to_send) == [T0, T1] and first.can_use_topic_ids
    assert ok(handler, 77, [T0, T1])
    assert handler.next_metadata == FetchMetadata(77, 1)

    # Unchanged partitions are not sent again; a changed offset is "altered".
    second = build(handler, {T0: pd(0), T1: pd(5)})
    assert second.metadata == FetchMetadata(77, 1)
    assert list(second.to_send) == [T1] and second.to_forget == []
    assert set(second.session_partitions) == {T0, T1}
    assert ok(handler, 77, [T1])
    assert handler.next_metadata == FetchMetadata(77, 2)

    # Adding U0 and dropping T0: U0 sent, T0 forgotten.
    third = build(handler, {T1: pd(5), U0: pd(3, ID_U)})
    assert list(third.to_send) == [U0]
    assert third.to_forget == [TopicIdPartition(ID_T, T0)]
    assert set(third.session_partitions) == {T1, U0}
    # An incremental response may name any subset of the session.
    assert ok(handler, 77, [])
    assert handler.next_metadata == FetchMetadata(77, 3)


def test_new_partitions_come_before_altered_ones():
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0)})
    ok(handler, 9, [T0])
    data = build(handler, {T0: pd(4), U0: pd(0, ID_U)})
    assert list(data.to_send) == [U0, T0]


def test_recreated_topic_is_replaced_and_forgotten_from_v13():
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0)})
    ok(handler, 9, [T0])
    new_id = uuid.UUID(int=99)
    data = build(handler, {T0: pd(0, new_id)})
    assert data.to_replace == [TopicIdPartition(ID_T, T0)]
    assert list(data.to_send) == [T0]
    assert data.forgotten(13) == [TopicIdPartition(ID_T, T0)]
    assert data.forgotten(12) == []


def test_missing_topic_ids_disable_topic_ids():
    handler = FetchSessionHandler(1)
    data = build(handler, {T0: pd(0, uuid.UUID(int=0))})
    assert data.can_use_topic_ids is False
    assert handler.session_topic_names == {}


@pytest.mark.parametrize("error_code, expected", [
    (70, INITIAL),                    # FETCH_SESSION_ID_NOT_FOUND: start over
    (71, FetchMetadata(77, 0)),       # INVALID_FETCH_SESSION_EPOCH: close it, open a new one
])
def test_session_errors_fall_back_to_full(error_code, expected):
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0)})
    ok(handler, 77, [T0])
    build(handler, {T0: pd(1)})
    assert handler.handle_response(error_code, 0, set(), set(), 13) is False
    assert handler.next_metadata == expected
    assert handler.next_metadata.is_full
    again = build(handler, {T0: pd(1)})
    assert again.metadata.is_full and list(again.to_send) == [T0]


def test_full_response_must_match_the_request():
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0), T1: pd(0)})
    assert handler.handle_response(0, 5, {T0}, {ID_T}, 13) is False  # T1 omitted
    assert handler.next_metadata == INITIAL
    build(handler, {T0: pd(0)})
    assert handler.handle_response(0, 5, {T0, U0}, {ID_T, ID_U}, 13) is False  # U0 extra
    build(handler, {T0: pd(0)})
    assert handler.handle_response(0, 5, {T0}, {ID_T, uuid.UUID(int=5)}, 13) is False  # unknown id


def test_incremental_response_with_extra_partition_closes_session():
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0)})
    ok(handler, 5, [T0])
    build(handler, {T0: pd(0)})
    assert handler.handle_response(0, 5, {U0}, {ID_U}, 13) is False
    assert handler.next_metadata == FetchMetadata(5, 0)


def test_broker_without_sessions_and_throttled_full_response():
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0)})
    assert ok(handler, 0, [T0]) is True  # session id 0: the broker made no session
    assert handler.next_metadata == INITIAL
    build(handler, {T0: pd(0)})
    assert handler.handle_response(0, 0, set(), set(), 13, throttle_time_ms=100) is False
    assert handler.next_metadata == INITIAL


def test_request_failure_and_close():
    handler = FetchSessionHandler(1)
    assert handler.close_request_data() is None  # nothing to close yet
    build(handler, {T0: pd(0)})
    ok(handler, 42, [T0])
    handler.handle_error(KafkaConnectionError("gone"))
    assert handler.next_metadata == FetchMetadata(42, 0)
    build(handler, {T0: pd(0)})
    ok(handler, 43, [T0])
    close = handler.close_request_data()
    assert close.metadata == FetchMetadata(43, FINAL_EPOCH) and close.to_send == {}


def test_sessions_disabled_always_legacy_full():
    handler = FetchSessionHandler(1, incremental=False)
    for _ in range(2):
        data = build(handler, {T0: pd(0)})
        assert data.metadata == LEGACY and list(data.to_send) == [T0]
        assert ok(handler, 0, [T0])


def test_removed_partition_without_topic_id_forces_names():
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0, uuid.UUID(int=0)), U0: pd(0, ID_U)})
    assert ok(handler, 8, [T0, U0], version=12)
    assert handler.session_id == 8
    data = build(handler, {U0: pd(0, ID_U)})
    # T0 has no id, so it can only be forgotten by name: the request must use names.
    assert data.to_forget == [TopicIdPartition(uuid.UUID(int=0), T0)] and data.can_use_topic_ids is False
    assert handler.session_topic_names == {}


def test_incremental_answer_without_session_id_starts_over():
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0)})
    ok(handler, 5, [T0])
    build(handler, {T0: pd(1)})
    # The broker evicted the session and answered without one: the next request is full.
    assert ok(handler, 0, [T0]) is True
    assert handler.next_metadata == INITIAL and handler.session_id == 0


def test_other_top_level_error_closes_the_session():
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0)})
    ok(handler, 5, [T0])
    build(handler, {T0: pd(1)})
    assert handler.handle_response(7, 5, set(), set(), 13) is False  # REQUEST_TIMED_OUT
    assert handler.next_metadata == FetchMetadata(5, 0)


def test_incremental_names_checked_without_ids_before_v13():
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0)})
    assert ok(handler, 5, [T0], version=12)
    build(handler, {T0: pd(1)})
    # Before v13 responses name topics: ids are not compared, extra partitions still are.
    assert handler.handle_response(0, 5, {T0}, set(), 12) is True
    assert handler.next_metadata == FetchMetadata(5, 2)
    build(handler, {T0: pd(2)})
    assert handler.handle_response(0, 5, {T1}, set(), 12) is False
    assert handler.next_metadata == FetchMetadata(5, 0)


def test_sessions_disabled_errors_stay_legacy():
    handler = FetchSessionHandler(1, incremental=False)
    build(handler, {T0: pd(0)})
    handler.handle_error(KafkaConnectionError("gone"))
    assert handler.next_metadata == LEGACY
    assert handler.handle_response(71, 0, set(), set(), 13) is False
    assert handler.next_metadata == LEGACY
    assert handler.close_request_data() is None  # never a session to close


def test_epoch_wraps_within_a_long_session():
    handler = FetchSessionHandler(1)
    build(handler, {T0: pd(0)})
    ok(handler, 5, [T0])
    handler.next_metadata = FetchMetadata(5, 2**31 - 1)
    build(handler, {T0: pd(0)})
    assert ok(handler, 5, [])
    assert handler.next_metadata == FetchMetadata(5, 1)  # never back to 0 (a full request)
