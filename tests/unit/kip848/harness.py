"""Shared pieces of the KIP-848 sans-IO tests: a recording rebalance listener and the
application thread's side of the callback events (the clock and heartbeat responses are in
tests/support)."""

from __future__ import annotations

import queue
import uuid
from typing import Any, Optional

from kproto.consumer.background.events import BackgroundEventHandler, ErrorEvent, drain
from kproto.consumer.background.member_state import MemberState
from kproto.consumer.kip848.async_kafka_consumer import invoke_rebalance_callbacks
from kproto.consumer.kip848.consumer_membership_manager import ConsumerMembershipManager
from kproto.consumer.kip848.events import ConsumerRebalanceListenerCallbackNeededEvent
from kproto.consumer.rebalance_listener_invoker import ConsumerRebalanceListenerInvoker
from kproto.consumer.subscription_state import SubscriptionState

from tests.support.clock import FakeClock
from tests.support.heartbeats import TOPIC_IDS, heartbeat_response

class RecordingListener:
    """Records every callback, in order, into a shared log (with optional failures)."""

    def __init__(self, log: list, fail: Optional[str] = None) -> None:
        self.log = log
        self.fail = fail

    def _record(self, name: str, partitions: Any) -> None:
        self.log.append((name, sorted(partitions)))
        if self.fail == name:
            raise RuntimeError("callback {} failed".format(name))

    def on_partitions_revoked(self, partitions: Any) -> None:
        self._record("revoked", partitions)

    def on_partitions_assigned(self, partitions: Any) -> None:
        self._record("assigned", partitions)

    def on_partitions_lost(self, partitions: Any) -> None:
        self._record("lost", partitions)


class Metadata:
    """The topic-id -> name view of the cluster metadata the membership manager reads."""

    def __init__(self, *known: str) -> None:
        self.names = {TOPIC_IDS[name]: name for name in known}
        self.update_requests = 0

    def topic_name_for_id(self, topic_id: uuid.UUID) -> Optional[str]:
        return self.names.get(topic_id)

    def request_update(self) -> None:
        self.update_requests += 1

    def learn(self, name: str) -> None:
        self.names[TOPIC_IDS[name]] = name


class Harness:
    """A membership manager with a real SubscriptionState and the app thread's callback loop."""

    def __init__(self, *known_topics: str, listener_log: Optional[list] = None, fail: Optional[str] = None,
                 commit=None, instance_id: Optional[str] = None, subscribe=("alpha", "beta", "gamma")) -> None:
        self.clock = FakeClock()
        self.log: list = listener_log if listener_log is not None else []
        self.background_queue: "queue.Queue" = queue.Queue()
        self.subscriptions = SubscriptionState()
        self.listener = RecordingListener(self.log, fail)
        if subscribe:
            self.subscriptions.subscribe(list(subscribe), self.listener)
        self.metadata = Metadata(*known_topics)
        self.manager = ConsumerMembershipManager(
            "group-1", self.subscriptions, BackgroundEventHandler(self.background_queue),
            topic_name_for_id=self.metadata.topic_name_for_id,
            request_metadata_update=self.metadata.request_update,
            group_instance_id=instance_id, auto_commit_before_rebalance=commit, time_ms=self.clock)
        self.errors: list = []
        self.listener_invoker = ConsumerRebalanceListenerInvoker(self.subscriptions, self.clock)

    def run_application_callbacks(self) -> int:
        """Do what the application thread does with background events; returns how many ran."""
        ran = 0
        for event in drain(self.background_queue):
            if isinstance(event, ConsumerRebalanceListenerCallbackNeededEvent):
                # The listener's error goes back with the completion, which crosses back as an
                # application event, processed by the background thread (here: directly).
                completed = invoke_rebalance_callbacks(self.listener_invoker, event)
                ran += 1
                self.manager.consumer_rebalance_listener_callback_completed(completed)
            elif isinstance(event, ErrorEvent):
                self.errors.append(event.error)
        return ran

    def join(self) -> None:
        self.manager.on_subscription_updated()
        self.manager.on_consumer_poll()

    def owned(self) -> list:
        return sorted(self.subscriptions.assigned_partitions())

    def stable_with(self, assignment: dict, epoch: int = 1) -> None:
        """Join, take ``assignment`` at ``epoch``, run its callbacks and acknowledge: STABLE."""
        self.join()
        self.manager.on_heartbeat_success(heartbeat_response(self.manager.member_id, epoch=epoch,
                                                             assignment=assignment))
        self.manager.maybe_reconcile(can_commit=True)
        while self.run_application_callbacks():
            pass
        self.manager.on_heartbeat_request_generated()
        assert self.manager.state is MemberState.STABLE
