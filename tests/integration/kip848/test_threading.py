"""The KIP-848 engine's threading promises, end to end on a broker that speaks
ConsumerGroupHeartbeat:

- the application thread never does network I/O: every ``NetworkClient.send`` and
  ``NetworkClient.poll`` of a grouped consumer runs on ``consumer_background_thread``,
  whatever the application calls (poll, commit, committed, position, lookups, metadata,
  close);
- a blocking call that cannot complete fails at its own timeout, and the background
  loop's reaper fails an expired completable event nobody is waiting on (no broker
  answers: the coordinator is never found);
- a ``poll()`` blocked for longer than ``max_poll_interval_ms`` does not let the poll timer
  expire: its waits are bounded by ``maximum_time_to_wait`` (at most half the remaining
  poll timer), so the member keeps its epoch and its partitions.
"""

from __future__ import annotations

import threading
import time

import pytest

from kproto.consumer.background.consumer_network_thread import BACKGROUND_THREAD_NAME
from kproto.consumer.background.member_state import MemberState
from kproto.consumer.kafka_consumer import KafkaConsumer
from kproto.consumer.kip848.events import FetchCommittedOffsetsEvent
from kproto.errors import KafkaTimeoutError
from kproto.net.client import NetworkClient
from kproto.structs import TopicPartition as TP
from tests.integration.kip848.harness import drain
from tests.threads import TestThread

pytestmark = [pytest.mark.broker]

DEADLINE_S = 60
NOWHERE = "127.0.0.1:1"


class Lost:
    """A rebalance listener that remembers lost and revoked partitions."""

    def __init__(self) -> None:
        self.log: list = []

    def on_partitions_revoked(self, partitions) -> None:
        self.log.append(("revoked", sorted(partitions)))

    def on_partitions_assigned(self, partitions) -> None:
        self.log.append(("assigned", sorted(partitions)))

    def on_partitions_lost(self, partitions) -> None:
        self.log.append(("lost", sorted(partitions)))


@pytest.mark.needs("kip848")
def test_the_application_thread_never_does_network_io(broker, monkeypatch) -> None:
    io_threads: set = set()
    real_send, real_poll = NetworkClient.send, NetworkClient.poll

    def send(self, *args, **kwargs):
        io_threads.add(threading.current_thread().name)
        return real_send(self, *args, **kwargs)

    def poll(self, *args, **kwargs):
        io_threads.add(threading.current_thread().name)
        return real_poll(self, *args, **kwargs)

    topic = broker.new_topic(partitions=2, prefix="k848")
    other = broker.new_topic(partitions=3, prefix="k848")
    written = broker.produce(topic, 20)
    # Only the consumer's client is observed: the broker helpers above ran before.
    monkeypatch.setattr(NetworkClient, "send", send)
    monkeypatch.setattr(NetworkClient, "poll", poll)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                             group_protocol="consumer", auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        consumer.subscribe([topic])
        assert drain(consumer, len(written)) == {(r.partition, r.offset) for r in written}
        consumer.commit()
        tp0 = TP(topic, 0)
        end = max(r.offset for r in written if r.partition == 0) + 1
        assert consumer.committed(tp0) == end == consumer.position(tp0)
        assert consumer.end_offsets([tp0]) == {tp0: end}
        assert consumer.beginning_offsets([tp0]) == {tp0: 0}
        assert consumer.partitions_for_topic(other) == {0, 1, 2}  # a metadata fetch
        consumer.commit_async().result(timeout=DEADLINE_S)
    finally:
        consumer.close()
    assert io_threads == {BACKGROUND_THREAD_NAME}


@pytest.mark.needs("kip848")
def test_a_poll_longer_than_max_poll_interval_keeps_the_member(broker) -> None:
    topic = broker.new_topic(partitions=2, prefix="k848")
    written = broker.produce(topic, 6)
    listener = Lost()
    # Fetches wait long on an empty log, so nothing but the maximum-time-to-wait bound
    # brings the blocked poll() back to submit a new poll event (which resets the timer).
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g-" + topic,
                             group_protocol="consumer", auto_offset_reset="earliest",
                             enable_auto_commit=False, max_poll_interval_ms=1000,
                             fetch_max_wait_ms=5000, request_timeout_ms=30000)
    try:
        consumer.subscribe([topic], listener=listener)
        assert drain(consumer, len(written)) == {(r.partition, r.offset) for r in written}
        member = consumer._delegate.membership
        deadline = time.monotonic() + DEADLINE_S
        while member.state is not MemberState.STABLE:
            assert time.monotonic() < deadline
            consumer.poll(timeout_ms=100)
        epoch, owned = member.member_epoch, consumer.assignment()
        states: set = set()
        stop = threading.Event()

        def watch() -> None:  # the member's state as seen while the application is blocked
            while not stop.wait(0.01):
                states.add(member.state)

        watcher = TestThread(target=watch, name="state-watcher", daemon=True)
        watcher.start()
        try:
            assert consumer.poll(timeout_ms=3000) == {}  # three poll intervals, nothing to read
        finally:
            stop.set()
            watcher.join()
        assert MemberState.STALE not in states and MemberState.LEAVING not in states, states
        assert member.state is MemberState.STABLE and member.member_epoch == epoch
        assert consumer.assignment() == owned == {TP(topic, 0), TP(topic, 1)}
        assert not any(name == "lost" for name, _ in listener.log), listener.log
    finally:
        consumer.close()


def test_blocking_calls_time_out_and_expired_events_are_reaped() -> None:
    consumer = KafkaConsumer(bootstrap_servers=NOWHERE, group_id="g", group_protocol="consumer")
    delegate = consumer._delegate
    try:
        with pytest.raises(KafkaTimeoutError):
            consumer.committed(TP("t", 0), timeout_ms=200)
        # An event enqueued without anyone waiting: only the reaper can end it.
        event = FetchCommittedOffsetsEvent([TP("t", 0)], delegate._time_ms() + 200)
        delegate.application_event_handler.add(event)
        error = event.future.exception(timeout=DEADLINE_S)
        assert isinstance(error, KafkaTimeoutError) and "deadline" in str(error)
        deadline = time.monotonic() + DEADLINE_S
        while delegate.network_thread.reaper.size():  # forgotten once failed
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert delegate.network_thread.is_alive()
    finally:
        consumer.close(timeout_ms=0)
