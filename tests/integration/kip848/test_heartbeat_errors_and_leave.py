"""KIP-848 Java-parity review: divergences the librdkafka mock cluster can show.

Each test failed against the code before its fix (see the commit that added it).
"""

from __future__ import annotations

import time

import pytest

from kproto.consumer.background.member_state import MemberState
from kproto.errors import TopicAuthorizationFailedError
from kproto.structs import TopicPartition as TP
from tests.integration.kip848.harness import drive, make_consumer, membership

pytestmark = [pytest.mark.broker]

DEADLINE_S = 30
TOPIC_AUTHORIZATION_FAILED = 29
CONSUMER_GROUP_HEARTBEAT = 68


@pytest.mark.needs("kip848", "fault_injection")
def test_heartbeats_go_on_after_a_topic_authorization_error(broker) -> None:
    """Java: TOPIC_AUTHORIZATION_FAILED is surfaced, the member stays and heartbeats again
    after the backoff (onFailedAttempt). kproto left the answered heartbeat 'in flight', so no
    heartbeat was ever sent again and a new target assignment was never seen."""
    topic = broker.new_topic(partitions=2, prefix="k848r")
    broker.produce(topic, 4)
    broker.set_group_consumer_heartbeat_interval(100)
    group = "g-" + topic
    consumer = make_consumer(broker, group)
    try:
        consumer.subscribe([topic])
        seen: dict = {}
        drive([consumer], lambda: len(seen) == 4 and membership(consumer).state is MemberState.STABLE, seen)
        broker.push_request_errors(CONSUMER_GROUP_HEARTBEAT, [TOPIC_AUTHORIZATION_FAILED])
        deadline = time.monotonic() + DEADLINE_S
        with pytest.raises(TopicAuthorizationFailedError):
            while True:
                assert time.monotonic() < deadline, "the heartbeat's error was never raised"
                consumer.poll(timeout_ms=100)
        assert membership(consumer).state is MemberState.STABLE
        broker.set_target_assignment(group, {membership(consumer).member_id: [(topic, 1)]})
        drive([consumer], lambda: consumer.assignment() == {TP(topic, 1)}
              and membership(consumer).state is MemberState.STABLE, seen, timeout_s=DEADLINE_S)
    finally:
        consumer.close()


class _Listener:
    def on_partitions_revoked(self, partitions):
        pass

    def on_partitions_assigned(self, partitions):
        pass


@pytest.mark.needs("kip848", "fault_injection")
def test_close_without_time_for_the_callbacks_still_sends_the_leave(broker) -> None:
    """Java: close sends the leave heartbeat even when no time is left (pollOnClose sends it
    for a member still leaving, and the close loop polls the network at least once). kproto
    sent nothing when close's deadline had passed, so the partitions stayed with the closed
    member until its session timed out."""
    topic = broker.new_topic(partitions=2, prefix="k848r")
    broker.produce(topic, 4)
    broker.set_group_consumer_heartbeat_interval(100)
    broker.set_group_consumer_session_timeout(600_000)  # far beyond this test's deadline
    group = "g-" + topic
    leaving = make_consumer(broker, group)
    staying = make_consumer(broker, group)
    try:
        leaving.subscribe([topic], listener=_Listener())
        staying.subscribe([topic])
        seen: dict = {}
        drive([leaving, staying], lambda: len(leaving.assignment()) == 1 and len(staying.assignment()) == 1
              and membership(leaving).state is MemberState.STABLE, seen)
        leaving.close(timeout_ms=0)
        drive([staying], lambda: staying.assignment() == {TP(topic, 0), TP(topic, 1)}, seen, timeout_s=DEADLINE_S)
    finally:
        leaving.close()
        staying.close()
