"""The KIP-227 fetch-session front (tests/brokers/fetch_sessions.py) against its rules.

Raw Fetch requests over one connection (as a client sends a session's requests), data
written by confluent-kafka through the front, answers decoded with kproto.messages.
Each rule is shown by what the answer contains (session id, top-level error, the
partitions it names), and the front's own record must agree with the wire.
"""

from __future__ import annotations

import pytest

from kproto.messages import FetchRequest, MetadataRequest
from tests.brokers.fetch_sessions import FetchSessionFront
from tests.brokers.raw import RawConnection

MAX_BYTES = 1 << 20
WAIT_MS = 200


def fetch_request(topic, session_id: int, epoch: int, offsets: dict[int, int] | None = None,
                  forgotten=(), by_id: bool = False) -> FetchRequest:
    """A Fetch naming ``offsets`` {partition: fetch offset} and forgetting ``forgotten``;
    ``topic`` is a name, or an id with ``by_id`` (v13+)."""
    name = {"topic_id": topic} if by_id else {"topic": topic}
    topics = [FetchRequest.FetchTopic(**name, partitions=[
        FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=MAX_BYTES)
        for p, o in sorted(offsets.items())])] if offsets else []
    forgot = [FetchRequest.ForgottenTopic(**name, partitions=list(forgotten))] if forgotten else []
    return FetchRequest(max_wait_ms=WAIT_MS, min_bytes=1, max_bytes=MAX_BYTES, session_id=session_id,
                        session_epoch=epoch, topics=topics, forgotten_topics_data=forgot)


def answered(response) -> dict[int, tuple[int, int]]:
    """partition -> (high watermark, records bytes) of every partition the answer names."""
    return {p.partition_index: (p.high_watermark, len(p.records or b""))
            for t in response.responses for p in t.partitions}


def log_ends(written) -> dict[int, int]:
    ends: dict[int, int] = {}
    for w in written:
        ends[w.partition] = max(ends.get(w.partition, 0), w.offset + 1)
    return ends


@pytest.fixture
def session(fetch_sessions):
    """A 3-partition topic with data in each partition, a connection to the front and a
    session opened on it: (broker, topic, connection, session id, log ends)."""
    broker = fetch_sessions
    topic = broker.new_topic(partitions=3)
    ends = log_ends(broker.produce(topic, 9))
    with RawConnection(broker.front.address) as conn:
        first = conn.request(fetch_request(topic, 0, 0, {0: 0, 1: 0, 2: 0}), 12)
        assert first.error_code == 0 and first.session_id != 0
        assert {p: hw for p, (hw, _) in answered(first).items()} == ends
        assert all(size > 0 for _, size in answered(first).values())
        yield broker, topic, conn, first.session_id, ends


def test_initial_fetch_creates_a_session_and_an_idle_incremental_answers_nothing(session):
    broker, topic, conn, sid, ends = session
    created = [e for e in broker.front.events() if e.session_id == sid and e.kind == "new_session"]
    assert len(created) == 1 and {p for _, p in created[0].session_partitions} == {0, 1, 2}
    # Moving every offset to the log end: an update, but nothing new to report.
    idle = conn.request(fetch_request(topic, sid, 1, ends), 12)
    assert (idle.error_code, idle.session_id, answered(idle)) == (0, sid, {})
    again = conn.request(fetch_request(topic, sid, 2), 12)
    assert (again.error_code, again.session_id, answered(again)) == (0, sid, {})


def test_new_data_in_one_partition_answers_only_that_one(session):
    broker, topic, conn, sid, ends = session
    conn.request(fetch_request(topic, sid, 1, ends), 12)
    more = log_ends(broker.produce(topic, 2, partitions=[1], start_index=100))
    got = conn.request(fetch_request(topic, sid, 2), 12)
    assert got.session_id == sid and set(answered(got)) == {1}
    assert answered(got)[1][0] == more[1] and answered(got)[1][1] > 0
    last = broker.front.events()[-1]
    assert last.kind == "incremental" and last.answered == ((topic, 1),)


def test_forgotten_partitions_leave_the_session(session):
    broker, topic, conn, sid, ends = session
    conn.request(fetch_request(topic, sid, 1, ends, forgotten=[0]), 12)
    assert {p for _, p in broker.front.events()[-1].session_partitions} == {1, 2}
    broker.produce(topic, 4, partitions=[0, 2], start_index=100)
    got = conn.request(fetch_request(topic, sid, 2), 12)
    assert set(answered(got)) == {2}
    # Forgetting the rest closes the session: the request is answered without one.
    closing = conn.request(fetch_request(topic, sid, 3, forgotten=[1, 2]), 12)
    assert (closing.error_code, closing.session_id) == (0, 0)
    assert conn.request(fetch_request(topic, sid, 4), 12).error_code == 70


def test_an_added_partition_is_answered_once(fetch_sessions):
    broker = fetch_sessions
    topic = broker.new_topic(partitions=2)
    ends = log_ends(broker.produce(topic, 4))
    with RawConnection(broker.front.address) as conn:
        sid = conn.request(fetch_request(topic, 0, 0, {0: ends[0]}), 12).session_id
        added = conn.request(fetch_request(topic, sid, 1, {1: ends[1]}), 12)
        assert answered(added) == {1: (ends[1], 0)}  # no records, but new to the session
        assert answered(conn.request(fetch_request(topic, sid, 2), 12)) == {}


def test_session_errors(session):
    broker, topic, conn, sid, ends = session
    wrong = conn.request(fetch_request(topic, sid, 5), 12)
    assert (wrong.error_code, wrong.responses) == (71, [])
    unknown_id = next(i for i in range(1, 100) if broker.front.cache.get(i) is None)
    unknown = conn.request(fetch_request(topic, unknown_id, 1), 12)
    assert (unknown.error_code, unknown.session_id, unknown.responses) == (70, 0, [])
    # The failed attempts did not advance the session.
    assert conn.request(fetch_request(topic, sid, 1), 12).error_code == 0
    kinds = [e.kind for e in broker.front.events()[-3:]]
    assert kinds == ["session_error", "session_error", "incremental"]


def test_evicted_session_is_not_found(session):
    broker, topic, conn, sid, ends = session
    assert broker.front.evict(sid)
    assert conn.request(fetch_request(topic, sid, 1), 12).error_code == 70


def test_final_epoch_closes_the_session_and_answers_sessionless(session):
    broker, topic, conn, sid, ends = session
    closing = conn.request(fetch_request(topic, sid, -1, {0: 0}), 12)
    assert (closing.error_code, closing.session_id, set(answered(closing))) == (0, 0, {0})
    assert conn.request(fetch_request(topic, sid, 1), 12).error_code == 70
    # Epoch -1 without a session: a sessionless full fetch.
    plain = conn.request(fetch_request(topic, 0, -1, {0: 0, 2: 0}), 12)
    assert (plain.session_id, set(answered(plain))) == (0, {0, 2})


def test_a_full_fetch_naming_a_session_replaces_it(session):
    broker, topic, conn, sid, ends = session
    fresh = conn.request(fetch_request(topic, sid, 0, {2: 0}), 12)
    assert fresh.session_id not in (0, sid) and set(answered(fresh)) == {2}
    assert conn.request(fetch_request(topic, sid, 1), 12).error_code == 70


def test_topic_ids_from_v13_and_no_mixing_forms(fetch_sessions):
    broker = fetch_sessions
    topic = broker.new_topic(partitions=2)
    ends = log_ends(broker.produce(topic, 4))
    with RawConnection(broker.front.address) as conn:
        md = conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
        topic_id = md.topics[0].topic_id
        first = conn.request(fetch_request(topic_id, 0, 0, {0: 0, 1: 0}, by_id=True), 16)
        assert first.session_id != 0 and [t.topic_id for t in first.responses] == [topic_id]
        sid = first.session_id
        assert answered(conn.request(fetch_request(topic_id, sid, 1, ends, by_id=True), 16)) == {}
        broker.produce(topic, 1, partitions=[0], start_index=50)
        assert set(answered(conn.request(fetch_request(topic_id, sid, 2, by_id=True), 16))) == {0}
        assert broker.front.events()[-1].answered == ((topic, 0),)  # the id named back
        # A session made with topic ids cannot go on by name.
        assert conn.request(fetch_request(topic, sid, 3), 12).error_code == 106


def test_bounded_cache_evicts_the_least_recently_used(fetch_sessions):
    broker = fetch_sessions
    topic = broker.new_topic(partitions=1)
    upstream = broker.front.upstream
    # A second front on the same Tansu for raw requests (Metadata still names the first).
    with FetchSessionFront(upstream, max_sessions=2, eviction_ms=0) as lru, \
            RawConnection(lru.address) as conn:
        a, b, c = (conn.request(fetch_request(topic, 0, 0, {0: 0}), 12).session_id for _ in range(3))
        assert 0 not in (a, b, c)
        assert conn.request(fetch_request(topic, a, 1), 12).error_code == 70
        assert conn.request(fetch_request(topic, b, 1), 12).error_code == 0
        assert lru.cache.evicted == [a]
    # Kafka's default protects sessions younger than the eviction time: no slot then.
    with FetchSessionFront(upstream, max_sessions=1) as strict, RawConnection(strict.address) as conn:
        first = conn.request(fetch_request(topic, 0, 0, {0: 0}), 12).session_id
        refused = conn.request(fetch_request(topic, 0, 0, {0: 0}), 12)
        assert first != 0 and refused.session_id == 0 and strict.events()[-1].kind == "no_session_slot"
        assert conn.request(fetch_request(topic, first, 1), 12).error_code == 0
