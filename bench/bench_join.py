"""Join latency: classic group protocol vs the KIP-848 consumer engine, same mock cluster, one run.

    .venv/bin/python bench/bench_join.py [--members 3] [--partitions 6] [--rounds 3]
                                         [--heartbeat-ms 3000] [--session-timeout-ms 10000]
                                         [--initial-rebalance-delay-ms 50]
                                         [--engines classic,consumer]

On one librdkafka mock cluster (3 brokers; the only local broker that speaks both
JoinGroup/SyncGroup and ConsumerGroupHeartbeat) a producer thread trickles one record to
every partition every 20 ms, so a member that owns partitions and fetches receives records
within a few fetch waits. Each round and engine uses a fresh group on the same topic:

1. **first members**: ``--members - 1`` kproto consumers are created and subscribe at once;
2. **one member joins**: once that group is settled, one more consumer joins it.

Every member polls on its own thread (``poll(timeout_ms=100)``), as an application would.
A phase's time runs from the consumers' construction until the group is *settled*: every
member is STABLE (classic: ``MemberState.STABLE`` with no rejoin pending; consumer engine:
``MemberState.STABLE``), the members' assignments are disjoint and cover every partition,
and every member has returned a record after the group last became so (it is consuming,
not just assigned). Both engines get the same heartbeat interval and session timeout (the
mock's ``group.consumer.heartbeat.interval.ms`` / ``session.timeout.ms`` and the classic
``heartbeat_interval_ms`` / ``session_timeout_ms``) and the classic group's initial
rebalance delay is set on the mock (50 ms by default, as the classic group tests use: the
broker's 3 s default would dominate the classic numbers).

Read the classic "one member joins" number with care: librdkafka's mock completes a
rebalance of a non-empty classic group only about when the session timeout has passed
(measured: ~9 s with a 10 s session timeout, ~2 s with 3 s), where a real broker completes
it once every member has rejoined. The consumer engine's join takes about two heartbeat
intervals here (the owners learn of the revocation on one heartbeat, the newcomer gets
the freed partitions on a later one). The median of ``--rounds``
rounds is printed per engine and phase; a phase that does not settle within
``--timeout-s`` is reported as such (with the member states seen), not timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from typing import Any, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TRICKLE_INTERVAL_S = 0.02
SETTLE_CHECK_S = 0.005


class Trickle(threading.Thread):
    """Writes one small record to every partition every TRICKLE_INTERVAL_S until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(name="bench-trickle", daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1,
                                  "broker.address.family": "v4", "log_level": 3})
        self.topic, self.partitions = topic, partitions
        self.stopped = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stopped.wait(TRICKLE_INTERVAL_S):
            for p in range(self.partitions):
                self.producer.produce(self.topic, value=b"v%d" % i, partition=p)
            i += 1
            self.producer.poll(0)
        self.producer.flush(5)
        self.producer = None  # destroyed now, before the cluster it talks to goes away

    def stop(self) -> None:
        self.stopped.set()
        self.join()


class Member(threading.Thread):
    """One kproto consumer polling on its own thread; records when it last got a record."""

    def __init__(self, name: str, config: dict, topic: str) -> None:
        super().__init__(name=name, daemon=True)
        self.config, self.topic = config, topic
        self.consumer: Any = None
        self.last_record_at = 0.0
        self.error: Optional[BaseException] = None
        self.started_at = 0.0
        self.stopped = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        from kproto.consumer.kafka_consumer import KafkaConsumer

        try:
            self.started_at = time.monotonic()
            self.consumer = KafkaConsumer(**self.config)
            self.consumer.subscribe([self.topic])
            self.ready.set()
            while not self.stopped.is_set():
                if self.consumer.poll(timeout_ms=100):
                    self.last_record_at = time.monotonic()
        except BaseException as exc:  # reported by the bench, which then stops the phase
            self.error = exc
        finally:
            self.ready.set()
            if self.consumer is not None:
                try:
                    self.consumer.close(autocommit=False, timeout_ms=5000)
                except Exception as exc:
                    self.error = self.error or exc

    def state(self) -> str:
        """The member's group state name, whichever engine runs it."""
        delegate = getattr(self.consumer, "_delegate", None)
        if delegate is None:
            return "NOT_CREATED"
        if self.config["group_protocol"] == "consumer":
            return delegate.membership.state.name
        coordinator = delegate.coordinator
        if coordinator is None:
            return "NO_COORDINATOR"
        membership = coordinator.membership
        if membership.state.name == "STABLE" and membership.rejoin_needed:
            return "STABLE_REJOIN_NEEDED"
        return membership.state.name

    def assignment(self) -> set:
        # The façade is confined to the member's thread; the shared SubscriptionState is
        # locked and safe to read from here (both engines keep one).
        delegate = getattr(self.consumer, "_delegate", None)
        return set() if delegate is None else delegate.subscriptions.assigned_partitions()

    def stop(self) -> None:
        self.stopped.set()
        self.join(30)


def wait_settled(members: list, partitions: int, t0: float, timeout_s: float) -> tuple[Optional[float], str]:
    """Seconds from ``t0`` until the group is settled (see the module docstring), or None
    and a description of what was seen at the timeout."""
    settled_since: Optional[float] = None
    deadline = t0 + timeout_s
    while time.monotonic() < deadline:
        errors = [m.error for m in members if m.error is not None]
        if errors:
            return None, "a member failed: {!r}".format(errors[0])
        now = time.monotonic()
        assignments = [m.assignment() for m in members]
        union = set().union(*assignments)
        settled = (all(m.state() == "STABLE" for m in members) and all(assignments)
                   and sum(len(a) for a in assignments) == len(union) == partitions)
        if not settled:
            settled_since = None
        else:
            if settled_since is None:
                settled_since = now
            last = [m.last_record_at for m in members]
            if min(last) > settled_since:
                return max(last) - t0, ""
        time.sleep(SETTLE_CHECK_S)
    seen = ", ".join("{}={} owns {}".format(m.name, m.state(), len(m.assignment())) for m in members)
    return None, "not settled after {} s ({})".format(timeout_s, seen)


def run_round(bootstrap: str, topic: str, engine: str, args: argparse.Namespace, round_no: int
              ) -> dict[str, tuple[Optional[float], str]]:
    group = "bench-join-{}-{}-{}".format(engine, round_no, time.monotonic_ns() % 10**9)
    config = dict(bootstrap_servers=bootstrap, group_id=group, group_protocol=engine,
                  auto_offset_reset="latest", enable_auto_commit=False, fetch_max_wait_ms=100)
    if engine == "classic":
        config.update(heartbeat_interval_ms=args.heartbeat_ms, session_timeout_ms=args.session_timeout_ms)
    members: list = []
    results: dict[str, tuple[Optional[float], str]] = {}
    try:
        first = [Member("{}-{}".format(engine, i), config, topic) for i in range(args.members - 1)]
        t0 = time.monotonic()
        for member in first:
            member.start()
        members.extend(first)
        results["first members"] = wait_settled(members, args.partitions, t0, args.timeout_s)
        if results["first members"][0] is None:
            results["one member joins"] = (None, "skipped: the first members did not settle")
            return results
        newcomer = Member("{}-{}".format(engine, args.members - 1), config, topic)
        t0 = time.monotonic()
        newcomer.start()
        members.append(newcomer)
        results["one member joins"] = wait_settled(members, args.partitions, t0, args.timeout_s)
        return results
    finally:
        for member in members:
            member.stopped.set()
        for member in members:
            member.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=3, help="group size after the join (>= 2)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--heartbeat-ms", type=int, default=3000)
    parser.add_argument("--session-timeout-ms", type=int, default=10000)
    parser.add_argument("--initial-rebalance-delay-ms", type=int, default=50)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    parser.add_argument("--engines", default="classic,consumer")
    args = parser.parse_args()
    if args.members < 2 or args.partitions < args.members:
        parser.error("need --members >= 2 and --partitions >= --members")
    if args.session_timeout_ms <= args.heartbeat_ms:
        parser.error("need --session-timeout-ms > --heartbeat-ms")
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]

    from tests.brokers.mock_cluster import MockCluster

    broker = MockCluster(3)
    trickle: Optional[Trickle] = None
    try:
        broker.set_group_consumer_heartbeat_interval(args.heartbeat_ms)
        broker.set_group_consumer_session_timeout(args.session_timeout_ms)
        broker.group_initial_rebalance_delay(args.initial_rebalance_delay_ms)
        topic = broker.new_topic(partitions=args.partitions, prefix="bench-join")
        trickle = Trickle(broker.bootstrap_servers, topic, args.partitions)
        trickle.start()
        times: dict[tuple[str, str], list] = {}
        failures: dict[tuple[str, str], list] = {}
        for round_no in range(args.rounds):
            for engine in engines:  # interleaved, so both see the same machine load
                for phase, (seconds, why) in run_round(broker.bootstrap_servers, topic, engine, args,
                                                       round_no).items():
                    if seconds is None:
                        failures.setdefault((engine, phase), []).append(why)
                    else:
                        times.setdefault((engine, phase), []).append(seconds)
        print("\n## join until every member is STABLE and consuming: mock cluster, {} partitions, "
              "heartbeat {} ms, session timeout {} ms, classic initial rebalance delay {} ms, {} round(s)".format(
                  args.partitions, args.heartbeat_ms, args.session_timeout_ms, args.initial_rebalance_delay_ms,
                  args.rounds))
        print("{:<10} {:<22} {:>8} {:>8} {:>8}  {}".format("engine", "phase", "median s", "min s", "max s",
                                                           "failed rounds"))
        for engine in engines:
            for phase, label in (("first members", "{} members start".format(args.members - 1)),
                                 ("one member joins", "1 joins {} -> {}".format(args.members - 1,
                                                                                 args.members))):
                got = times.get((engine, phase), [])
                failed = failures.get((engine, phase), [])
                if got:
                    print("{:<10} {:<22} {:>8.2f} {:>8.2f} {:>8.2f}  {}".format(
                        engine, label, statistics.median(got), min(got), max(got), len(failed)))
                else:
                    print("{:<10} {:<22} {:>8} {:>8} {:>8}  {}".format(engine, label, "-", "-", "-", len(failed)))
                for why in failed[:1]:
                    print("    {} {}: {}".format(engine, phase, why))
    finally:
        if trickle is not None:
            trickle.stop()
        broker.close()


if __name__ == "__main__":
    main()
