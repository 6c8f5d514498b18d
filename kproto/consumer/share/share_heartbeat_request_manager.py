"""ShareGroupHeartbeat (Java's ``ShareHeartbeatRequestManager``).

Owns when a heartbeat goes out (at once while joining, leaving or after a subscription
change, otherwise every ``heartbeat_interval_ms`` the coordinator gives; never two in
flight; backoff after failures), what it carries (the membership manager's epoch and, when
they changed or on a join, the subscribed topic names) and how answers are handled:

- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: forget the coordinator and heartbeat again
  once it is found; COORDINATOR_LOAD_IN_PROGRESS and a lost connection: retry after backoff;
- UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: the member is fenced: its assignment is dropped
  and it rejoins at epoch 0 with the same member id;
- anything else (GROUP_AUTHORIZATION_FAILED, GROUP_MAX_SIZE_REACHED, INVALID_REQUEST,
  UNSUPPORTED_VERSION, ...): fatal, surfaced to the application as an ErrorEvent.

A leave heartbeat (epoch -1) is sent once; its answer or failure completes the leave.

The poll timer, as Java's: ``max_poll_interval_ms`` without an application ``poll()`` makes
the member leave the group (its records are released to the others) and it stays out
(STALE) until the next ``poll()``, which rejoins with the same member id.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from kproto.consumer.background.coordinator_request_manager import CoordinatorRequestManager
from kproto.consumer.background.events import BackgroundEventHandler, ErrorEvent
from kproto.consumer.background.request_manager import MAX_WAIT_MS, PollResult, RequestState, UnsentRequest
from kproto.consumer.background.timer import Timer
from kproto.consumer.share.share_membership_manager import ShareMembershipManager, ShareMemberState
from kproto.errors import UnsupportedVersionError, error_for, for_code
from kproto.messages import ShareGroupHeartbeatRequest

log = logging.getLogger("kproto.share")

DEFAULT_HEARTBEAT_INTERVAL_MS = 5000


class ShareHeartbeatRequestManager:
    def __init__(self, now_ms: int, coordinator: CoordinatorRequestManager, membership: ShareMembershipManager,
                 background_event_handler: BackgroundEventHandler, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 1000,
                 request_metadata_update: Callable[[], Any] = lambda: None,
                 max_poll_interval_ms: int = 300000) -> None:
        self.coordinator = coordinator
        self.membership = membership
        self.background_event_handler = background_event_handler
        self.request_state = RequestState("ShareGroupHeartbeat", retry_backoff_ms, retry_backoff_max_ms)
        self.heartbeat_interval_ms = DEFAULT_HEARTBEAT_INTERVAL_MS
        self._next_heartbeat_ms = now_ms
        self._request_metadata_update = request_metadata_update
        self.heartbeats_sent = 0
        self.max_poll_interval_ms = max_poll_interval_ms
        self.poll_timer = Timer(now_ms, max_poll_interval_ms)
        self.stale = False  # left because the application stopped polling

    def reset_poll_timer(self, now_ms: int) -> None:
        """The application polled: restart the timer; a STALE member rejoins."""
        self.poll_timer.update_and_reset(now_ms, self.max_poll_interval_ms)
        if self.stale:
            self.stale = False
            log.info("Share member %s rejoins group %s after polling again", self.membership.member_id,
                     self.membership.group_id)
            self.membership.subscribe(self.membership.subscribed_topics)

    def poll(self, now_ms: int) -> PollResult:
        membership = self.membership
        if not membership.is_active():
            return PollResult.EMPTY  # type: ignore[attr-defined]
        self.poll_timer.update(now_ms)
        if self.poll_timer.is_expired() and not self.stale and membership.state is not ShareMemberState.LEAVING:
            log.warning("consumer poll timeout has expired: the time between calls to poll() was longer than "
                        "max_poll_interval_ms (%d ms); share member %s leaves the group until the next poll()",
                        self.max_poll_interval_ms, membership.member_id)
            self.stale = True
            membership.leave_group()
            if not membership.is_active():
                return PollResult.EMPTY  # type: ignore[attr-defined]
        error = self.coordinator.get_and_clear_fatal_error()
        if error is not None:
            membership.on_fatal(error)
            self.background_event_handler.add(ErrorEvent(error))
            return PollResult.EMPTY  # type: ignore[attr-defined]
        coordinator = self.coordinator.coordinator
        if coordinator is None:
            return PollResult.EMPTY  # type: ignore[attr-defined]  # the coordinator manager looks for it
        if not self.request_state.can_send_request(now_ms):
            return PollResult(self.request_state.remaining_backoff_ms(now_ms)
                              if not self.request_state.request_in_flight() else MAX_WAIT_MS)
        if not membership.should_heartbeat_now() and now_ms < self._next_heartbeat_ms:
            return PollResult(self._next_heartbeat_ms - now_ms)
        return PollResult(self.heartbeat_interval_ms, [self._make_heartbeat(coordinator.node_id, now_ms)])

    def maximum_time_to_wait(self, now_ms: int) -> int:
        if not self.membership.is_active() or self.request_state.request_in_flight():
            return MAX_WAIT_MS
        if self.membership.should_heartbeat_now():
            return 0
        self.poll_timer.update(now_ms)
        return max(0, min(self._next_heartbeat_ms - now_ms, self.poll_timer.remaining_ms()))

    def _make_heartbeat(self, node_id: int, now_ms: int) -> UnsentRequest:
        membership = self.membership
        request = ShareGroupHeartbeatRequest(
            group_id=membership.group_id, member_id=membership.member_id,
            member_epoch=membership.member_epoch_to_send(), rack_id=membership.rack_id,
            subscribed_topic_names=membership.topic_names_to_send())
        membership.on_heartbeat_sent()
        self.request_state.on_send_attempt(now_ms)
        self.heartbeats_sent += 1
        unsent = UnsentRequest(request, node_id)

        def _on_complete(response: Any, error: Optional[BaseException]) -> None:
            done_ms = unsent.completion_time_ms if unsent.completion_time_ms is not None else now_ms
            if error is not None:
                self._on_failure(error, done_ms)
            else:
                self._on_response(response, done_ms)

        return unsent.when_complete(_on_complete)

    def _on_failure(self, error: BaseException, now_ms: int) -> None:
        log.debug("ShareGroupHeartbeat failed: %s", error)
        self.request_state.on_failed_attempt(now_ms)
        if isinstance(error, UnsupportedVersionError):
            # The coordinator has no ShareGroupHeartbeat (v1, Kafka 4.1+): no share groups there.
            fatal = UnsupportedVersionError("the group coordinator does not support share groups "
                                            "(ShareGroupHeartbeat v1, Kafka 4.1+): {}".format(error))
            self.membership.on_fatal(fatal)
            self.background_event_handler.add(ErrorEvent(fatal))
            return
        self.coordinator.handle_coordinator_disconnect(error, now_ms)
        self.membership.on_heartbeat_failure()

    def _on_response(self, response: Any, now_ms: int) -> None:
        code = response.error_code
        if code == 0:
            self.request_state.on_successful_attempt(now_ms)
            if response.heartbeat_interval_ms > 0:
                self.heartbeat_interval_ms = response.heartbeat_interval_ms
            self._next_heartbeat_ms = now_ms + self.heartbeat_interval_ms
            self.membership.on_heartbeat_success(response)
            if self.membership.unresolved_topic_ids():
                self._request_metadata_update()  # assigned topics the metadata does not name yet
            return
        name = for_code(code).message
        error = error_for(code, response.error_message)
        assert error is not None  # code != 0
        log.info("ShareGroupHeartbeat of %s failed: %s", self.membership.member_id, error)
        if name in ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"):
            self.coordinator.mark_coordinator_unknown(str(error), now_ms)
            self.request_state.reset()
            self.membership.on_heartbeat_failure()
        elif name == "COORDINATOR_LOAD_IN_PROGRESS":
            self.request_state.on_failed_attempt(now_ms)
            self.membership.on_heartbeat_failure()
        elif name in ("UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH"):
            self.request_state.reset()
            self.membership.on_fenced()
        else:
            self.request_state.on_failed_attempt(now_ms)
            self.membership.on_fatal(error)
            self.background_event_handler.add(ErrorEvent(error))
