"""KafkaConsumer over incremental fetch sessions (KIP-227), with assign(), both engines.

Runs on brokers that keep fetch sessions (``needs("fetch_sessions")``: Tansu behind
tests/brokers/fetch_sessions.py, or Apache Kafka). One partition goes idle while the
others get new data, so a broker keeping the session answers incremental Fetches that
leave the idle partition out; the consumer must still read every record exactly once
and keep its positions. Where the front is in use its record shows that such answers
were really sent (otherwise the test would prove nothing).
"""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer, TopicPartition
from tests.support.reading import assert_same, consume, read_while_one_partition_idles

pytestmark = pytest.mark.needs("fetch_sessions")
ENGINES = pytest.mark.parametrize("group_protocol", ["classic", "consumer"])  # assign() works on both


def topic_events(broker, topic: str) -> list:
    """The front's record of Fetches whose request or session concerned ``topic``, and
    those naming such a session (an error answer names no partition)."""
    events = broker.front.events()
    concern = [any(t == topic for t, _ in e.session_partitions + e.requested + e.forgotten) for e in events]
    sessions = {e.session_id for e, c in zip(events, concern) if c} - {0}
    return [e for e, c in zip(events, concern) if c or e.request_session_id in sessions]


def omitting_answers(events, topic: str) -> list:
    """Incremental answers that named some partitions of the session but left others out."""
    return [e for e in events if e.kind == "incremental" and e.answered
            and set(e.answered) < set(e.session_partitions) and (topic, 2) not in e.answered]


@ENGINES
def test_consumer_reads_exactly_through_incremental_answers(broker, group_protocol):
    topic = broker.new_topic(partitions=3)
    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                       fetch_max_wait_ms=100, group_protocol=group_protocol) as consumer:
        read_while_one_partition_idles(broker, consumer, topic)
    if broker.name != "tansu_sessions":
        return  # no record to read on other brokers: the exact read above is the check
    events = topic_events(broker, topic)
    others = [e for e in events if e.kind not in ("new_session", "incremental")]
    # Nothing else but, at close, the request ending the session (epoch -1, no partitions).
    assert [(e.kind, e.request_epoch, e.requested) for e in others] in ([], [("sessionless", -1, ())])
    assert len({e.session_id for e in events if e.kind == "new_session"}) == 1  # one session throughout
    assert omitting_answers(events, topic), [(e.kind, e.answered) for e in events]


@ENGINES
@pytest.mark.broker_kinds("tansu_sessions")  # a test can evict sessions on the front only
def test_consumer_recovers_from_an_evicted_session(broker, group_protocol):
    topic = broker.new_topic(partitions=3)

    def evict_session(n: int) -> None:
        if n != 1:
            return
        (session,) = {e.session_id for e in topic_events(broker, topic) if e.kind == "new_session"}
        assert broker.front.evict(session)
        # Until the consumer has its new session (nothing is produced meanwhile), so the
        # rounds left run on it: a Fetch in flight may still finish on the old one.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not [
                e for e in topic_events(broker, topic) if e.kind == "new_session" and e.session_id != session]:
            assert consumer.poll(timeout_ms=100) == {}

    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                       fetch_max_wait_ms=100, group_protocol=group_protocol) as consumer:
        read_while_one_partition_idles(broker, consumer, topic, between=evict_session)
    events = topic_events(broker, topic)
    errors = [e for e in events if e.kind == "session_error"]
    assert [e.error_code for e in errors] == [70]  # FETCH_SESSION_ID_NOT_FOUND, once
    after = events[events.index(errors[0]) + 1:]
    assert after[0].kind == "new_session" and after[0].request_epoch == 0
    assert omitting_answers(after, topic), [(e.kind, e.request_epoch, e.answered) for e in after]


@ENGINES
def test_consumer_without_incremental_sessions_fetches_sessionless(broker, group_protocol):
    topic = broker.new_topic(partitions=3)
    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                       fetch_max_wait_ms=100, group_protocol=group_protocol,
                       enable_incremental_fetch_sessions=False) as consumer:
        read_while_one_partition_idles(broker, consumer, topic, rounds=1)
    if broker.name == "tansu_sessions":
        events = topic_events(broker, topic)
        assert events and {(e.kind, e.request_session_id, e.request_epoch) for e in events} == {
            ("sessionless", 0, -1)}
