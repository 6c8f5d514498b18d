"""A share member joining a group whose partitions another member holds heartbeats at the
coordinator's interval, not once per answer (librdkafka's mock cluster, issue #24).

The first member (librdkafka) is given the partitions by a manual target assignment, which
also stops the mock's own assignor: the newcomer's join is answered with an epoch, the
interval and no assignment (null: the mock's member has none), and so is every later
heartbeat. kproto used to send the next heartbeat as soon as each such answer arrived
(about 14,000 in the window). The mock's request tracking
records the broker and the API of each request, not the client, so the test counts both
members' heartbeats and bounds the sum by what each may send in the window at the
interval: its paced heartbeats plus the immediate ones (a join, acknowledgements).
"""

from __future__ import annotations

import time

import pytest

from tests.integration.share.test_mock_cluster import DEADLINE_S, SHARE_GROUP_HEARTBEAT, new_group, share_consumer

INTERVAL_MS = 3000
WINDOW_S = 8.0


def paced(window_ms: float, interval_ms: int) -> int:
    """Heartbeats at the interval a member may send in a window (one more for the phase)."""
    return int(window_ms // interval_ms) + 1


def test_a_share_member_joining_while_another_holds_the_partitions_heartbeats_at_the_interval(
        mock_cluster_factory) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cluster = mock_cluster_factory()
    cluster.set_sharegroup(auto_offset_reset="earliest", heartbeat_interval_ms=INTERVAL_MS)
    topic = cluster.new_topic(partitions=2)
    group = new_group()
    theirs = confluent_kafka.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    ours = None
    try:
        theirs.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while not cluster.sharegroup_member_ids(group):
            assert time.monotonic() < deadline, "the librdkafka member never joined"
            theirs.poll(0.1)
        (first,) = cluster.sharegroup_member_ids(group)
        cluster.set_sharegroup_target_assignment(group, {first: [(topic, 0), (topic, 1)]})

        ours = share_consumer(cluster, group, topic)
        cluster.start_request_tracking()
        started = time.monotonic()
        while time.monotonic() - started < WINDOW_S:
            ours.poll(50)
            theirs.poll(0.05)
        heartbeats = [r for r in cluster.requests() if r.api_key == SHARE_GROUP_HEARTBEAT]
        window_ms = (time.monotonic() - started) * 1000
        cluster.stop_request_tracking()
        members = cluster.sharegroup_member_ids(group)
    finally:
        theirs.close()
        if ours is not None:
            ours.close()
    # Each member: its paced heartbeats plus its immediate ones (kproto's join; the
    # assignment does not change in the window, allow one acknowledgement each anyway).
    bound = (paced(window_ms, INTERVAL_MS) + 1 + 1) + (paced(window_ms, INTERVAL_MS) + 1)
    assert len(heartbeats) <= bound, (len(heartbeats), bound)
    assert len(members) == 2, members  # the newcomer did join (with nothing to fetch)
