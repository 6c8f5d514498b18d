"""Coordinator, membership and heartbeat managers wired as the network thread wires them, on a
fake clock (the KIP-848 heartbeat tests)."""

from __future__ import annotations

from kproto.consumer.background.coordinator_request_manager import CoordinatorRequestManager
from kproto.consumer.background.events import ErrorEvent, drain
from kproto.consumer.background.member_state import MemberState as S
from kproto.consumer.background.request_manager import RequestBuilder
from kproto.consumer.kip848.consumer_heartbeat_request_manager import ConsumerHeartbeatRequestManager
from kproto.messages import ConsumerGroupHeartbeatRequest, FindCoordinatorResponse
from tests.support.heartbeats import heartbeat_response
from tests.unit.kip848.harness import Harness


MAX_POLL_INTERVAL_MS = 60_000


BACKOFF_MS = 100


class Sent:
    """An UnsentRequest with its message built for ``version`` (and checked encodable)."""

    def __init__(self, unsent, version: int) -> None:
        assert isinstance(unsent.request, RequestBuilder)
        self.request, self.version = unsent.request.build(version)
        self.request.encode(self.version)  # must be valid on the wire
        self.node_id = unsent.node_id
        self.complete = unsent.complete
        self.complete_exceptionally = unsent.complete_exceptionally


class Engine:
    """Coordinator + membership + heartbeat managers wired as the network thread wires them."""

    def __init__(self, *known: str, instance_id=None, server_assignor=None, rack_id=None, subscribe=None) -> None:
        kwargs = {"instance_id": instance_id}
        if subscribe is not None:
            kwargs["subscribe"] = subscribe
        self.h = Harness(*known, **kwargs)
        self.h.manager.server_assignor = server_assignor
        self.h.manager.rack_id = rack_id
        self.h.manager.rebalance_timeout_ms = MAX_POLL_INTERVAL_MS
        self.clock = self.h.clock
        self.coordinator = CoordinatorRequestManager("group-1", BACKOFF_MS, 1000, jitter=0)
        self.heartbeat = ConsumerHeartbeatRequestManager(
            self.clock(), self.coordinator, self.h.manager, self.h.subscriptions,
            self.h.manager.background_event_handler, max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
            retry_backoff_ms=BACKOFF_MS, retry_backoff_max_ms=1000, jitter=0)

    def find_coordinator(self, node_id: int = 3) -> None:
        result = self.coordinator.poll(self.clock())
        (unsent,) = result.unsent_requests
        assert unsent.node_id is None  # the least-loaded node
        unsent.complete(FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
            key="group-1", node_id=node_id, host="127.0.0.1", port=9092)]), self.clock())
        assert self.coordinator.coordinator.node_id == node_id

    def heartbeats(self, version: int = ConsumerGroupHeartbeatRequest.max_version) -> list:
        """The heartbeats a poll produces, built as the network client would at ``version``."""
        return [Sent(unsent, version) for unsent in self.heartbeat.poll(self.clock()).unsent_requests]

    def one_heartbeat(self):
        sent = self.heartbeats()
        assert len(sent) == 1, sent
        return sent[0]

    def answer(self, unsent, **kwargs) -> None:
        kwargs.setdefault("member_id", self.h.manager.member_id)
        unsent.complete(heartbeat_response(**kwargs), self.clock())

    def stable(self, assignment: dict, epoch: int = 1, interval_ms: int = 3000) -> None:
        self.find_coordinator()
        self.h.join()
        self.answer(self.one_heartbeat(), epoch=epoch, assignment=assignment, interval_ms=interval_ms)
        self.h.manager.maybe_reconcile(can_commit=True)
        while self.h.run_application_callbacks():
            pass
        assert self.h.manager.state is S.ACKNOWLEDGING
        self.clock.advance(BACKOFF_MS)  # the floor between two heartbeats
        self.answer(self.one_heartbeat(), epoch=epoch, interval_ms=interval_ms)
        assert self.h.manager.state is S.STABLE

    def errors(self) -> list:
        return [event.error for event in drain(self.h.background_queue) if isinstance(event, ErrorEvent)]
