"""The KIP-848 engine against real brokers that speak ConsumerGroupHeartbeat.

Runs on librdkafka's mock cluster (and Apache Kafka where Docker exists) through the public
``KafkaConsumer`` with ``group_protocol="consumer"``. Records are written by
confluent-kafka's producer. Loops wait for a condition with a generous deadline; nothing
asserts on durations.
"""

from __future__ import annotations

import re
import time

import pytest

from kproto.consumer.background.member_state import MemberState
from kproto.consumer.kafka_consumer import KafkaConsumer
from kproto.consumer.kip848.consumer_heartbeat_request_manager import (
    CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG,
    REGEX_RESOLUTION_NOT_SUPPORTED_MSG,
)
from kproto.errors import UnsupportedVersionError
from kproto.structs import TopicPartition as TP
from tests.support.topic_errors import consume_after_error
from tests.integration.kip848.harness import DEADLINE_S, drive, make_consumer, membership

pytestmark = [pytest.mark.broker]

THREE_MEMBER_RECORDS = 100_000


class Listener:
    def __init__(self, name: str, log: list) -> None:
        self.name = name
        self.log = log

    def on_partitions_revoked(self, partitions):
        self.log.append((self.name, "revoked", sorted(partitions)))

    def on_partitions_assigned(self, partitions):
        self.log.append((self.name, "assigned", sorted(partitions)))

    def on_partitions_lost(self, partitions):
        self.log.append((self.name, "lost", sorted(partitions)))


@pytest.mark.needs("kip848")
def test_consumes_every_record_commits_and_a_successor_resumes_there(broker) -> None:
    topic = broker.new_topic(partitions=3, prefix="k848")
    written = broker.produce(topic, 60)
    group = "g-" + topic
    consumer = make_consumer(broker, group)
    consumer.subscribe([topic])
    seen: dict = {}
    drive([consumer], lambda: len(seen) == len(written), seen)
    assert sorted(seen) == sorted((r.partition, r.offset) for r in written)
    # The records may come before the heartbeat acknowledging the assignment is answered.
    drive([consumer], lambda: membership(consumer).state is MemberState.STABLE, seen)
    consumer.commit()
    ends = {}
    for r in written:
        ends[r.partition] = max(ends.get(r.partition, -1), r.offset + 1)
    assert {tp.partition: consumer.committed(tp) for tp in consumer.assignment()} == ends
    consumer.close()

    more = broker.produce(topic, 6, start_index=60)
    successor = make_consumer(broker, group)
    successor.subscribe([topic])
    later: dict = {}
    drive([successor], lambda: len(later) >= len(more), later)
    assert sorted(later) == sorted((r.partition, r.offset) for r in more)
    successor.close()


@pytest.mark.needs("kip848")
def test_two_members_share_the_partitions_and_rebalance_in_order(broker) -> None:
    topic = broker.new_topic(partitions=4, prefix="k848")
    written = broker.produce(topic, 40)
    group = "g-" + topic
    log: list = []
    first = make_consumer(broker, group)
    first.subscribe([topic], listener=Listener("first", log))
    seen: dict = {}
    drive([first], lambda: len(first.assignment()) == 4, seen)

    second = make_consumer(broker, group)
    second.subscribe([topic], listener=Listener("second", log))

    def shared() -> bool:
        a, b = first.assignment(), second.assignment()
        return bool(a) and bool(b) and len(a | b) == 4 and membership(first).state is MemberState.STABLE \
            and membership(second).state is MemberState.STABLE

    drive([first, second], shared, seen)
    assert not first.assignment() & second.assignment()
    drive([first, second], lambda: len(seen) == len(written), seen)
    assert sorted(seen) == sorted((r.partition, r.offset) for r in written)
    # The first member gave partitions up through on_partitions_revoked before the second
    # was told about them.
    revoked = next(i for i, e in enumerate(log) if e[:2] == ("first", "revoked"))
    given = [i for i, e in enumerate(log) if e[:2] == ("second", "assigned") and e[2]]
    assert given and given[-1] > revoked
    assert set(log[revoked][2]) == set(second.assignment())
    second.close()
    first.close()


@pytest.mark.needs("kip848", "fault_injection")
def test_target_assignment_is_reconciled_in_the_seed_order(broker) -> None:
    topic = broker.new_topic(partitions=3, prefix="k848")
    broker.produce(topic, 9)
    group = "g-" + topic
    log: list = []
    consumer = make_consumer(broker, group)
    consumer.subscribe([topic], listener=Listener("c", log))
    seen: dict = {}
    drive([consumer], lambda: len(consumer.assignment()) == 3, seen)
    log.clear()
    broker.set_target_assignment(group, {membership(consumer).member_id: [(topic, 1)]})
    drive([consumer], lambda: consumer.assignment() == {TP(topic, 1)}
          and membership(consumer).state is MemberState.STABLE, seen)
    assert log == [("c", "revoked", [TP(topic, 0), TP(topic, 2)]), ("c", "assigned", [])]
    consumer.close()


@pytest.mark.needs("kip848", "fault_injection")
@pytest.mark.parametrize("error_code", [110, 25], ids=["FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"])
def test_fenced_member_loses_its_partitions_rejoins_and_loses_no_record(broker, error_code) -> None:
    topic = broker.new_topic(partitions=2, prefix="k848")
    written = broker.produce(topic, 20)
    group = "g-" + topic
    log: list = []
    consumer = make_consumer(broker, group)
    consumer.subscribe([topic], listener=Listener("c", log))
    seen: dict = {}
    drive([consumer], lambda: len(seen) == 20, seen)
    broker.set_group_consumer_heartbeat_interval(100)
    broker.push_request_errors(68, [error_code])  # on the next heartbeat
    more = broker.produce(topic, 10, start_index=20)
    drive([consumer], lambda: any(e[1] == "lost" for e in log) and len(seen) == 30
          and membership(consumer).state is MemberState.STABLE, seen)
    assert ("c", "lost", [TP(topic, 0), TP(topic, 1)]) in log
    assert membership(consumer).member_epoch > 0  # a member again, after rejoining with epoch 0
    assert sorted(seen) == sorted((r.partition, r.offset) for r in written + more)
    consumer.close()


@pytest.mark.needs("kip848", "fault_injection")
def test_expired_poll_timer_leaves_and_the_next_poll_rejoins(broker) -> None:
    topic = broker.new_topic(partitions=1, prefix="k848")
    broker.produce(topic, 5)
    broker.set_group_consumer_heartbeat_interval(100)
    group = "g-" + topic
    log: list = []
    consumer = make_consumer(broker, group, max_poll_interval_ms=1500)
    consumer.subscribe([topic], listener=Listener("c", log))
    seen: dict = {}
    drive([consumer], lambda: len(seen) == 5, seen)
    deadline = time.monotonic() + DEADLINE_S
    while membership(consumer).state is not MemberState.STALE:  # the application stopped polling
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert membership(consumer).member_epoch == -1
    log.clear()
    more = broker.produce(topic, 3, start_index=5)
    drive([consumer], lambda: len(seen) == 8 and membership(consumer).state is MemberState.STABLE, seen)
    assert log[0] == ("c", "lost", [TP(topic, 0)])
    assert ("c", "assigned", [TP(topic, 0)]) in log
    assert {(r.partition, r.offset) for r in more} <= set(seen)
    consumer.close()


@pytest.mark.needs("kip848", "kip848_regex")
def test_broker_evaluated_regex_subscription(broker) -> None:
    prefix = "rx{}".format(time.monotonic_ns() % 10**9)
    topic = broker.new_topic(partitions=2, prefix=prefix)
    written = broker.produce(topic, 12)
    consumer = make_consumer(broker, "g-" + topic)
    consumer.subscribe(pattern=prefix + ".*")
    seen: dict = {}
    drive([consumer], lambda: len(seen) == len(written), seen)
    assert consumer.assignment() == {TP(topic, 0), TP(topic, 1)}
    consumer.close()


@pytest.mark.needs("kip848")
def test_compiled_pattern_is_matched_by_the_client(broker) -> None:
    prefix = "cx{}".format(time.monotonic_ns() % 10**9)
    topic = broker.new_topic(partitions=2, prefix=prefix)
    written = broker.produce(topic, 8)
    consumer = make_consumer(broker, "g-" + topic)
    # The consumer's metadata must already list the topic when it subscribes: a compiled
    # pattern that matches nothing yet makes the joining heartbeat carry an empty
    # SubscribedTopicNames and an empty regex, and librdkafka's mock coordinator abort()s
    # on that (rdkafka_mock_cgrp.c validate_subscription assertion), killing the whole
    # pytest process. Whether the first heartbeat beat the metadata was a race.
    assert topic in consumer.topics()
    consumer.subscribe(pattern=re.compile(re.escape(prefix) + ".*"))
    seen: dict = {}
    drive([consumer], lambda: len(seen) == len(written), seen)
    assert consumer.subscription() == {topic}
    assert consumer.assignment() == {TP(topic, 0), TP(topic, 1)}
    consumer.close()


@pytest.mark.needs("kip848")
def test_compiled_pattern_subscribed_before_any_metadata_joins_with_the_matches(broker) -> None:
    """A fresh consumer has no metadata when it subscribes: it joins only once the pattern
    has been matched against an update, so the first heartbeat names the topics (an empty
    first heartbeat makes librdkafka's mock abort the process, and some brokers refuse it)."""
    prefix = "cy{}".format(time.monotonic_ns() % 10**9)
    topic = broker.new_topic(partitions=2, prefix=prefix)
    written = broker.produce(topic, 8)
    consumer = make_consumer(broker, "g-" + topic)
    consumer.subscribe(pattern=re.compile(re.escape(prefix) + ".*"))
    seen: dict = {}
    drive([consumer], lambda: len(seen) == len(written), seen)
    assert consumer.assignment() == {TP(topic, 0), TP(topic, 1)}
    consumer.close()


@pytest.mark.needs("kip848", "kip848_regex")
def test_mixed_group_with_a_librdkafka_member(broker) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = broker.new_topic(partitions=4, prefix="k848")
    broker.produce(topic, 8)
    group = "g-" + topic
    ours = make_consumer(broker, group)
    ours.subscribe([topic])
    seen: dict = {}
    drive([ours], lambda: len(ours.assignment()) == 4, seen)
    theirs = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        theirs.subscribe([topic])
        state = {}

        def split() -> bool:
            theirs.poll(0.05)
            state["theirs"] = {TP(topic, p.partition) for p in theirs.assignment()}
            return bool(state["theirs"]) and not (state["theirs"] & ours.assignment()) \
                and len(state["theirs"] | ours.assignment()) == 4

        drive([ours], split, seen)
        # The split may show before the heartbeat acknowledging it is answered.
        drive([ours], lambda: membership(ours).state is MemberState.STABLE, seen)
    finally:
        theirs.close()
    ours.close()


@pytest.mark.needs("kip848", "fault_injection")
def test_three_members_join_and_leave_with_manual_commits_and_process_everything(broker) -> None:
    broker.set_group_consumer_heartbeat_interval(100)
    # 100k records of ~100-200 B over 8 partitions: ~1.5 MiB a partition, under the mock's
    # ~5 MiB retention. Larger producer batches keep the number of Fetch round trips modest
    # (the mock returns one batch per partition per Fetch).
    topic = broker.new_topic(partitions=8, prefix="k848")
    written = broker.produce(topic, THREE_MEMBER_RECORDS,
                             producer_config={"batch.num.messages": 500, "linger.ms": 20})
    group = "g-" + topic
    processed: set = set()
    owned_at_epoch: list = []  # (member, epoch, partitions) seen after every poll
    members: list = []

    def step(consumer: KafkaConsumer) -> None:
        records = consumer.poll(timeout_ms=50, max_records=1000)
        for tp, batch in records.items():
            processed.update((tp.partition, r.offset) for r in batch)
        if records:
            consumer.commit()  # at-least-once: commit after processing
        m = membership(consumer)
        if m.state is MemberState.STABLE:
            owned_at_epoch.append((m.member_id, m.member_epoch, frozenset(consumer.assignment())))

    def run(until, timeout_s: float = DEADLINE_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not until():
            assert time.monotonic() < deadline, "stuck with {} of {} processed".format(len(processed), len(written))
            for consumer in list(members):
                step(consumer)

    for _ in range(3):
        consumer = make_consumer(broker, group)
        consumer.subscribe([topic])
        members.append(consumer)
        target = len(processed) + len(written) // 10
        run(lambda: len(processed) >= min(target, len(written)))
    leaving = members.pop(0)
    leaving.close()  # its partitions move to the others, from its committed offsets
    target = len(processed) + len(written) // 10
    run(lambda: len(processed) >= target)
    newcomer = make_consumer(broker, group)  # a fresh member joins the running group
    newcomer.subscribe([topic])
    members.append(newcomer)

    def done() -> bool:  # everything processed, and every member settled with partitions
        if len(processed) != len(written):
            return False
        settled = [(membership(c), c.assignment()) for c in members]
        if not all(m.state is MemberState.STABLE and parts for m, parts in settled):
            return False
        # Recorded here too: the background thread may have settled a member (the
        # newcomer) after its last step, and that state counts as what it owned.
        owned_at_epoch.extend((m.member_id, m.member_epoch, frozenset(parts)) for m, parts in settled)
        return True

    run(done)
    assert processed == {(r.partition, r.offset) for r in written}
    assert len({member for member, _, parts in owned_at_epoch if parts}) == 4  # all four took part
    for i, (member_a, epoch_a, parts_a) in enumerate(owned_at_epoch):
        for member_b, epoch_b, parts_b in owned_at_epoch[i + 1:]:
            if member_a != member_b and epoch_a == epoch_b:
                assert not parts_a & parts_b, (epoch_a, parts_a & parts_b)
    for consumer in members:
        consumer.close()


@pytest.mark.needs("kip848")
def test_static_member_leaves_with_epoch_minus_two(broker) -> None:
    topic = broker.new_topic(partitions=2, prefix="k848")
    written = broker.produce(topic, 10)
    consumer = make_consumer(broker, "g-" + topic, group_instance_id="instance-1")
    consumer.subscribe([topic])
    seen: dict = {}
    drive([consumer], lambda: len(seen) == len(written), seen)
    member = membership(consumer)
    assert member.member_epoch > 0
    consumer.close()
    assert member.member_epoch == -2 and member.state is MemberState.UNSUBSCRIBED


@pytest.mark.needs("kip848", "classic_groups")
def test_both_engines_return_the_same_records(broker) -> None:
    topic = broker.new_topic(partitions=3, prefix="k848")
    written = broker.produce(topic, 45)
    results = {}
    for protocol in ("classic", "consumer"):
        consumer = make_consumer(broker, "g-{}-{}".format(protocol, topic), group_protocol=protocol)
        consumer.subscribe([topic])
        got: dict = {}
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < len(written):
            assert time.monotonic() < deadline, "{}: {} of {}".format(protocol, len(got), len(written))
            for tp, records in consumer.poll(timeout_ms=200).items():
                for r in records:
                    got[(tp.partition, r.offset)] = (r.key, r.value, tuple(r.headers), r.timestamp)
        consumer.close()
        results[protocol] = got
    assert results["classic"] == results["consumer"]
    assert set(results["consumer"]) == {(r.partition, r.offset) for r in written}


@pytest.mark.needs("kip848", "fault_injection")
def test_coordinator_broker_down_and_up_consumption_resumes(broker) -> None:
    broker.set_group_consumer_heartbeat_interval(200)
    topic = broker.new_topic(partitions=3, prefix="k848")
    first = broker.produce(topic, 15)
    consumer = make_consumer(broker, "g-" + topic)
    consumer.subscribe([topic])
    seen: dict = {}
    drive([consumer], lambda: len(seen) == len(first), seen)
    coordinator = consumer._delegate.network_thread.resources.request_managers[0].coordinator
    broker.broker_down(coordinator.broker_id)
    # Heartbeats fail while it is down (disconnects mark the coordinator unknown).
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        consumer.poll(timeout_ms=100)
    broker.broker_up(coordinator.broker_id)
    more = broker.produce(topic, 15, start_index=15)
    drive([consumer], lambda: len(seen) == len(first) + len(more)
          and membership(consumer).state is MemberState.STABLE, seen)
    assert set(seen) == {(r.partition, r.offset) for r in first + more}
    consumer.close()


@pytest.mark.needs("kip848", "fault_injection")
@pytest.mark.parametrize("validation", ["supported", "unsupported"])
def test_leader_change_validates_positions_and_consumption_continues(broker, validation) -> None:
    if validation == "unsupported":
        broker.set_apiversion(23, -1, -1)  # no OffsetForLeaderEpoch: positions are trusted
    topic = broker.new_topic(partitions=2, prefix="k848")
    first = broker.produce(topic, 10)
    consumer = make_consumer(broker, "g-" + topic, metadata_max_age_ms=500)
    consumer.subscribe([topic])
    seen: dict = {}
    drive([consumer], lambda: len(seen) == len(first), seen)
    tp0 = TP(topic, 0)
    cluster = consumer._delegate.client.cluster
    leader = cluster.leader_for_partition(tp0)
    epoch = cluster.leader_epoch_for_partition(tp0)
    broker.start_request_tracking()
    broker.set_partition_leader(topic, 0, leader % broker.broker_count + 1)  # bumps the leader epoch
    more = broker.produce(topic, 10, start_index=10)
    drive([consumer], lambda: len(seen) == len(first) + len(more), seen)
    requests = broker.requests()
    broker.stop_request_tracking()
    assert cluster.leader_epoch_for_partition(tp0) > epoch
    # The new leader epoch sent the position through validation (OffsetForLeaderEpoch, 23),
    # unless the brokers lack the API.
    assert any(r.api_key == 23 for r in requests) is (validation == "supported"), \
        sorted({r.api_key for r in requests})
    assert set(seen) == {(r.partition, r.offset) for r in first + more}
    assert all(len(consumers) == 1 for consumers in seen.values())  # nothing read twice
    consumer.close()


@pytest.mark.needs("kip848")
def test_remote_assignor_rack_and_instance_id_are_accepted_and_consume(broker) -> None:
    topic = broker.new_topic(partitions=2, prefix="k848")
    written = broker.produce(topic, 8)
    consumer = make_consumer(broker, "g-" + topic, group_remote_assignor="uniform", client_rack="rack-a",
                             group_instance_id="static-" + topic)
    consumer.subscribe([topic])
    seen: dict = {}
    drive([consumer], lambda: len(seen) == len(written), seen)
    heartbeat = next(m for m in consumer._delegate.network_thread.resources.request_managers
                     if type(m).__name__ == "ConsumerHeartbeatRequestManager")
    sent = heartbeat.heartbeat_state.sent_fields  # what the last full heartbeat carried
    assert (sent.server_assignor, sent.rack_id) == ("uniform", "rack-a")
    assert membership(consumer).group_instance_id == "static-" + topic
    consumer.close()


@pytest.mark.needs("kip848", "fault_injection")
def test_a_non_empty_poll_prefetches_the_next_batch(broker) -> None:
    topic = broker.new_topic(partitions=1, prefix="k848")
    broker.produce(topic, 10)
    broker.produce(topic, 10, start_index=10)  # a second batch for the prefetch to ask for
    consumer = make_consumer(broker, "g-" + topic)
    try:
        consumer.assign([TP(topic, 0)])
        broker.start_request_tracking()

        def fetches() -> int:
            return sum(1 for r in broker.requests() if r.api_key == 1)

        deadline = time.monotonic() + DEADLINE_S
        while not consumer.poll(timeout_ms=100):
            assert time.monotonic() < deadline
        sent = fetches()
        buffer = consumer._delegate.fetch_buffer
        # No further call: the background thread asks for the next batch on its own. The
        # prefetch may already have reached the broker before ``sent`` was counted (a slow
        # application thread): then its answer, the second batch, fills the buffer the
        # poll emptied, which only a Fetch sent after the records were collected can do.
        while fetches() == sent and buffer.is_empty():
            assert time.monotonic() < deadline, "no Fetch after poll() returned"
            time.sleep(0.02)
        broker.stop_request_tracking()
    finally:
        consumer.close()


@pytest.mark.needs("kip848", "fault_injection")
def test_unauthorized_topic_in_metadata_is_raised_from_poll_then_consumption_resumes(broker) -> None:
    topic = broker.new_topic(partitions=2, prefix="k848")
    written = broker.produce(topic, 10)
    broker.set_topic_error(topic, 29)  # TOPIC_AUTHORIZATION_FAILED in Metadata responses
    consumer = make_consumer(broker, "g-" + topic, metadata_max_age_ms=500)
    consumer.subscribe([topic])
    consume_after_error(consumer, broker, topic, written)
    consumer.close()


def _first_poll_error(consumer: KafkaConsumer) -> BaseException:
    """Poll until poll() raises (the member failed fatally); the error it raised."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            consumer.poll(timeout_ms=100)
        except Exception as exc:  # what the application sees
            return exc
    raise AssertionError("poll() never raised")


@pytest.mark.needs("kip848", "fault_injection")
@pytest.mark.parametrize("max_version,expected,not_expected", [
    (0, REGEX_RESOLUTION_NOT_SUPPORTED_MSG, CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG),
    (-1, CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG, REGEX_RESOLUTION_NOT_SUPPORTED_MSG)],
    ids=["heartbeat_v0_only", "no_heartbeat_api"])
def test_regex_string_on_a_coordinator_without_heartbeat_v1_says_why(broker, max_version, expected,
                                                                      not_expected) -> None:
    """Kafka 3.x speaks ConsumerGroupHeartbeat v0, which has no SubscribedTopicRegex: the
    error names the regex (KIP-848 works there), not "use the classic protocol"; that
    advice is for a coordinator without the API at all.

    (A topic-list member on a v0 coordinator is not tested here: librdkafka 2.16's mock
    reads SubscribedTopicRegex from v0 heartbeats too, so it cannot parse a valid v0 one.)"""
    broker.set_apiversion(68, min(max_version, 0), max_version)  # -1, -1 removes the API
    prefix = "rv{}".format(time.monotonic_ns() % 10**9)
    broker.new_topic(partitions=1, prefix=prefix)
    consumer = make_consumer(broker, "g-" + prefix)
    consumer.subscribe(pattern=prefix + ".*")
    error = _first_poll_error(consumer)
    assert isinstance(error, UnsupportedVersionError), repr(error)
    assert expected in str(error) and not_expected not in str(error)
    consumer.close()
