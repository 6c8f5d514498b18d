"""Incremental fetch sessions (KIP-227) with Kafka 4.4's own session cache, both engines.

- One partition idles while two get data: after the first (full) Fetch, kproto's requests
  are incremental (the session's id, epochs 1, 2, ...) and name no partition whose fetch
  state did not change, and Kafka's answers leave the idle partition out; one session
  throughout; every record read once.
- The session is removed from Kafka's cache behind the consumer's back (another client's
  Fetch closing it: session id with epoch -1, which Kafka honours from anyone): Kafka
  answers the consumer's next incremental Fetch ``FETCH_SESSION_ID_NOT_FOUND``, and the
  consumer, as Java's ``FetchSessionHandler``, starts a new session with a full request
  (session 0, epoch 0), and reads on exactly.
- close() right after the last record, both engines and kproto.aio (Java's ``AbstractFetch``
  and ``FetchCollector``):
  a poll that takes exactly ``max_poll_records`` and stops on the last fetched record
  leaves that fetch unconsumed, so no Fetch follows it and close() sends only the one
  closing the session (epoch -1); a poll that drains the fetch sends the next Fetch before
  it returns (a long poll Kafka holds), and close() still closes the session after it, as
  Java does (KAFKA-19884: Java's close() takes at least ``fetch.max.wait.ms``): both
  answered, the close with no error and no session.
- A broker of its own with ``max.incremental.fetch.session.cache.slots=8``: Kafka splits
  the cache into 8 shards of one slot, filled round-robin, and evicts a consumer's session
  only once it is 120 s old (``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``, not
  configurable: a test of eviction by age would take minutes, so none is here). Ten
  consumers ask for sessions; Kafka answers the requests it has no slot for with session
  id 0, and those consumers go on with full Fetches (never an incremental one on a session
  they were not given) and read every record.
"""

from __future__ import annotations

import threading

import pytest

from kproto import KafkaConsumer, TopicPartition
from kproto.errors import ErrorCode
from kproto.messages import FetchRequest
from tests.brokers import raw
from tests.support.reading import assert_same, consume
from tests.support.reading import read_while_one_partition_idles
from tests.wire_log import WireLog
from tests.threads import TestThread

ENGINES = pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
pytestmark = pytest.mark.needs("fetch_sessions")


def fetches(wire: WireLog, thread: int | None = None) -> list[tuple[dict, dict]]:
    return [(req.tree, resp.tree) for req, resp in wire.pairs("Fetch", thread)]


def partitions_named(tree: dict, key: str = "topics", field: str = "partition") -> set[int]:
    return {p[field] for t in tree[key] for p in t["partitions"]}


def answered(response: dict) -> set[int]:
    return partitions_named(response, "responses", "partition_index")


def consumer_for(broker, group_protocol: str, **extra) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                         fetch_max_wait_ms=100, group_protocol=group_protocol, **extra)


@ENGINES
@pytest.mark.broker_kinds("apache_kafka")
def test_incremental_requests_and_answers_leave_the_idle_partition_out(broker, group_protocol):
    topic = broker.new_topic(partitions=3)
    with WireLog() as wire, consumer_for(broker, group_protocol) as consumer:
        read_while_one_partition_idles(broker, consumer, topic)
    exchanged = fetches(wire)
    first_request, first_answer = exchanged[0]
    assert (first_request["session_id"], first_request["session_epoch"]) == (0, 0)
    assert partitions_named(first_request) == {0, 1, 2}
    session = first_answer["session_id"]
    assert session != 0 and first_answer["error_code"] == 0
    rest = exchanged[1:]
    # Epochs 1, 2, ... on the one session (the last request may close it at close()).
    closing = [req for req, _ in rest if req["session_epoch"] == -1]
    assert all(req is rest[-1][0] for req in closing)
    incremental = [(req, resp) for req, resp in rest if req["session_epoch"] != -1]
    assert [(req["session_id"], req["session_epoch"]) for req, _ in incremental] == [
        (session, n) for n in range(1, len(incremental) + 1)]
    assert all(resp["error_code"] == 0 and resp["session_id"] == session for _, resp in incremental)
    # Partition 2 is named again only when its fetch offset moved (after its records were
    # read): once caught up it stays in the session without being re-sent.
    offsets_sent = [p["fetch_offset"] for req, _ in incremental for t in req["topics"]
                    for p in t["partitions"] if p["partition"] == 2]
    # (30 records round-robin over 3 partitions first: 10 on partition 2.)
    assert offsets_sent == sorted(set(offsets_sent)) and offsets_sent[-1:] == [10], offsets_sent
    last_named = max(i for i, (req, _) in enumerate(incremental) if 2 in partitions_named(req))
    assert len(incremental) - last_named > 3, "no incremental Fetch left partition 2 out"
    # Kafka's incremental answers name only partitions with news; some name 0 or 1 only.
    omitting = [resp for _, resp in incremental if answered(resp) and 2 not in answered(resp)]
    assert omitting, [answered(resp) for _, resp in incremental]


@ENGINES
@pytest.mark.broker_kinds("apache_kafka")
def test_a_session_kafka_no_longer_has_is_started_again(broker, group_protocol):
    topic = broker.new_topic(partitions=3)
    closed: list[int] = []

    def close_the_session(n: int) -> None:
        if n != 1:
            return
        session = [resp for _, resp in fetches(wire) if resp["session_id"]][-1]["session_id"]
        leader = raw.partition_leader(broker.bootstrap_servers, topic, 0)
        answer = raw.roundtrip(leader, FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024, isolation_level=0,
            session_id=session, session_epoch=-1, topics=[], forgotten_topics_data=[],
            rack_id=""), 12)
        assert answer.error_code == 0 and answer.session_id == 0
        closed.append(session)

    with WireLog() as wire, consumer_for(broker, group_protocol) as consumer:
        read_while_one_partition_idles(broker, consumer, topic, between=close_the_session)
    exchanged = fetches(wire)
    errors = [i for i, (_, resp) in enumerate(exchanged) if resp["error_code"]]
    assert [exchanged[i][1]["error_code"] for i in errors] == [ErrorCode.FETCH_SESSION_ID_NOT_FOUND]
    (i,) = errors
    assert exchanged[i][0]["session_id"] == closed[0] and exchanged[i][0]["session_epoch"] > 0
    request, answer = exchanged[i + 1]
    assert (request["session_id"], request["session_epoch"]) == (0, 0)
    assert partitions_named(request) == {0, 1, 2}
    new_session = answer["session_id"]
    assert new_session not in (0, closed[0])
    after = [(req, resp) for req, resp in exchanged[i + 2:] if req["session_epoch"] != -1]
    assert after and all(req["session_id"] == new_session for req, _ in after)
    # The new session is incremental: later requests name only the partitions whose fetch
    # positions moved, never the idle one (which answers Kafka leaves it out of depends on
    # when records arrive: a loaded CI run saw none of them omit it).
    assert any(partitions_named(req) and 2 not in partitions_named(req) for req, _ in after)


@ENGINES
@pytest.mark.broker_kinds("apache_kafka")
@pytest.mark.parametrize("max_poll_records", [10, 11])
def test_close_right_after_the_last_record(broker, group_protocol, max_poll_records):
    topic = broker.new_topic(partitions=1)
    written = broker.produce_batch(topic, 10)  # one batch: the first Fetch answers all of it
    with WireLog() as wire:
        consumer = consumer_for(broker, group_protocol, max_poll_records=max_poll_records)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            records = consume(consumer, 10)
        finally:
            consumer.close()
    assert_same(records, written)
    exchanged = fetches(wire)
    epochs = [req["session_epoch"] for req, _ in exchanged]
    if max_poll_records == 10:
        # The last poll stopped on the last record: the fetch is still next in line, so
        # its node gets no other Fetch before close().
        assert epochs == [0, -1]
    else:
        # The last poll drained the fetch; the classic engine sends the next Fetch before
        # poll() returns, the KIP-848 background thread on its own time (maybe after close).
        assert epochs[0] == 0 and epochs[-1] == -1 and set(epochs[1:-1]) <= {1}
        if group_protocol == "classic":
            assert epochs == [0, 1, -1]
    session = exchanged[0][1]["session_id"]
    assert session != 0
    close_request, close_answer = exchanged[-1]
    assert close_request["session_id"] == session
    assert (close_answer["error_code"], close_answer["session_id"]) == (0, 0)
    assert all(resp["error_code"] == 0 for _, resp in exchanged)


@pytest.mark.broker_kinds("apache_kafka")
@pytest.mark.parametrize("max_records", [10, 11])
def test_close_right_after_the_last_record_aio(broker, max_records):
    """kproto.aio, whose loop fetches on its own time as the KIP-848 engine does."""
    from kproto.aio import AIOKafkaConsumer
    from tests.support.aio_harness import run

    topic = broker.new_topic(partitions=1)
    written = broker.produce_batch(topic, 10)

    async def read() -> list:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                    fetch_max_wait_ms=100)
        await consumer.start()
        records: list = []
        try:
            consumer.assign([TopicPartition(topic, 0)])
            while len(records) < 10:
                for batch in (await consumer.getmany(timeout_ms=200, max_records=max_records)).values():
                    records.extend(batch)
        finally:
            await consumer.stop()
        return records

    with WireLog() as wire:
        records = run(read)
    assert_same(records, written)
    exchanged = fetches(wire)
    epochs = [req["session_epoch"] for req, _ in exchanged]
    if max_records == 10:
        assert epochs == [0, -1]
    else:
        assert epochs[0] == 0 and epochs[-1] == -1 and set(epochs[1:-1]) <= {1}
    assert exchanged[-1][0]["session_id"] == exchanged[0][1]["session_id"] != 0
    assert (exchanged[-1][1]["error_code"], exchanged[-1][1]["session_id"]) == (0, 0)
    assert all(resp["error_code"] == 0 for _, resp in exchanged)


@pytest.fixture(scope="module")
def small_session_cache():
    """Kafka 4.4 of its own whose fetch-session cache holds 8 sessions (one per shard)."""
    from tests.brokers import maven
    from tests.brokers.maven_kafka import MavenKafka

    reason = maven.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    kafka = MavenKafka(extra_settings={"max.incremental.fetch.session.cache.slots": "8"})
    yield kafka
    kafka.close()


def test_consumers_kafka_has_no_session_slot_for_fetch_in_full(small_session_cache):
    broker = small_session_cache
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 20)
    consumers = ["classic", "consumer"] * 5
    all_read = threading.Barrier(len(consumers) + 1, timeout=120)
    tps = [TopicPartition(topic, p) for p in range(2)]

    def read(protocol: str, expected: int) -> list:
        # A thread per consumer: the wire trace tells their exchanges apart by thread.
        with consumer_for(broker, protocol) as consumer:
            consumer.assign(tps)
            got = consume(consumer, len(written), timeout_s=90)
            all_read.wait()  # the later records come while every consumer fetches
            return got + consume(consumer, expected - len(got), timeout_s=90)

    more_count = 6
    results: dict[int, list] = {}
    with WireLog() as wire:
        threads = [TestThread(target=lambda i=i, p=p: results.__setitem__(i, read(p, len(written) + more_count)))
                   for i, p in enumerate(consumers)]
        for thread in threads:
            thread.start()
        all_read.wait()
        more = broker.produce(topic, more_count, start_index=100)
        for thread in threads:
            thread.join(180)
    everything = sorted(written + more, key=lambda w: (w.partition, w.offset))
    assert sorted(results) == list(range(len(threads)))
    for records in results.values():
        assert_same(records, everything)
    exchanged = [(req.tree, resp.tree) for thread in {e.thread for e in wire.sent("Fetch")}
                 for req, resp in wire.pairs("Fetch", thread)]
    given = {resp["session_id"] for _, resp in exchanged} - {0}
    refused = [req for req, resp in exchanged if req["session_epoch"] == 0 and resp["session_id"] == 0]
    assert given and most_sessions_at_once(wire) <= 8
    assert refused, "Kafka found a slot for every session"
    assert all(resp["error_code"] == 0 for _, resp in exchanged)
    # Never an incremental request on a session Kafka did not give.
    assert all(req["session_id"] in given for req, _ in exchanged if req["session_epoch"] > 0)


def most_sessions_at_once(wire: WireLog) -> int:
    """The most sessions alive together, in the trace's (time) order: from the answer that
    gave one to the request that closed it (epoch -1, or 0 to start over)."""
    live: set[int] = set()
    closed: set[int] = set()  # an answer to a Fetch sent before the close may come after it
    most = 0
    for e in wire.entries():
        if e.api_name != "Fetch":
            continue
        tree = e.tree
        if e.direction == "<<" and tree["session_id"] and tree["session_id"] not in closed:
            live.add(tree["session_id"])
        elif e.direction == ">>" and tree["session_epoch"] in (-1, 0) and tree["session_id"]:
            live.discard(tree["session_id"])
            closed.add(tree["session_id"])
        most = max(most, len(live))
    return most
