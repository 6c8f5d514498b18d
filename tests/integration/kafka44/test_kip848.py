"""KIP-848 consumer groups on Kafka 4.4's group coordinator (one node).

- Broker-side regex: ``subscribe(pattern="...")`` (a string) goes out as
  ConsumerGroupHeartbeat v1's ``SubscribedTopicRegex`` with no topic names; Kafka resolves
  it, the member reads the matching topic, then a topic created later that matches is
  assigned and read, and a topic that does not match never is.
- Static membership: two members with ``group_instance_id``; one closes (a static leave,
  epoch -2, keeps its partitions for the session timeout) and a new consumer with the same
  instance id gets the same partitions back, resuming from the commit, while the other
  member's assignment never changed: no record read twice, none lost.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kproto import KafkaConsumer, TopicPartition
from kproto.tools.embedded import create_topic
from kproto.errors import ErrorCode
from tests.wire_log import WireLog

pytestmark = [pytest.mark.needs("kip848_regex"), pytest.mark.broker_kinds("apache_kafka")]
DEADLINE_S = 90


def member(broker, group: str, **extra) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                         group_protocol="consumer", auto_offset_reset="earliest",
                         enable_auto_commit=False, fetch_max_wait_ms=100, **extra)


def poll_until(consumers, until, seen: dict, timeout_s: float = DEADLINE_S) -> None:
    """Poll each consumer in turn until ``until()``; (topic, partition, offset) -> count."""
    deadline = time.monotonic() + timeout_s
    while not until():
        assert time.monotonic() < deadline, "not reached; seen {}".format(len(seen))
        for consumer in consumers:
            for tp, records in consumer.poll(timeout_ms=100).items():
                for r in records:
                    key = (tp.topic, tp.partition, r.offset)
                    seen[key] = seen.get(key, 0) + 1


def test_broker_side_regex_reads_a_topic_created_later(broker):
    stem = "kre-" + uuid.uuid4().hex[:10]
    first, later, other = stem + "-a", stem + "-b", "x" + stem + "-c"
    for topic in (first, other):
        create_topic(broker.bootstrap_servers, topic, 2, timeout_s=60)
    written = {first: broker.produce(first, 10, partitions=[0, 1]),
               other: broker.produce(other, 4, partitions=[0, 1])}
    seen: dict = {}
    with WireLog() as wire, member(broker, "g-" + uuid.uuid4().hex) as consumer:
        consumer.subscribe(pattern="^" + stem + "-.*")
        poll_until([consumer], lambda: len(seen) == len(written[first]), seen)
        create_topic(broker.bootstrap_servers, later, 2, timeout_s=60)
        written[later] = broker.produce(later, 6, partitions=[0, 1])
        # Kafka re-resolves the regex when topics change and assigns the new one.
        poll_until([consumer], lambda: len(seen) == len(written[first]) + len(written[later]), seen)
        assert {tp.topic for tp in consumer.assignment()} == {first, later}
        assert consumer.poll(timeout_ms=300) == {}
    assert set(seen) == {(w.topic, w.partition, w.offset) for t in (first, later) for w in written[t]}
    assert set(seen.values()) == {1}, {k: n for k, n in seen.items() if n > 1}
    heartbeats = [(req.version, req.tree) for req in wire.sent("ConsumerGroupHeartbeat")]
    assert heartbeats and {v for v, _ in heartbeats} == {1}
    # The first heartbeat names the regex and no topic; later ones only when it changes.
    assert heartbeats[0][1]["subscribed_topic_regex"] == "^" + stem + "-.*"
    assert heartbeats[0][1]["subscribed_topic_names"] in (None, [])
    # Before the first answer, Kafka may still be loading the group's offsets partition
    # (on a fresh broker the first group creates __consumer_offsets): the member looks for
    # the coordinator again; once answered, every heartbeat is.
    codes = [resp.tree["error_code"] for _, resp in wire.pairs("ConsumerGroupHeartbeat")]
    first_ok = codes.index(0)
    assert set(codes[:first_ok]) <= {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                     ErrorCode.COORDINATOR_NOT_AVAILABLE}, codes
    assert set(codes[first_ok:]) == {0}, codes


def test_static_member_rejoining_keeps_its_partitions(broker):
    topic = broker.new_topic(partitions=4)
    group = "g-" + uuid.uuid4().hex
    seen: dict = {}
    one = member(broker, group, group_instance_id="one")
    two = member(broker, group, group_instance_id="two")
    try:
        one.subscribe([topic])
        two.subscribe([topic])
        # Written once the partitions are shared (no commit before: a partition moving to
        # the second member earlier would be read again from the start).
        poll_until([one, two], lambda: len(one.assignment()) == 2 and len(two.assignment()) == 2, seen)
        written = broker.produce(topic, 40)
        poll_until([one, two], lambda: len(seen) == len(written), seen)
        owned_by_one, owned_by_two = one.assignment(), two.assignment()
        assert owned_by_one | owned_by_two == {TopicPartition(topic, p) for p in range(4)}
        one.commit()
        two.commit()
        one.close()
        more = broker.produce(topic, 20, start_index=100)
        again = member(broker, group, group_instance_id="one")
        try:
            again.subscribe([topic])
            poll_until([again, two], lambda: len(seen) == len(written) + len(more), seen)
            assert again.assignment() == owned_by_one
            assert two.assignment() == owned_by_two
            for consumer in (again, two):
                assert consumer.poll(timeout_ms=300) == {}
        finally:
            again.close()
    finally:
        one.close()
        two.close()
    assert set(seen) == {(w.topic, w.partition, w.offset) for w in written + more}
    assert set(seen.values()) == {1}, {k: n for k, n in seen.items() if n > 1}
