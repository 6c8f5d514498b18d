"""ConsumerProtocol bytes against a real librdkafka member (confluent-kafka) in a group on
the librdkafka mock cluster. kproto plays the group leader with raw JoinGroup/SyncGroup, so
it receives librdkafka's subscription bytes (checked byte for byte against our encoder) and
librdkafka consumes the assignment bytes our encoder writes (and our assignor computes)."""

from __future__ import annotations

import threading
import time

import pytest

from kproto.consumer.classic.assignors import (
    ClusterView,
    CooperativeStickyAssignor,
    RebalanceProtocol,
    group_protocols,
    perform_assignment,
)
from kproto.consumer.classic.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kproto.messages import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest
from kproto.structs import TopicPartition
from tests.brokers import raw
from tests.support.members import wait_for
from tests.threads import TestThread

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "cp-interop"
SYNC_GROUP = 14
SESSION_MS = 5000


class RawLeader:
    """One group member speaking raw JoinGroup v5 / SyncGroup v3 / Heartbeat v3."""

    def __init__(self, address, group: str, protocol: str) -> None:
        self.address, self.group, self.protocol = address, group, protocol
        self.member_id = ""
        self.generation = -1

    def join(self, metadata: bytes):
        # The mock holds each rebalance after the first open for session.timeout.ms - 1000
        # (its wait for rejoins): 5 s sessions, with keep_alive() every second in waits.
        req = JoinGroupRequest(group_id=self.group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS,
                               member_id=self.member_id, protocol_type="consumer",
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=self.protocol,
                                                                                    metadata=metadata)])
        for _ in range(3):
            resp = raw.roundtrip(self.address, req, 5, timeout=60)
            if resp.error_code == 79:  # MEMBER_ID_REQUIRED: retry with the given id
                self.member_id = req.member_id = resp.member_id
                continue
            assert resp.error_code == 0, resp
            self.member_id, self.generation = resp.member_id, resp.generation_id
            return resp
        raise AssertionError("could not join")

    def sync(self, assignments: dict) -> None:
        resp = raw.roundtrip(self.address, SyncGroupRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in assignments.items()]), 3)
        assert resp.error_code == 0, resp

    def keep_alive(self) -> None:
        """One heartbeat, so the session survives a long wait on librdkafka (on a loaded
        machine a wait outlasted a 10 s session once: the leader was evicted and
        librdkafka, alone, assigned itself everything). Rebalance answers are fine here:
        REBALANCE_IN_PROGRESS (27), or ILLEGAL_GENERATION (22) once librdkafka's rejoin has
        moved the group on; the test's next join() checks what matters."""
        resp = raw.roundtrip(self.address, HeartbeatRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id), 3)
        assert resp.error_code in (0, 22, 27), resp

    def wait_for_rebalance(self, deadline_s: float = 60) -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            resp = raw.roundtrip(self.address, HeartbeatRequest(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id), 3)
            if resp.error_code == 27:  # REBALANCE_IN_PROGRESS
                return
            assert resp.error_code == 0, resp
            time.sleep(0.2)
        raise AssertionError("no rebalance started")


class LibrdkafkaMember:
    """A confluent-kafka consumer polling on its own thread, recording its assignments."""

    def __init__(self, address, group: str, strategy: str, rack: str) -> None:
        self.assignments: list = []
        self.revocations: list = []
        self._stop = threading.Event()
        self._consumer = confluent_kafka.Consumer({
            "bootstrap.servers": "{}:{}".format(*address), "group.id": group,
            "partition.assignment.strategy": strategy, "client.rack": rack,
            "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500, "enable.auto.commit": False})
        self._consumer.subscribe([TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self._thread = TestThread(target=self._run, name="rdkafka-member", daemon=True)
        self._thread.start()

    def _on_assign(self, consumer, partitions) -> None:
        self.assignments.append(sorted(TopicPartition(p.topic, p.partition) for p in partitions))

    def _on_revoke(self, consumer, partitions) -> None:
        self.revocations.append(sorted(TopicPartition(p.topic, p.partition) for p in partitions))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(0.1)

    @staticmethod
    def _wait(events: list, n: int, deadline_s: float, tick=None) -> list:
        end = time.monotonic() + deadline_s
        next_tick = time.monotonic() + 1
        while len(events) < n and time.monotonic() < end:
            time.sleep(0.05)
            if tick is not None and time.monotonic() >= next_tick:
                tick()
                next_tick = time.monotonic() + 1
        assert len(events) >= n, events
        return events[n - 1]

    def wait_assignments(self, n: int, deadline_s: float = 60, tick=None) -> list:
        return self._wait(self.assignments, n, deadline_s, tick)

    def wait_revocations(self, n: int, deadline_s: float = 60, tick=None) -> list:
        return self._wait(self.revocations, n, deadline_s, tick)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._consumer.close()


def _sync_after_librdkafka(cluster, leader: RawLeader, assignments: dict) -> None:
    """The leader's SyncGroup, sent only once librdkafka's SyncGroup of this round has
    reached the mock (the caller cleared the tracked requests before the round's join):
    the mock refuses a follower's SyncGroup that arrives after the leader's
    (INVALID_REQUEST), and librdkafka would rejoin instead of taking the assignment."""
    wait_for(lambda: SYNC_GROUP in [r.api_key for r in cluster.requests()], "librdkafka's SyncGroup")
    leader.sync(assignments)


def _the_other(resp, me: str):
    (other,) = [m for m in resp.members if m.member_id != me]
    return other.member_id, bytes(other.metadata)


def test_librdkafka_subscription_bytes_and_our_assignments(mock_cluster_factory):
    strategy = "cooperative-sticky"
    cluster = mock_cluster_factory(1)
    cluster.create_topic(TOPIC, 4)
    address = cluster.addresses[0]
    group = "cp-interop"
    leader = RawLeader(address, group, strategy)
    mine = encode_subscription(Subscription([TOPIC]))
    leader.join(mine)
    leader.sync({leader.member_id: encode_assignment(Assignment([]))})

    cluster.start_request_tracking()
    member = LibrdkafkaMember(address, group, strategy, "rack-x")
    try:
        # 1. librdkafka joins: its v3 subscription, nothing owned yet
        leader.wait_for_rebalance()
        cluster.clear_requests()
        resp = leader.join(mine)
        assert resp.leader == leader.member_id
        rd_id, rd_bytes = _the_other(resp, leader.member_id)
        sub = decode_subscription(rd_bytes)
        assert (sub.topics, sub.rack_id, sub.owned_partitions, sub.generation_id) == ([TOPIC], "rack-x", [], -1)
        assert encode_subscription(sub, sub.version) == rd_bytes  # byte for byte

        # 2. it consumes an assignment our encoder wrote
        given = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 2), TopicPartition(TOPIC, 3)]
        ours = [TopicPartition(TOPIC, 1)]
        _sync_after_librdkafka(cluster, leader, {leader.member_id: encode_assignment(Assignment(ours)),
                                                 rd_id: encode_assignment(Assignment(given))})
        assert member.wait_assignments(1, tick=leader.keep_alive) == given

        # 3. we rejoin; a cooperative member keeps its partitions and reports them + generation
        assignor = CooperativeStickyAssignor()
        generation = leader.generation
        ((_, our_metadata),) = group_protocols([assignor], [TOPIC], ours, generation)
        cluster.clear_requests()
        resp = leader.join(our_metadata)
        rd_id, rd_bytes = _the_other(resp, leader.member_id)
        sub = decode_subscription(rd_bytes)
        assert sorted(sub.owned_partitions) == given and sub.generation_id == generation
        assert encode_subscription(sub, sub.version) == rd_bytes

        # 4. our cooperative-sticky assignor leads: 3/1 is unbalanced, one partition moves
        #    to us; round 1 only revokes it from librdkafka
        out = perform_assignment(assignor, ClusterView({TOPIC: 4}), resp.members, RebalanceProtocol.COOPERATIVE)
        result = {m: sorted(decode_assignment(b).partitions()) for m, b in out.items()}
        kept = result[rd_id]
        assert len(kept) == 2 and set(kept) < set(given) and result[leader.member_id] == ours
        moving = sorted(set(given) - set(kept))
        _sync_after_librdkafka(cluster, leader, out)
        assert member.wait_revocations(1, tick=leader.keep_alive) == moving

        # 5. librdkafka rejoins after revoking; round 2 hands the partition over
        ((_, our_metadata),) = group_protocols([assignor], [TOPIC], ours, leader.generation)
        cluster.clear_requests()
        resp = leader.join(our_metadata)
        assert sorted(decode_subscription(_the_other(resp, leader.member_id)[1]).owned_partitions) == kept
        out = perform_assignment(assignor, ClusterView({TOPIC: 4}), resp.members, RebalanceProtocol.COOPERATIVE)
        result = {m: sorted(decode_assignment(b).partitions()) for m, b in out.items()}
        assert result[leader.member_id] == sorted(ours + moving) and result[rd_id] == kept
        _sync_after_librdkafka(cluster, leader, out)
    finally:
        member.close()
