"""Classic group members for the integration tests (groups, trace, metrics; no tests here).

``Member``: one kproto consumer in its own thread that subscribes, polls, "processes"
records (keeps them), commits after processing, and records what it owned in which
generation and every rebalance callback, each processing and each successful commit
stamped with one sequence shared by all members (``assert_no_committed_work_redone``).
``wait_for`` polls a condition (no fixed sleeps
in assertions: a condition that never comes fails with a message after a generous limit).
``UnhurriedCooperativeSticky``: cooperative-sticky for tests that need every SyncGroup of a
round to count on librdkafka's mock. ``LingerInFirstEmptyAssignment``: a listener hook that
holds a cooperative rebalance's second round open while records are produced, until the old
member was seen working in the window (``processed_after_revocation``).
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from typing import Any, Callable, Optional

from kproto import KafkaConsumer, errors
from kproto.consumer.classic.assignors.sticky import CooperativeStickyAssignor
from tests.support.member_views import CallbackEvent, MemberViews

# session_timeout_ms 3000 is below Kafka's group.min.session.timeout.ms (6000): fine on
# librdkafka's mock (mock-only tests); tests on the `broker` fixture pass 6000 or more.
GROUP_CONFIG = dict(session_timeout_ms=3000, heartbeat_interval_ms=200, auto_offset_reset="earliest",
                    enable_auto_commit=False, max_poll_records=50, retry_backoff_ms=50,
                    fetch_max_wait_ms=100)


# One order over every member's processing and commits (next() on a count is atomic).
_sequence = itertools.count()


def stamp() -> int:
    """A point in the shared order of processing, commits and rebalance callbacks."""
    return next(_sequence)


def wait_for(condition: Callable[[], Any], what: str, limit_s: float = 60.0, step_s: float = 0.05) -> Any:
    """Wait until ``condition()`` is truthy; fail (AssertionError naming ``what``) after ``limit_s``."""
    end = time.monotonic() + limit_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(step_s)


class UnhurriedCooperativeSticky(CooperativeStickyAssignor):
    """cooperative-sticky whose leader pauses before assigning, so the followers' SyncGroups
    reach the broker before the leader's: librdkafka's mock answers a SyncGroup that arrives
    after the leader's with INVALID_REQUEST (Apache Kafka hands out the stored assignment),
    and the refused follower would skip the round a test is about."""

    def assign(self, cluster: Any, members: Any) -> Any:
        time.sleep(0.2)
        return super().assign(cluster, members)


class LingerInFirstEmptyAssignment:
    """A ``Member`` listener hook for a cooperative newcomer: in its first (empty) assignment
    callback it runs ``produce()`` (records stored in ``during_window``), then stays in the
    callback until ``until()`` holds (or ``limit_s`` passed: the test's assertion then fails).
    The second round of the rebalance waits for this member to rejoin, so between the old
    members' revocations and ``window_closed`` (a shared-order stamp taken after the wait)
    they must keep fetching and processing what they kept. (A fixed linger was too short for
    the old member to fetch anything on a loaded machine.)"""

    def __init__(self, produce: Callable[[], list], until: Callable[[], Any], limit_s: float = 30.0) -> None:
        self.produce = produce
        self.until = until
        self.limit_s = limit_s
        self.lingered = threading.Event()
        self.during_window: list = []
        self.window_closed: Optional[int] = None

    def __call__(self, member: "Member", kind: str, partitions: Any) -> None:
        if kind == "assigned" and not partitions and not self.lingered.is_set():
            self.lingered.set()
            self.during_window.extend(self.produce())
            end = time.monotonic() + self.limit_s
            while not self.until() and time.monotonic() < end:
                time.sleep(0.05)
            self.window_closed = stamp()  # only after this can the second round complete


def processed_after_revocation(member: "Member", records: Optional[set] = None) -> bool:
    """Whether ``member`` processed, after its first revocation callback, a record of a
    partition it did not revoke; only records of ``records`` ((topic, partition, offset)) count
    if given."""
    with member.lock:
        revocations = [(s, parts) for (kind, _g, parts), s in zip(member.events, member.event_stamps)
                       if kind == "revoked"]
        if not revocations:
            return False
        revoked_at, revoked = revocations[0]
        gone = {(tp.topic, tp.partition) for tp in revoked}
        return any(s > revoked_at and (t, p) not in gone and (records is None or (t, p, off) in records)
                   for s, t, p, off in member.stamped)


class Member(MemberViews):
    """A kproto group member consuming ``topics`` in its own thread. Its views re-raise
    what the thread died of (a wait on them fails at once), as does :meth:`stop`."""

    def __init__(self, name: str, bootstrap: str, group: str, topics: Any = None, *, pattern: Optional[str] = None,
                 commit: str = "sync", per_record_s: float = 0.0, per_batch_s: float = 0.0,
                 listener_hook: Optional[Callable] = None, **config: Any) -> None:
        super().__init__(name="member-" + name, daemon=True)
        cfg = dict(GROUP_CONFIG)
        if config.get("group_protocol") == "consumer":
            # The consumer protocol's timeouts are the broker's (Kafka refuses these).
            for key in ("session_timeout_ms", "heartbeat_interval_ms"):
                cfg.pop(key)
        cfg.update(config)
        self.member_name = name
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, **cfg)
        self.topics = topics
        self.pattern = pattern
        self.commit_mode = commit
        self.per_record_s = per_record_s
        self.per_batch_s = per_batch_s
        # (sequence, topic, partition, offset) of every record processed, in order.
        self.stamped: list[tuple[int, str, int, int]] = []
        # (sequence, topic, partition, committed offset) after each successful commit.
        self.commits: list[tuple[int, str, int, int]] = []
        self.listener_hook = listener_hook
        self.lock = threading.Lock()
        self.processed: list[tuple[str, int, int]] = []  # (topic, partition, offset)
        self.ownership: list[tuple[int, frozenset]] = []  # (generation, assignment) after each poll
        self.events: list[tuple[str, int, frozenset]] = []  # (callback, generation, partitions)
        self.event_stamps: list[int] = []  # the shared sequence number of each event
        self.event_times: list[int] = []  # time.monotonic_ns() of each event
        self.ended_ns: Optional[int] = None  # when the loop ended (nothing owned after)
        self.commit_errors: list[BaseException] = []
        self.member_id: Optional[str] = None  # the group's name for this member, once joined
        self._stop_event = threading.Event()
        self._close_on_stop = True

    # --- ConsumerRebalanceListener -----------------------------------------------------------

    def _event(self, kind: str, partitions: Any) -> None:
        generation = self.consumer.group_metadata().generation_id
        with self.lock:
            self.events.append((kind, generation, frozenset(partitions)))
            self.event_stamps.append(next(_sequence))
            self.event_times.append(time.monotonic_ns())
        if self.listener_hook is not None:
            self.listener_hook(self, kind, partitions)

    def on_partitions_revoked(self, partitions: Any) -> None:
        self._event("revoked", partitions)

    def on_partitions_assigned(self, partitions: Any) -> None:
        self._event("assigned", partitions)

    def on_partitions_lost(self, partitions: Any) -> None:
        self._event("lost", partitions)

    # --- the loop ---------------------------------------------------------------------------

    def work(self) -> None:
        c = self.consumer
        if self.pattern is not None:
            c.subscribe(pattern=self.pattern, listener=self)
        else:
            c.subscribe(self.topics, listener=self)
        uncommitted = False
        pending: dict = {}  # partition -> offset after the last record processed, not committed
        while not self._stop_event.is_set():
            batch = c.poll(100)
            metadata = c.group_metadata()
            generation = metadata.generation_id
            owned = frozenset(c.assignment())
            with self.lock:
                self.member_id = metadata.member_id
                self.ownership.append((generation, owned))
            if batch and self.per_batch_s:
                time.sleep(self.per_batch_s)
            for tp, records in batch.items():
                for record in records:
                    if self.per_record_s:
                        time.sleep(self.per_record_s)
                    with self.lock:
                        self.processed.append((tp.topic, tp.partition, record.offset))
                        self.stamped.append((next(_sequence), tp.topic, tp.partition, record.offset))
                    pending[tp] = record.offset + 1
            if (batch or uncommitted) and self.commit_mode == "sync":
                try:
                    # commit() covers the partitions assigned now (no rebalance runs inside it).
                    covered = {tp: off for tp, off in pending.items() if tp in c.assignment()}
                    c.commit()
                    stamp = next(_sequence)
                    with self.lock:
                        self.commits.extend((stamp, tp.topic, tp.partition, off) for tp, off in covered.items())
                    pending.clear()
                    uncommitted = False
                except (errors.CommitFailedError, errors.RebalanceInProgressError) as exc:
                    # Refused while the group rebalances: commit again after the next
                    # poll (what is no longer ours is redone by its next owner).
                    self.commit_errors.append(exc)
                    uncommitted = True
        if self._close_on_stop:
            c.close()
        self.ended_ns = time.monotonic_ns()

    def stop(self, close: bool = True, timeout_s: float = 30.0) -> None:
        self._close_on_stop = close
        self._stop_event.set()
        self.join(timeout_s)  # re-raises what the thread died of
        assert not self.is_alive(), "member {} did not stop".format(self.member_name)

    # --- views ---------------------------------------------------------------------------------

    def callback_events(self) -> list[CallbackEvent]:
        return [(kind, parts, ns) for (kind, _g, parts), ns in zip(self.events, self.event_times)]


def assert_disjoint_per_generation(members: list[Member]) -> None:
    """No partition is owned by two members in the same generation."""
    owners: dict[tuple[int, Any], set[str]] = {}
    for m in members:
        with m.lock:
            snapshot = list(m.ownership)
        for generation, owned in snapshot:
            if generation < 0:
                continue
            for tp in owned:
                owners.setdefault((generation, tp), set()).add(m.member_name)
    shared = {k: v for k, v in owners.items() if len(v) > 1}
    assert not shared, "partitions owned by two members in one generation: {}".format(shared)


def assert_never_owned_twice(members: list) -> None:
    """No partition owned by two members at once, across processes and group protocols:
    each member's ownership intervals (``ownership_intervals()``: from its own rebalance
    callbacks, stamped with CLOCK_MONOTONIC, which the Java peer's System.nanoTime() also
    reads) never overlap another's for the same partition."""
    by_partition: dict[Any, list[tuple[int, float, str]]] = {}
    for m in members:
        for tp, start, end in m.ownership_intervals():
            by_partition.setdefault((tp[0], tp[1]), []).append(
                (start, float("inf") if end is None else end, m.member_name))
    clashes = []
    for tp, spans in by_partition.items():
        spans.sort()
        for i, (s2, e2, m2) in enumerate(spans):
            clashes.extend((tp, m1, m2, (min(e1, e2) - s2) / 1e6)
                           for s1, e1, m1 in spans[:i] if s2 < e1 and m1 != m2)
    assert not clashes, "partitions owned by two members at once (tp, a, b, overlap ms): {}".format(clashes)


def processed_union(members: list[Member]) -> set[tuple[str, int, int]]:
    result: set[tuple[str, int, int]] = set()
    for m in members:
        result |= m.processed_set()
    return result


def assert_no_committed_work_redone(members: list[Member]) -> None:
    """Duplicates only from uncommitted work: no record is processed after a successful
    commit (by anyone) past its offset. Commits are stamped after they return, so a commit
    is never seen earlier than it happened (no false alarm)."""
    commits: dict[tuple[str, int], list[tuple[int, int]]] = {}
    processed: list[tuple[int, str, int, int]] = []
    for m in members:
        with m.lock:
            for stamp, topic, partition, offset in m.commits:
                commits.setdefault((topic, partition), []).append((stamp, offset))
            processed.extend(m.stamped)
    # Per partition: commit stamps in order and the highest offset committed up to each.
    timeline: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    for key, entries in commits.items():
        entries.sort()
        highest, stamps, tops = -1, [], []
        for commit_stamp, committed in entries:
            highest = max(highest, committed)
            stamps.append(commit_stamp)
            tops.append(highest)
        timeline[key] = (stamps, tops)
    redone = []
    for stamp, topic, partition, offset in processed:
        stamps, tops = timeline.get((topic, partition), ((), ()))
        before = bisect.bisect_left(stamps, stamp)
        if before and tops[before - 1] > offset:
            redone.append(((topic, partition, offset), "committed up to {} before".format(tops[before - 1])))
    assert not redone, "committed records processed again: {}".format(redone[:10])
