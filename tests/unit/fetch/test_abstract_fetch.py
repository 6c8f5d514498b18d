"""AbstractFetch: per-node request building, skipping rules, wire encoding, responses.

Cluster metadata is a real ``kproto.net.ClusterMetadata`` fed a MetadataResponse; requests
and responses go through kproto's generated encoders and decoders.
"""

from __future__ import annotations

import uuid


from kproto.consumer.fetch.fetch_collector import FetchCollector
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.fetch.fetch_session_handler import FetchMetadata
from kproto.consumer.subscription_state import FetchPosition, LeaderAndEpoch
from kproto.errors import KafkaConnectionError
from kproto.messages import FetchRequest
from kproto.records import build_batch
from kproto.structs import TopicPartition
from tests.support.fetch_fixtures import T, TOPIC_ID, make, response_for


def test_one_request_per_leader_node():
    fetch, _ = make()
    requests = fetch.prepare_fetch_requests()
    assert set(requests) == {1, 2}
    assert list(requests[1].to_send) == [T[0], T[2]] and list(requests[2].to_send) == [T[1]]
    part = requests[1].to_send[T[0]]
    assert (part.fetch_offset, part.max_bytes, part.topic_id) == (5, 1048576, TOPIC_ID)


def test_request_fields_on_the_wire():
    fetch, _ = make()
    data = fetch.prepare_fetch_requests()[1]
    version = fetch.request_version(data, 16)
    assert version == 16
    decoded = FetchRequest.decode(fetch.create_fetch_request(data, version).encode(version), version)
    assert (decoded.max_wait_ms, decoded.min_bytes, decoded.max_bytes, decoded.isolation_level) == (250, 10, 52428800, 1)
    assert (decoded.session_id, decoded.session_epoch, decoded.rack_id) == (0, 0, "r1")
    (topic,) = decoded.topics
    assert topic.topic_id == TOPIC_ID
    assert [(p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch) for p in topic.partitions] \
        == [(0, 5, 1048576, -1), (2, 5, 1048576, -1)]


def test_without_topic_ids_version_capped_at_12_and_names_used():
    fetch, _ = make(topic_id=uuid.UUID(int=0))
    data = fetch.prepare_fetch_requests()[2]
    assert data.can_use_topic_ids is False and fetch.request_version(data, 17) == 12
    decoded = FetchRequest.decode(fetch.create_fetch_request(data, 12).encode(12), 12)
    assert decoded.topics[0].topic == "t"


def test_skips_nodes_in_flight_and_nodes_with_buffered_data():
    fetch, subs = make()
    requests = fetch.prepare_fetch_requests()
    fetch.mark_pending(1)
    fetch.mark_pending(2)
    assert fetch.prepare_fetch_requests() == {}
    # Node 2 answers with data for t-1; node 1 is still in flight.
    fetch.handle_fetch_success(2, requests[2], response_for(requests, 2, 16, session_id=9,
                                                            records={T[1]: build_batch([(None, b"x")], base_offset=5)}), 16)
    assert fetch.fetch_buffer.buffered_partitions() == {T[1]}
    assert fetch.prepare_fetch_requests() == {}  # node 1 in flight, node 2 hosts buffered data
    collector = FetchCollector(subs, FetchConfig())
    assert collector.collect_fetch(fetch.fetch_buffer).num_records == 1
    again = fetch.prepare_fetch_requests()
    assert set(again) == {2}
    assert again[2].metadata == FetchMetadata(9, 1) and list(again[2].to_send) == [T[1]]


def test_paused_partition_is_forgotten_in_the_session():
    fetch, subs = make()
    requests = fetch.prepare_fetch_requests()
    fetch.mark_pending(1)
    fetch.handle_fetch_success(1, requests[1], response_for(requests, 1, 16, session_id=3), 16)
    FetchCollector(subs, FetchConfig()).collect_fetch(fetch.fetch_buffer)  # the empty fetches
    subs.pause(T[2])
    nxt = fetch.prepare_fetch_requests()[1]
    assert nxt.metadata == FetchMetadata(3, 1) and nxt.to_send == {}
    decoded = FetchRequest.decode(fetch.create_fetch_request(nxt, 16).encode(16), 16)
    assert [(f.topic_id, f.partitions) for f in decoded.forgotten_topics_data] == [(TOPIC_ID, [2])]


def test_preferred_read_replica_and_position_leader_choose_the_node():
    fetch, subs = make()
    subs.update_preferred_read_replica(T[0], 2, 10**9)
    subs.seek_validated(T[1], FetchPosition(5, 4, LeaderAndEpoch(1, 4)))
    requests = fetch.prepare_fetch_requests()
    assert set(requests[2].to_send) == {T[0]}
    assert set(requests[1].to_send) == {T[1], T[2]}
    assert requests[1].to_send[T[1]].current_leader_epoch == 4


def test_no_leader_requests_metadata_update():
    fetch, subs = make()
    subs.assign_from_user([TopicPartition("unknown", 0)])
    subs.seek(TopicPartition("unknown", 0), 0)
    fetch.metadata._need_update = False
    assert fetch.prepare_fetch_requests() == {}
    assert fetch.metadata.need_update()


def test_session_error_response_buffers_nothing_and_next_is_full():
    fetch, _ = make()
    requests = fetch.prepare_fetch_requests()
    fetch.mark_pending(1)
    fetch.handle_fetch_success(1, requests[1], response_for(requests, 1, 16, session_id=3), 16)
    fetch.fetch_buffer.clear()
    second = fetch.prepare_fetch_requests()
    fetch.mark_pending(1)
    fetch.handle_fetch_success(1, second[1], response_for(second, 1, 16, error_code=71), 16)
    assert fetch.fetch_buffer.buffered_partitions() == set()
    assert 1 not in fetch.nodes_with_pending_fetch_requests
    third = fetch.prepare_fetch_requests()
    assert third[1].metadata == FetchMetadata(3, 0) and set(third[1].to_send) == {T[0], T[2]}


def test_failure_resets_session_and_clears_pending():
    fetch, subs = make()
    requests = fetch.prepare_fetch_requests()
    fetch.mark_pending(1)
    fetch.handle_fetch_success(1, requests[1], response_for(requests, 1, 16, session_id=3), 16)
    fetch.fetch_buffer.clear()
    subs.update_preferred_read_replica(T[0], 1, 10**9)
    nxt = fetch.prepare_fetch_requests()
    fetch.mark_pending(1)
    fetch.handle_fetch_failure(1, nxt[1], KafkaConnectionError("reset"))
    assert 1 not in fetch.nodes_with_pending_fetch_requests
    assert fetch.session_handlers[1].next_metadata.is_full
    assert subs.preferred_read_replica(T[0], 0) is None
    assert fetch.metadata.need_update()


def test_not_leader_partition_error_requests_metadata():
    fetch, _ = make()
    requests = fetch.prepare_fetch_requests()
    fetch.metadata._need_update = False
    fetch.handle_fetch_success(2, requests[2], response_for(requests, 2, 16, partition_errors={T[1]: 6}), 16)
    assert fetch.metadata.need_update()


def test_close_requests_only_for_open_sessions():
    fetch, _ = make()
    requests = fetch.prepare_fetch_requests()
    fetch.handle_fetch_success(1, requests[1], response_for(requests, 1, 16, session_id=3), 16)
    fetch.handle_fetch_success(2, requests[2], response_for(requests, 2, 16, session_id=0), 16)
    close = fetch.prepare_close_fetch_session_requests()
    assert set(close) == {1} and close[1].metadata == FetchMetadata(3, -1)
    decoded = FetchRequest.decode(fetch.create_fetch_request(close[1], 16).encode(16), 16)
    assert (decoded.session_id, decoded.session_epoch, decoded.topics) == (3, -1, [])


def test_fetch_session_topic_id_error_refreshes_metadata_and_goes_full():
    fetch, _ = make()
    requests = fetch.prepare_fetch_requests()
    fetch.handle_fetch_success(1, requests[1], response_for(requests, 1, 16, session_id=3), 16)
    fetch.fetch_buffer.clear()
    second = fetch.prepare_fetch_requests()
    fetch.metadata._need_update = False
    fetch.handle_fetch_success(1, second[1], response_for(second, 1, 16, error_code=106), 16)
    assert fetch.metadata.need_update() and fetch.fetch_buffer.buffered_partitions() == set()
    assert fetch.prepare_fetch_requests()[1].metadata.is_full


def test_session_not_found_error_starts_a_new_session():
    fetch, _ = make()
    requests = fetch.prepare_fetch_requests()
    fetch.handle_fetch_success(1, requests[1], response_for(requests, 1, 16, session_id=3), 16)
    fetch.fetch_buffer.clear()
    second = fetch.prepare_fetch_requests()
    fetch.handle_fetch_success(1, second[1], response_for(second, 1, 16, error_code=70), 16)
    third = fetch.prepare_fetch_requests()[1]
    assert third.metadata == FetchMetadata(0, 0) and set(third.to_send) == {T[0], T[2]}


def test_incremental_session_over_the_wire_sends_only_changes():
    fetch, subs = make()
    requests = fetch.prepare_fetch_requests()
    records = {T[0]: build_batch([(None, b"a"), (None, b"b")], base_offset=5)}
    fetch.handle_fetch_success(1, requests[1], response_for(requests, 1, 16, session_id=3, records=records), 16)
    fetch.handle_fetch_success(2, requests[2], response_for(requests, 2, 16, session_id=4), 16)
    FetchCollector(subs, FetchConfig()).collect_fetch(fetch.fetch_buffer)
    nxt = fetch.prepare_fetch_requests()
    # t-0 moved to offset 7; t-2 is unchanged, so it is not named again.
    decoded = FetchRequest.decode(fetch.create_fetch_request(nxt[1], 16).encode(16), 16)
    assert (decoded.session_id, decoded.session_epoch) == (3, 1)
    assert [(p.partition, p.fetch_offset) for t in decoded.topics for p in t.partitions] == [(0, 7)]
    assert decoded.forgotten_topics_data == []
    # An incremental answer names only what it has data for, and is accepted.
    fetch.handle_fetch_success(1, nxt[1], response_for(nxt, 1, 16, session_id=3), 16)
    assert fetch.session_handlers[1].next_metadata == FetchMetadata(3, 2)


def test_forgetting_two_partitions_of_one_topic_is_one_entry():
    fetch, subs = make()
    requests = fetch.prepare_fetch_requests()
    fetch.handle_fetch_success(1, requests[1], response_for(requests, 1, 16, session_id=3), 16)
    FetchCollector(subs, FetchConfig()).collect_fetch(fetch.fetch_buffer)
    subs.pause(T[0])
    subs.pause(T[2])
    assert 1 not in fetch.prepare_fetch_requests()  # nothing fetchable on node 1: no request
    # Both partitions leave the session in one request (here alongside a new one).
    handler = fetch.session_handlers[1]
    builder = handler.new_builder()
    builder.add(TopicPartition("u", 0), requests[1].to_send[T[0]])
    data = builder.build()
    assert [tp for _, tp in data.to_forget] == [T[0], T[2]]
    for version in (12, 16):
        decoded = FetchRequest.decode(fetch.create_fetch_request(data, version).encode(version), version)
        assert [f.partitions for f in decoded.forgotten_topics_data] == [[0, 2]]


def test_v12_response_by_name_and_unknown_v13_topic_id():
    fetch, _ = make(topic_id=uuid.UUID(int=0))
    requests = fetch.prepare_fetch_requests()
    fetch.handle_fetch_success(2, requests[2], response_for(requests, 2, 12, session_id=5), 12)
    assert fetch.fetch_buffer.buffered_partitions() == {T[1]}
    fetch2, _ = make()
    requests = fetch2.prepare_fetch_requests()
    response = response_for(requests, 1, 16, session_id=5)
    response.responses[0].topic_id = uuid.UUID(int=0xDEF)  # an id this session never sent
    fetch2.handle_fetch_success(1, requests[1], response, 16)
    assert fetch2.fetch_buffer.buffered_partitions() == set()
    assert fetch2.session_handlers[1].next_metadata.is_full


def test_response_for_a_partition_not_requested_is_a_bug():
    fetch, _ = make()
    requests = fetch.prepare_fetch_requests()
    fetch.mark_pending(2)
    response = response_for(requests, 2, 16, session_id=0)
    response.responses[0].partitions[0].partition_index = 0  # t-0 was asked of node 1
    # The full-response check refuses it before any data is buffered.
    fetch.handle_fetch_success(2, requests[2], response, 16)
    assert fetch.fetch_buffer.buffered_partitions() == set() and 2 not in fetch.nodes_with_pending_fetch_requests


def test_response_from_a_node_without_session_and_unavailable_nodes():
    fetch, _ = make()
    requests = fetch.prepare_fetch_requests()
    fetch.session_handlers.clear()
    fetch.mark_pending(1)
    fetch.handle_fetch_success(1, requests[1], response_for(requests, 1, 16), 16)
    assert fetch.fetch_buffer.buffered_partitions() == set() and not fetch.nodes_with_pending_fetch_requests
    fetch.is_unavailable = lambda node: node == 2
    assert set(fetch.prepare_fetch_requests()) == {1}


def test_nothing_to_fetch_and_nodes_with_buffered_data_skipped():
    fetch, subs = make()
    for tp in T:
        subs.pause(tp)
    assert fetch.prepare_fetch_requests() == {}
    for tp in T:
        subs.resume(tp)
    requests = fetch.prepare_fetch_requests()
    # t-0's data is buffered: node 1 (t-0 and t-2) gets no request until it is read.
    fetch.handle_fetch_success(1, requests[1], response_for(
        requests, 1, 16, session_id=3, records={T[0]: build_batch([(None, b"x")], base_offset=5)}), 16)
    fetch.handle_fetch_success(2, requests[2], response_for(requests, 2, 16, session_id=4), 16)
    # A collection that takes no records still takes node 2's answers without any: its
    # partitions are fetchable again; node 1 keeps a session, so t-2 waits for t-0's data.
    FetchCollector(subs, FetchConfig()).collect_fetch(fetch.fetch_buffer, max_records=0)
    assert set(fetch.prepare_fetch_requests()) == {2}
    assert fetch.fetch_buffer.buffered_partitions() == {T[0]}


def _node_1_answered_with_t0_data(session_id: int, end_offset: int, **config):
    """Node 1 answers its first Fetch with data for t-0 only (t-2: none, the partitions'
    end at ``end_offset``); the collection that follows takes t-2's empty answer and no
    record, so t-0's data stays buffered."""
    fetch, subs = make(**config)
    requests = fetch.prepare_fetch_requests()
    fetch.mark_pending(1)
    fetch.handle_fetch_success(1, requests[1], response_for(
        requests, 1, 16, session_id=session_id, records={T[0]: build_batch([(None, b"x" * 100)], base_offset=5)},
        high_watermark=end_offset, last_stable_offset=end_offset), 16)
    FetchCollector(subs, FetchConfig()).collect_fetch(fetch.fetch_buffer, max_records=0)
    assert fetch.fetch_buffer.buffered_partitions() == {T[0]}
    return fetch


def test_a_node_without_a_session_is_fetched_from_beside_its_buffered_data():
    # t-2 is behind (end 20, position 5): the request names it, and not t-0.
    fetch = _node_1_answered_with_t0_data(session_id=0, end_offset=20)
    assert fetch.session_handlers[1].sessionless
    assert list(fetch.prepare_fetch_requests()[1].to_send) == [T[2]]


def test_nothing_beside_buffered_data_when_no_partition_is_known_behind():
    # t-2 is at its end: the broker would hold the request for fetch.max.wait.ms.
    fetch = _node_1_answered_with_t0_data(session_id=0, end_offset=5)
    assert 1 not in fetch.prepare_fetch_requests()


def test_nothing_beside_buffered_data_with_a_session_or_a_full_buffer():
    fetch = _node_1_answered_with_t0_data(session_id=7, end_offset=20)
    assert not fetch.session_handlers[1].sessionless and 1 not in fetch.prepare_fetch_requests()
    # fetch.max.bytes of data already buffered: no more while it is read.
    fetch = _node_1_answered_with_t0_data(session_id=0, end_offset=20, fetch_max_bytes=50)
    assert 1 not in fetch.prepare_fetch_requests()
