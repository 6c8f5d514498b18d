"""Classic group lifecycle on the mock cluster: LeaveGroup on close (not for static members),
fencing, max_poll_interval_ms, injected coordinator errors, coordinator moves, pattern
subscriptions, and commits around revocation."""

from __future__ import annotations

import threading

import pytest

from kproto import KafkaConsumer, TopicPartition, errors
from tests.support.members import GROUP_CONFIG, Member, wait_for

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, SYNC_GROUP = 11, 12, 13, 8, 14
NOT_COORDINATOR, REBALANCE_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID = 16, 27, 15, 82


@pytest.fixture
def cluster(mock_cluster_factory):
    c = mock_cluster_factory(3)
    c.group_initial_rebalance_delay(50)
    return c


def consumer(cluster, group, **config):
    cfg = dict(GROUP_CONFIG)
    cfg.update(config)
    return KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group, **cfg)


def poll_until(c, condition, what, limit_s=30.0):
    """Poll ``c`` (on this thread) until ``condition(records_so_far)``; returns the records."""
    got = []

    def step():
        for records in c.poll(100).values():
            got.extend(records)
        return condition(got)

    wait_for(step, what, limit_s=limit_s, step_s=0)
    return got


class EventRecorder:
    """A rebalance listener keeping ``(callback, partitions)`` in ``events``."""

    def __init__(self):
        self.events = []

    def on_partitions_revoked(self, partitions):
        self.events.append(("revoked", frozenset(partitions)))

    def on_partitions_assigned(self, partitions):
        self.events.append(("assigned", frozenset(partitions)))

    def on_partitions_lost(self, partitions):
        self.events.append(("lost", frozenset(partitions)))


def api_keys_seen(cluster):
    return [r.api_key for r in cluster.requests()]


def test_close_sends_leave_group_and_the_other_member_takes_over(cluster):
    # (The mock waits session_timeout_ms - 1 s for members after any change, so how fast
    # the takeover is cannot be told apart from an eviction here; the LeaveGroup can.)
    topic = cluster.new_topic(partitions=4)
    stay = Member("stay", cluster.bootstrap_servers, "leave", [topic])
    stay.start()
    try:
        wait_for(lambda: len(stay.assignment()) == 4, "the first member to own everything")
        c = consumer(cluster, "leave")
        c.subscribe([topic])
        poll_until(c, lambda _: len(c.assignment()) == 2, "the second member's share")
        cluster.start_request_tracking()
        c.close()
        seen = api_keys_seen(cluster)
        cluster.stop_request_tracking()
        assert LEAVE_GROUP in seen
        wait_for(lambda: len(stay.assignment()) == 4, "the remaining member to own everything")  # default hang guard: slow under load
    finally:
        stay.stop()


def test_static_member_close_sends_no_leave_group(cluster):
    topic = cluster.new_topic(partitions=2)
    c = consumer(cluster, "static", group_instance_id="instance-1")
    c.subscribe([topic])
    poll_until(c, lambda _: len(c.assignment()) == 2, "the static member's assignment")
    assert c.group_metadata().group_instance_id == "instance-1"
    heartbeat_thread = "kafka-coordinator-heartbeat-thread | static"
    assert heartbeat_thread in [t.name for t in threading.enumerate()]
    cluster.start_request_tracking()
    c.close()
    seen = api_keys_seen(cluster)
    cluster.stop_request_tracking()
    assert LEAVE_GROUP not in seen
    assert heartbeat_thread not in [t.name for t in threading.enumerate()]


def test_fenced_instance_id_is_fatal_with_a_clear_error(cluster):
    topic = cluster.new_topic(partitions=1)
    c = consumer(cluster, "fenced", group_instance_id="twin")
    try:
        c.subscribe([topic])
        poll_until(c, lambda _: c.assignment(), "the assignment")
        # Another consumer with the same instance id took over: the coordinator fences us.
        cluster.push_request_errors(HEARTBEAT, [FENCED_INSTANCE_ID])
        with pytest.raises(errors.FencedInstanceIdError, match="twin"):
            poll_until(c, lambda _: False, "the fencing error")
    finally:
        cluster.clear_request_errors(HEARTBEAT)
        c.close()


# With heartbeats 2 s apart no Heartbeat is in flight when the poll timer expires, so only
# the heartbeat thread's own poll after queueing the LeaveGroup (Java's pollNoWakeup) sends it.
@pytest.mark.parametrize("heartbeat", [{}, {"heartbeat_interval_ms": 2000}],
                         ids=["default-heartbeat", "nothing-else-in-flight"])
def test_poll_interval_exceeded_leaves_the_group_and_next_poll_rejoins_with_partitions_lost(cluster, heartbeat):
    topic = cluster.new_topic(partitions=2)
    listener = EventRecorder()
    events = listener.events

    c = consumer(cluster, "slow", max_poll_interval_ms=1000, session_timeout_ms=6000, **heartbeat)
    try:
        # Tracking from the start: a slow return from the last poll must not let the
        # LeaveGroup go out before tracking begins (nothing else in this group leaves).
        cluster.start_request_tracking()
        c.subscribe([topic], listener=listener)
        poll_until(c, lambda _: len(c.assignment()) == 2, "the assignment")
        generation = c.group_metadata().generation_id
        # Stop polling for longer than max_poll_interval_ms: the heartbeat thread leaves.
        # (Both conditions: a stall of over 1 s while joining may already have made the
        # member leave and rejoin once, which leaves a LeaveGroup seen and a live generation.)
        wait_for(lambda: LEAVE_GROUP in api_keys_seen(cluster) and c.group_metadata().generation_id == -1,
                 "the heartbeat thread's LeaveGroup")
        cluster.stop_request_tracking()
        poll_until(c, lambda _: len(c.assignment()) == 2 and c.group_metadata().generation_id > generation,
                   "the rejoin on the next poll")
        lost = [e for e in events if e[0] == "lost"]
        assert lost == [("lost", frozenset(TopicPartition(topic, p) for p in (0, 1)))]
        assert ("revoked", frozenset(TopicPartition(topic, p) for p in (0, 1))) not in events
    finally:
        c.close()


@pytest.mark.parametrize("api_key,codes", [
    (HEARTBEAT, [NOT_COORDINATOR, NOT_COORDINATOR]),
    (HEARTBEAT, [REBALANCE_IN_PROGRESS]),
    (OFFSET_COMMIT, [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE]),
], ids=["heartbeat-not-coordinator", "heartbeat-rebalance", "commit-not-coordinator"])
def test_injected_coordinator_errors_are_survived_without_losing_records(cluster, api_key, codes):
    topic = cluster.new_topic(partitions=4)
    first = cluster.produce(topic, 100)
    c = consumer(cluster, "faults")
    try:
        c.subscribe([topic])
        got: set = set()

        def consume(until):
            state = {"dirty": False}

            def step():
                for records in c.poll(100).values():
                    got.update((r.partition, r.offset) for r in records)
                    state["dirty"] = True
                if state["dirty"]:
                    try:
                        c.commit()  # after processing, as an application does
                        state["dirty"] = False
                    except (errors.CommitFailedError, errors.RebalanceInProgressError):
                        pass  # refused during a rebalance: poll, then commit again
                return not state["dirty"] and until()
            wait_for(step, "records processed and committed", step_s=0)

        consume(lambda: len(got) >= 20)
        generation = c.group_metadata().generation_id
        # On every broker: only the coordinator's are consumed (by our requests to it).
        brokers = range(1, cluster.broker_count + 1)
        for broker_id in brokers:
            cluster.push_broker_request_errors(broker_id, api_key, codes)
        second = cluster.produce(topic, 100, start_index=100)
        want = {(w.partition, w.offset) for w in first + second}
        # A heartbeat's REBALANCE_IN_PROGRESS makes the next poll rejoin (a new generation).
        rejoin = codes == [REBALANCE_IN_PROGRESS]
        consume(lambda: want <= got and any(cluster.broker_error_stack_count(b, api_key) == 0 for b in brokers)
                and (not rejoin or c.group_metadata().generation_id > generation))
        ends = {}
        for w in first + second:
            ends[w.partition] = max(ends.get(w.partition, 0), w.offset + 1)
        assert {p: c.committed(TopicPartition(topic, p)) for p in range(4)} == ends
    finally:
        cluster.clear_request_errors(api_key)
        c.close()


def committed_map(cluster, group, topic, partitions):
    check = consumer(cluster, group)
    try:
        return {p: check.committed(TopicPartition(topic, p)) for p in partitions}
    finally:
        check.close()


def test_pattern_subscription_picks_up_a_new_matching_topic_with_a_rejoin(cluster):
    prefix = cluster.new_topic(partitions=1, prefix="pat")  # a unique name to build the pattern on
    first = prefix + "-a"
    cluster.create_topic(first, partitions=2)
    cluster.create_topic(prefix + "-other-x", partitions=1)
    c = consumer(cluster, "pattern", metadata_max_age_ms=500)
    try:
        c.subscribe(pattern=prefix.replace(".", r"\.") + r"-[a-z]$")
        poll_until(c, lambda _: {tp.topic for tp in c.assignment()} == {first}, "the matching topic")
        generation = c.group_metadata().generation_id
        second = prefix + "-b"
        cluster.create_topic(second, partitions=3)
        written = cluster.produce(second, 9)
        got = poll_until(c, lambda g: len([r for r in g if r.topic == second]) >= 9, "the new topic's records")
        assert {(r.partition, r.offset) for r in got if r.topic == second} == {(w.partition, w.offset) for w in written}
        assert {tp.topic for tp in c.assignment()} == {first, second}
        assert c.group_metadata().generation_id > generation
        assert c.subscription() == {first, second}
    finally:
        c.close()


def test_commit_inside_the_revoke_callback_and_auto_commit_before_revocation(cluster):
    # Revocation by unsubscribe() in a stable group (the mock refuses commits while a join
    # is pending, unlike Kafka, so rebalance-driven revocation is covered on Tansu).
    topic = cluster.new_topic(partitions=2)
    written = cluster.produce(topic, 40)
    ends = {}
    for w in written:
        ends[w.partition] = max(ends.get(w.partition, 0), w.offset + 1)
    revoked_here = []

    class CommitOnRevoke:
        consumer = None

        def on_partitions_revoked(self, partitions):
            self.consumer.commit()  # the supported pattern: commit before giving up
            revoked_here.append(frozenset(partitions))

        def on_partitions_assigned(self, partitions):
            pass

    manual = consumer(cluster, "revoke-commit")
    listener = CommitOnRevoke()
    listener.consumer = manual
    # Its only commits are auto-commits before revocation (the interval is far away).
    auto = consumer(cluster, "revoke-auto", enable_auto_commit=True, auto_commit_interval_ms=600000)
    try:
        manual.subscribe([topic], listener=listener)
        auto.subscribe([topic])
        poll_until(manual, lambda g: len(g) >= 40, "the manual member's records")
        poll_until(auto, lambda g: len(g) >= 40, "the auto-commit member's records")
        manual.unsubscribe()
        auto.unsubscribe()
        assert revoked_here == [frozenset(TopicPartition(topic, p) for p in (0, 1))]
        assert manual.assignment() == set() and auto.assignment() == set()
    finally:
        manual.close(autocommit=False)
        auto.close(autocommit=False)
    assert committed_map(cluster, "revoke-commit", topic, (0, 1)) == ends
    assert committed_map(cluster, "revoke-auto", topic, (0, 1)) == ends


def test_coordinator_move_is_rediscovered_while_assigned_partitions_keep_being_fetched(cluster):
    topic = cluster.new_topic(partitions=3)
    c = consumer(cluster, "moving")
    try:
        c.subscribe([topic])
        poll_until(c, lambda _: len(c.assignment()) == 3, "the assignment")
        old = c._delegate.coordinator.coordinator_broker_id  # noqa: SLF001 - which broker to move from
        new = 1 if old != 1 else 2
        cluster.set_coordinator("group", "moving", new)
        written = cluster.produce(topic, 60)
        want = {(w.partition, w.offset) for w in written}
        got = poll_until(c, lambda g: want <= {(r.partition, r.offset) for r in g}, "records after the move")
        assert want <= {(r.partition, r.offset) for r in got}
        # The old coordinator answers NOT_COORDINATOR from now on: commits find the new one.
        c.commit()
        wait_for(lambda: c._delegate.coordinator.coordinator_broker_id == new, "the new coordinator")  # noqa: SLF001
        assert c.committed(TopicPartition(topic, 0)) is not None
    finally:
        c.close()


def test_manual_assignment_commits_outside_group_management(cluster):
    topic = cluster.new_topic(partitions=2)
    written = cluster.produce(topic, 20)
    ends = {}
    for w in written:
        ends[w.partition] = max(ends.get(w.partition, 0), w.offset + 1)
    c = consumer(cluster, "assigned", enable_auto_commit=True, auto_commit_interval_ms=600000)
    try:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        poll_until(c, lambda g: len(g) >= 20, "the records")
        c.commit({TopicPartition(topic, 0): 3})
        assert c.committed(TopicPartition(topic, 0)) == 3
        assert c.group_metadata().generation_id == -1
    finally:
        c.close()  # auto-commit on close commits the consumed positions
    assert committed_map(cluster, "assigned", topic, (0, 1)) == ends


def test_close_with_auto_commit_commits_then_revokes(cluster):
    topic = cluster.new_topic(partitions=2)
    written = cluster.produce(topic, 20)
    ends = {}
    for w in written:
        ends[w.partition] = max(ends.get(w.partition, 0), w.offset + 1)
    c = consumer(cluster, "auto-close", enable_auto_commit=True, auto_commit_interval_ms=600000)
    c.subscribe([topic])
    poll_until(c, lambda g: len(g) >= 20, "the records")
    c.close()
    assert committed_map(cluster, "auto-close", topic, (0, 1)) == ends
    # ... and close(autocommit=False) does not.
    more = cluster.produce(topic, 4, start_index=20)
    c = consumer(cluster, "auto-close", enable_auto_commit=True, auto_commit_interval_ms=600000)
    c.subscribe([topic])
    poll_until(c, lambda g: len(g) >= len(more), "the new records")
    c.close(autocommit=False)
    assert committed_map(cluster, "auto-close", topic, (0, 1)) == ends


def test_heartbeat_thread_keeps_a_busy_member_in_the_group_beyond_the_session_timeout(cluster):
    import time

    topic = cluster.new_topic(partitions=2)
    c = consumer(cluster, "busy", session_timeout_ms=2000, heartbeat_interval_ms=200, max_poll_interval_ms=20000)
    try:
        c.subscribe([topic])
        poll_until(c, lambda _: len(c.assignment()) == 2, "the assignment")
        generation = c.group_metadata().generation_id
        cluster.start_request_tracking()
        time.sleep(3.0)  # "processing" for longer than the session timeout, without poll()
        heartbeats = [r for r in cluster.requests() if r.api_key == HEARTBEAT]
        cluster.stop_request_tracking()
        assert heartbeats  # sent (and answered) with the application thread away
        c.poll(100)
        assert c.group_metadata().generation_id == generation
        assert len(c.assignment()) == 2
    finally:
        c.close()


def test_unsubscribe_revokes_and_sends_leave_group(cluster):
    topic = cluster.new_topic(partitions=2)
    listener = EventRecorder()
    events = listener.events

    c = consumer(cluster, "unsub")
    try:
        c.subscribe([topic], listener=listener)
        poll_until(c, lambda _: len(c.assignment()) == 2, "the assignment")
        cluster.start_request_tracking()
        c.unsubscribe()
        # Sent by unsubscribe() itself: no further poll() drives the client.
        wait_for(lambda: LEAVE_GROUP in api_keys_seen(cluster), "the LeaveGroup", limit_s=20)
        cluster.stop_request_tracking()
        assert c.assignment() == set()
        assert events[-1] == ("revoked", frozenset(TopicPartition(topic, p) for p in (0, 1)))
    finally:
        c.close()


ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 22, 25


@pytest.mark.parametrize("code", [ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID], ids=["illegal-generation",
                                                                              "unknown-member-id"])
def test_heartbeat_generation_errors_reset_lose_partitions_and_rejoin(cluster, code):
    topic = cluster.new_topic(partitions=2)
    written = cluster.produce(topic, 40)
    listener = EventRecorder()
    events = listener.events

    c = consumer(cluster, "reset-" + str(code))
    try:
        c.subscribe([topic], listener=listener)
        got = poll_until(c, lambda _: len(c.assignment()) == 2, "the assignment")
        generation = c.group_metadata().generation_id
        member_id = c.group_metadata().member_id
        cluster.start_request_tracking()  # read only if the rejoin never comes (see below)
        for broker_id in range(1, cluster.broker_count + 1):
            cluster.push_broker_request_errors(broker_id, HEARTBEAT, [code])
        # With UNKNOWN_MEMBER_ID the mock keeps the old member id until its session (3 s)
        # ends, and may elect that ghost leader first: a SyncGroup round waits out the
        # session, then the group joins again (~2 s delay). About 7 s idle, 10 s under
        # load; CI under heavy load once needed more than 30 s (not reproduced since), so
        # the bound is generous and a timeout says where the group was.
        try:
            got += poll_until(c, lambda _: any(e[0] == "lost" for e in events) and len(c.assignment()) == 2
                              and c.group_metadata().generation_id != generation, "the reset and rejoin",
                              limit_s=90)
        except AssertionError as exc:
            seen = [(r.broker_id, r.api_key) for r in cluster.requests()][-40:]
            raise AssertionError("{}: events {}, group {}, member state {}, last requests (broker, api) {}".format(
                exc, events, c.group_metadata(), c._delegate.coordinator.member_state(), seen)) from exc
        finally:
            cluster.stop_request_tracking()
        owned = frozenset(TopicPartition(topic, p) for p in (0, 1))
        assert ("lost", owned) in events and ("revoked", owned) not in events
        if code == UNKNOWN_MEMBER_ID:
            assert c.group_metadata().member_id != member_id  # a new member id after the reset
        # Nothing committed: after the rejoin the partitions start again from the beginning.
        want = {(w.partition, w.offset) for w in written}
        if not want <= {(r.partition, r.offset) for r in got}:
            got += poll_until(c, lambda records: want <= {(r.partition, r.offset) for r in got + records},
                              "every record")
    finally:
        cluster.clear_request_errors(HEARTBEAT)
        c.close()
