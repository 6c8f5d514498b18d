"""JoinGroup retries of the classic engine are paced (librdkafka's mock cluster, fresh
cluster per test): errors answered to a JoinGroup that Java retries without a backoff
(UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION) still never make the
member send two JoinGroups less than ``retry_backoff_ms`` apart. Only the join right after
MEMBER_ID_REQUIRED (KIP-394: the coordinator handed out the member id to join with) goes
at once. Without the floor, a coordinator answering one of them to every join got one
JoinGroup per round trip.
"""

from __future__ import annotations

import time

import pytest

from kproto import KafkaConsumer

pytestmark = pytest.mark.needs("fault_injection")

JOIN_GROUP = 11
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION = 25, 27, 22
RETRY_BACKOFF_MS = 200
FAILED_JOINS = 6


@pytest.mark.parametrize("code", [UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION])
def test_join_group_errors_retried_without_backoff_in_java_are_paced(broker, code) -> None:
    broker.group_initial_rebalance_delay(50)
    topic = broker.new_topic(partitions=2)
    broker.push_request_errors(JOIN_GROUP, [code] * FAILED_JOINS)
    broker.start_request_tracking()
    with KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                       retry_backoff_ms=RETRY_BACKOFF_MS) as consumer:
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the member never joined"
            consumer.poll(timeout_ms=100)
        joins = [r.timestamp_us for r in broker.requests() if r.api_key == JOIN_GROUP]
    broker.stop_request_tracking()
    assert len(joins) >= FAILED_JOINS + 1, joins
    gaps_ms = sorted((b - a) / 1000 for a, b in zip(joins, joins[1:]))
    # One immediate join at most (after MEMBER_ID_REQUIRED, when the mock asks for it);
    # every other gap is the floor (the mock's arrival times: a few ms of loopback jitter).
    assert all(gap >= RETRY_BACKOFF_MS * 0.8 for gap in gaps_ms[1:]), gaps_ms
