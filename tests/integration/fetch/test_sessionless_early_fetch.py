"""Fetching while buffered data is read, on brokers that keep no fetch session.

Java's ``AbstractFetch`` sends nothing to a node while it leads a partition with buffered
data: an incremental request leaving those partitions out would drop them from the
broker's session. kproto keeps that rule where the broker keeps a session (Kafka 4.4,
Tansu behind the session front) and departs from it where the broker answered without one
(session id 0: Tansu, librdkafka's mock): there the node's other partitions are fetched
while the buffered data is read, if one of them is known to be behind its high watermark.

The consumer's fetch sizes and poll size are kept small against the seeded data, so data
stays buffered while other partitions have more to fetch (read from the answers, never
assumed). The Fetches kproto sends
and what was buffered when each was built are recorded at ``AbstractFetch``; the sessions a
broker kept are read from its answers. Every record is read exactly once, in order.
"""

from __future__ import annotations

import threading

import pytest

from kproto import KafkaConsumer, TopicPartition
from kproto.consumer.fetch.abstract_fetch import AbstractFetch
from tests.support.reading import assert_same, consume

PARTITIONS = 6
RECORDS = 600  # ~15 KB per partition, 90 KB in all: several answers of at most 32 KB


class FetchLog:
    """What each prepared Fetch named and what its node had buffered then; each answer's
    session id and the partitions it carried data for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, topic: str) -> None:
        self.topic = topic
        self.lock = threading.Lock()
        self.sent: list[tuple[set[int], set[int]]] = []  # (named, buffered partitions of that node)
        self.answers: list[tuple[int, set[int]]] = []  # (session id, partitions with data)
        prepare, handle = AbstractFetch.prepare_fetch_requests, AbstractFetch.handle_fetch_success
        log = self

        def prepare_fetch_requests(fetch, now_ms=None):
            buffered = [tp for tp in fetch.fetch_buffer.buffered_partitions() if tp.topic == topic]
            requests = prepare(fetch, now_ms)
            with log.lock:
                for node, data in requests.items():
                    named = {tp.partition for tp in data.to_send if tp.topic == topic}
                    if named:
                        # The buffered partitions this node leads.
                        log.sent.append((named, {tp.partition for tp in buffered
                                                 if fetch.metadata.leader_for_partition(tp) == node}))
            return requests

        def handle_fetch_success(fetch, node_id, data, response, version):
            named = {tp.partition for tp in data.session_partitions if tp.topic == topic}
            with_data = {part.partition_index for answer in response.responses for part in answer.partitions
                         if part.partition_index in named and part.records}
            if named:
                with log.lock:
                    log.answers.append((response.session_id, with_data))
            return handle(fetch, node_id, data, response, version)

        monkeypatch.setattr(AbstractFetch, "prepare_fetch_requests", prepare_fetch_requests)
        monkeypatch.setattr(AbstractFetch, "handle_fetch_success", handle_fetch_success)


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
@pytest.mark.broker_kinds("mock", "tansu", "apache_kafka", "tansu_sessions")
def test_fetches_while_buffered_data_is_read_only_without_a_session(broker, group_protocol, monkeypatch):
    topic = broker.new_topic(partitions=PARTITIONS)
    written = broker.produce(topic, RECORDS)
    log = FetchLog(monkeypatch, topic)
    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_protocol=group_protocol,
                       auto_offset_reset="earliest", fetch_max_wait_ms=100, fetch_max_bytes=32 * 1024,
                       max_partition_fetch_bytes=16 * 1024, max_poll_records=20) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        records = consume(consumer, RECORDS)
    assert_same(records, written)
    with log.lock:
        sent, answers = list(log.sent), list(log.answers)
    # Some answer carried data for part of the partitions only: buffered data and other
    # partitions to fetch met (otherwise neither outcome below would show anything).
    assert any(0 < len(with_data) < PARTITIONS for _, with_data in answers), answers
    # A partition is never named while its own data is buffered, whatever the broker.
    assert all(not named & buffered for named, buffered in sent)
    beside_buffered = [(named, buffered) for named, buffered in sent if buffered]
    if all(session_id == 0 for session_id, _ in answers):
        # No session: partitions were fetched from a node while its other data was read.
        assert beside_buffered, sent
    else:
        # A session: Java's rule, nothing to a node while it leads buffered data.
        assert broker.name in ("apache_kafka", "tansu_sessions")
        assert not beside_buffered, beside_buffered
