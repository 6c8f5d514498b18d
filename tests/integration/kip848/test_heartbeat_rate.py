"""A KIP-848 member joining a group whose partitions another member still owns heartbeats at
the coordinator's interval, not once per answer (librdkafka's mock cluster, issue #24).

The mock answers the newcomer's join with an epoch, the interval and no assignment while the
first member (librdkafka) still owns every partition. kproto used to send the next heartbeat
as soon as each such answer arrived: about 7,400 in the window.

The mock's request tracking records the broker and the API of each request, not the client,
so the test counts both members' heartbeats and bounds the sum by what each may send in
the window at the interval: its paced heartbeats plus the immediate ones (a join,
acknowledgements of new assignments).
"""

from __future__ import annotations

import time

import pytest

from kproto.structs import TopicPartition as TP
from tests.integration.kip848.harness import DEADLINE_S, make_consumer

pytestmark = pytest.mark.needs("kip848", "fault_injection")

CONSUMER_GROUP_HEARTBEAT = 68
INTERVAL_MS = 3000
WINDOW_S = 8.0


def paced(window_ms: float, interval_ms: int) -> int:
    """Heartbeats at the interval a member may send in a window (one more for the phase)."""
    return int(window_ms // interval_ms) + 1


def test_a_member_joining_while_another_owns_the_partitions_heartbeats_at_the_interval(broker) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker.set_group_consumer_heartbeat_interval(INTERVAL_MS)
    topic = broker.new_topic(partitions=4, prefix="hb")
    group = "g-" + topic
    theirs = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    ours = None
    try:
        theirs.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while len(theirs.assignment()) < 4:
            assert time.monotonic() < deadline, "the librdkafka member never got the partitions"
            theirs.poll(0.1)

        ours = make_consumer(broker, group)
        broker.start_request_tracking()
        started = time.monotonic()
        ours.subscribe([topic])
        while time.monotonic() - started < WINDOW_S:
            ours.poll(timeout_ms=50)
            theirs.poll(0.05)
        heartbeats = [r for r in broker.requests() if r.api_key == CONSUMER_GROUP_HEARTBEAT]
        window_ms = (time.monotonic() - started) * 1000
        broker.stop_request_tracking()
        # ... and the newcomer does join: the group's partitions end up split between the
        # two. The handover takes up to two intervals (librdkafka learns of the revocation
        # at its next heartbeat, kproto of its partitions at its own next one), which a
        # loaded machine can stretch past the window: wait for it, the count is the window's.
        deadline = time.monotonic() + DEADLINE_S
        while True:
            ours_owned = ours.assignment()
            theirs_owned = {TP(topic, p.partition) for p in theirs.assignment()}
            if ours_owned and not (ours_owned & theirs_owned):
                break
            assert time.monotonic() < deadline, (ours_owned, theirs_owned)
            ours.poll(timeout_ms=50)
            theirs.poll(0.05)
    finally:
        theirs.close()
        if ours is not None:
            ours.close()
    # Each member: its paced heartbeats, plus immediate ones: the join (kproto's; librdkafka
    # joined before the window) and an acknowledgement per assignment change (kproto gains
    # partitions in at most two steps, librdkafka loses them in at most two).
    bound = (paced(window_ms, INTERVAL_MS) + 1 + 2) + (paced(window_ms, INTERVAL_MS) + 2)
    assert len(heartbeats) <= bound, (len(heartbeats), bound)
