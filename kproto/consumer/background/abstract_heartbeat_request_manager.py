"""The heartbeat of a KIP-848-style group, whatever the group type (Java's
``AbstractHeartbeatRequestManager``).

Owns when a heartbeat is sent (the broker-given interval; at once for the first heartbeat
of a join, an acknowledgement and a leave; backoff after failures; never two in flight and
never two less than ``retry_backoff_ms`` apart, whatever the member state:
``HeartbeatRequestState``),
how its response or failure is handled (the error table below), and the poll timer:
``max_poll_interval_ms`` without an application ``poll()`` sends a leave heartbeat and
makes the member STALE until the next poll. A group type (the consumer's:
``kproto.consumer.kip848.consumer_heartbeat_request_manager``) builds the request, keeps
what the last one carried (``reset_heartbeat_state``), names its fatal errors and what
UNSUPPORTED_VERSION means.

Error handling (``_on_error_response``):

- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: forget the coordinator, rediscover it, then
  heartbeat again without backoff;
- COORDINATOR_LOAD_IN_PROGRESS: retry after backoff;
- UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: the member is fenced (partitions lost, rejoin);
- TOPIC_AUTHORIZATION_FAILED: surfaced to the application, the member stays as it is and
  heartbeats again after the backoff;
- UNSUPPORTED_VERSION: fatal, as ``unsupported_version_error`` words it;
- GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST, GROUP_MAX_SIZE_REACHED, the group type's
  ``fatal_errors`` and anything unknown: fatal, surfaced to the application as an ErrorEvent.

After any error the next heartbeat carries the full state again.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from kproto.consumer.background.abstract_membership_manager import AbstractMembershipManager
from kproto.consumer.background.coordinator_request_manager import CoordinatorRequestManager
from kproto.consumer.background.events import BackgroundEventHandler, ErrorEvent
from kproto.consumer.background.member_state import MemberState
from kproto.consumer.background.request_manager import PollResult, RequestState, UnsentRequest
from kproto.consumer.background.timer import Timer
from kproto.errors import ErrorCode, UnsupportedVersionError, exception_for, for_code

log = logging.getLogger("kproto.kip848")

_FATAL_ERRORS = frozenset({ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.INVALID_REQUEST,
                           ErrorCode.GROUP_MAX_SIZE_REACHED})


class HeartbeatRequestState(RequestState):
    """RequestState plus the heartbeat interval timer and the spacing floor.

    The floor (``remaining_spacing_ms``): two heartbeats are never sent less than
    ``retry_backoff_ms`` apart, whatever the member state asks for and whatever reset the
    interval and the backoff (``reset`` leaves it alone). Java has no such floor; it is the
    last line against a state that asks for a heartbeat "now" on every answer.
    """

    def __init__(self, owner: str, now_ms: int, heartbeat_interval_ms: int, retry_backoff_ms: int,
                 retry_backoff_max_ms: int, jitter: float) -> None:
        super().__init__(owner, retry_backoff_ms, retry_backoff_max_ms, jitter)
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.heartbeat_timer = Timer(now_ms, heartbeat_interval_ms)
        self.min_spacing_ms = retry_backoff_ms
        self._spacing_timer = Timer(now_ms, 0)

    def remaining_spacing_ms(self, now_ms: int) -> int:
        """How long until the floor lets the next heartbeat out (0: it may go now)."""
        self._spacing_timer.update(now_ms)
        return self._spacing_timer.remaining_ms()

    def on_send_attempt(self, now_ms: int) -> None:
        super().on_send_attempt(now_ms)
        self._spacing_timer.update_and_reset(now_ms, self.min_spacing_ms)
        # reset_timer() starts the interval at the timer's last update: make that now. A
        # heartbeat sent "now" skips can_send_request (the only other update), and the
        # interval then ran from an older time: the next heartbeat came early.
        self.heartbeat_timer.update(now_ms)

    def on_successful_attempt(self, now_ms: int) -> None:
        super().on_successful_attempt(now_ms)
        self.heartbeat_timer.update(now_ms)  # the interval restarts at the answer (reset_timer)

    def can_send_request(self, now_ms: int) -> bool:
        self.heartbeat_timer.update(now_ms)
        return self.heartbeat_timer.is_expired() and self.remaining_spacing_ms(now_ms) == 0 and \
            super().can_send_request(now_ms)

    def reset(self) -> None:
        """No backoff and no interval: the next heartbeat may go out at once."""
        super().reset()
        self.heartbeat_timer.reset(0)

    def reset_timer(self) -> None:
        self.heartbeat_timer.reset(self.heartbeat_interval_ms)

    def time_to_next_heartbeat_ms(self, now_ms: int) -> int:
        self.heartbeat_timer.update(now_ms)
        if self.heartbeat_timer.is_expired():
            return max(self.remaining_backoff_ms(now_ms), self.remaining_spacing_ms(now_ms))
        return max(self.heartbeat_timer.remaining_ms(), self.remaining_spacing_ms(now_ms))

    def on_failed_attempt(self, now_ms: int) -> None:
        # The next heartbeat waits for the backoff, not the interval: it may be needed soon
        # (a retry) or at once (a rejoin after fencing).
        self.heartbeat_timer.update_and_reset(now_ms, 0)
        super().on_failed_attempt(now_ms)

    def update_heartbeat_interval_ms(self, interval_ms: int) -> None:
        if interval_ms <= 0 or interval_ms == self.heartbeat_interval_ms:
            return
        self.heartbeat_interval_ms = interval_ms
        self.heartbeat_timer.reset(interval_ms)


class AbstractHeartbeatRequestManager:
    """Sends a group's heartbeats to the coordinator and owns the poll timer; a group type
    supplies the request (``build_heartbeat_request``) and its own answers."""

    #: The heartbeat API, as the logs name it.
    heartbeat_api = "heartbeat"
    #: Error codes that make the member FATAL; a group type adds its own.
    fatal_errors = _FATAL_ERRORS

    def __init__(self, now_ms: int, coordinator_request_manager: CoordinatorRequestManager,
                 membership_manager: AbstractMembershipManager,
                 background_event_handler: BackgroundEventHandler, *, max_poll_interval_ms: int = 300000,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000,
                 jitter: float = RequestState.RETRY_BACKOFF_JITTER) -> None:
        self.coordinator_request_manager = coordinator_request_manager
        self.membership_manager = membership_manager
        self.background_event_handler = background_event_handler
        self.max_poll_interval_ms = max_poll_interval_ms
        self._retry_backoff_ms = retry_backoff_ms
        # Interval 0 until the broker says otherwise: the first heartbeat goes out at once.
        self.heartbeat_request_state = HeartbeatRequestState(self.heartbeat_api, now_ms, 0, retry_backoff_ms,
                                                             retry_backoff_max_ms, jitter)
        self.poll_timer = Timer(now_ms, max_poll_interval_ms)
        #: CoordinatorMetrics (None: metrics off): heartbeat-* and last-heartbeat-seconds-ago.
        self.sensors: Any = None

    # --- what a group type adds (Java's abstract methods) ----------------------------------------

    def build_heartbeat_request(self) -> Any:
        """The next heartbeat: a message object or a ``RequestBuilder``."""
        raise NotImplementedError

    def reset_heartbeat_state(self) -> None:
        """After an error or a leave: the next heartbeat carries the member's full state."""

    def unsupported_version_error(self, cause: Optional[BaseException], message: Optional[str]) -> BaseException:
        """What UNSUPPORTED_VERSION (an answer: ``cause`` None; or a coordinator without the
        API: ``cause``) is raised as to the application."""
        return cause if cause is not None else UnsupportedVersionError(message or self.heartbeat_api)

    # --- the request manager contract ------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        membership = self.membership_manager
        coordinator = self.coordinator_request_manager.coordinator
        if coordinator is None or membership.should_skip_heartbeat():
            membership.on_heartbeat_request_skipped()
            self._maybe_propagate_coordinator_fatal_error()
            return PollResult.EMPTY  # type: ignore[attr-defined]

        state = self.heartbeat_request_state
        spacing_ms = state.remaining_spacing_ms(now_ms)
        if spacing_ms > 0:
            # The floor holds whatever the member state asks for (a leave included).
            return PollResult(spacing_ms)

        self.poll_timer.update(now_ms)
        if self.poll_timer.is_expired() and not membership.is_leaving_group():
            log.warning("Consumer poll timeout has expired. The time between calls to poll() was longer "
                        "than max_poll_interval_ms (%d ms), which typically means the poll loop spends "
                        "too long processing records. Increase max_poll_interval_ms or reduce "
                        "max_poll_records. The member leaves the group and rejoins on the next poll().",
                        self.max_poll_interval_ms)
            membership.transition_to_sending_leave_group(due_to_expired_poll_timer=True)
            leave = self._make_heartbeat_request(now_ms, coordinator.node_id, ignore_response=True)
            # The member may rejoin before or after the leave's response: send the next
            # heartbeat (the rejoin) without waiting for it, and with the full state.
            self.heartbeat_request_state.reset()
            self.reset_heartbeat_state()
            return PollResult(self.heartbeat_request_state.heartbeat_interval_ms, [leave])

        heartbeat_now = membership.state is MemberState.LEAVING or (
            membership.should_heartbeat_now() and not state.request_in_flight())
        if not heartbeat_now and not state.can_send_request(now_ms):
            if state.request_in_flight():
                # The response wakes the network step; no need to spin until it arrives.
                return PollResult(max(state.heartbeat_interval_ms, self._retry_backoff_ms))
            return PollResult(state.time_to_next_heartbeat_ms(now_ms))
        request = self._make_heartbeat_request(now_ms, coordinator.node_id, ignore_response=False)
        return PollResult(state.heartbeat_interval_ms, [request])

    def poll_on_close(self, now_ms: int) -> PollResult:
        """Java's pollOnClose: the leave heartbeat of a member closed while still leaving.

        A member still in PREPARE_LEAVING (close's deadline passed before the application
        ran the revocation callback) enters LEAVING here, so the last heartbeat is a leave
        (Java would send its current epoch); the callback can no longer run anyway.
        """
        membership = self.membership_manager
        coordinator = self.coordinator_request_manager.coordinator
        if coordinator is None or not membership.is_leaving_group():
            return PollResult.EMPTY  # type: ignore[attr-defined]
        if membership.state is MemberState.PREPARE_LEAVING:
            membership.transition_to_sending_leave_group(due_to_expired_poll_timer=False)
        leave = self._make_heartbeat_request(now_ms, coordinator.node_id, ignore_response=True)
        return PollResult(self.heartbeat_request_state.heartbeat_interval_ms, [leave])

    def maximum_time_to_wait(self, now_ms: int) -> int:
        """At most half the poll timer's remaining time, so it never expires while blocked."""
        self.poll_timer.update(now_ms)
        membership = self.membership_manager
        can_heartbeat = self.coordinator_request_manager.coordinator is not None and \
            not membership.should_skip_heartbeat()
        state = self.heartbeat_request_state
        if self.poll_timer.is_expired():
            # The leave heartbeat is due (held back by the spacing floor at most).
            return state.remaining_spacing_ms(now_ms) if can_heartbeat else 0
        half_poll = self.poll_timer.remaining_ms() // 2
        if not can_heartbeat:
            return half_poll
        if state.request_in_flight():
            return half_poll
        if membership.should_heartbeat_now():
            return min(half_poll, state.remaining_spacing_ms(now_ms))
        return min(half_poll, state.time_to_next_heartbeat_ms(now_ms))

    def reset_poll_timer(self, poll_ms: int) -> None:
        """The application polled (AsyncPollEvent): restart the timer, rejoin if it had expired."""
        self.poll_timer.update(poll_ms)
        if self.poll_timer.is_expired():
            log.warning("Time between calls to poll() exceeded max_poll_interval_ms by about %d ms; "
                        "member %s will rejoin the group now.", self.poll_timer.is_expired_by(),
                        self.membership_manager.member_id)
            self.membership_manager.maybe_rejoin_stale_member()
        self.poll_timer.reset(self.max_poll_interval_ms)

    # --- requests and responses ----------------------------------------------------------------

    def _make_heartbeat_request(self, now_ms: int, node_id: int, ignore_response: bool) -> UnsentRequest:
        unsent = UnsentRequest(self.build_heartbeat_request(), node_id)
        if ignore_response:
            unsent.when_complete(lambda response, error: log.debug(
                "Response to the leave heartbeat (ignored): %s", error if error is not None else response))
        else:
            def _on_complete(response: Any, error: Optional[BaseException]) -> None:
                done_ms = unsent.completion_time_ms if unsent.completion_time_ms is not None else now_ms
                if error is not None:
                    self._on_failure(error, done_ms)
                else:
                    if self.sensors is not None:
                        self.sensors.record_heartbeat(done_ms - now_ms)
                    self._on_response(response, done_ms)

            unsent.when_complete(_on_complete)
        self.heartbeat_request_state.on_send_attempt(now_ms)
        if self.sensors is not None:
            self.sensors.heartbeat_sent()
        self.membership_manager.on_heartbeat_request_generated()
        self.heartbeat_request_state.reset_timer()
        return unsent

    def _on_response(self, response: Any, now_ms: int) -> None:
        if response.error_code == ErrorCode.NONE:
            self.heartbeat_request_state.update_heartbeat_interval_ms(response.heartbeat_interval_ms)
            self.heartbeat_request_state.on_successful_attempt(now_ms)
            self.heartbeat_request_state.reset_timer()
            self.membership_manager.on_heartbeat_success(response)
            return
        self._on_error_response(response, now_ms)

    def _on_failure(self, error: BaseException, now_ms: int) -> None:
        """The request failed without a response (disconnect, timeout, unsupported API)."""
        self.heartbeat_request_state.on_failed_attempt(now_ms)
        self.reset_heartbeat_state()
        retriable = bool(getattr(error, "retriable", False))
        if retriable:
            self.coordinator_request_manager.handle_coordinator_disconnect(error, now_ms)
            log.info("%s failed with a retriable error, will retry in %d ms: %s", self.heartbeat_api,
                     self.heartbeat_request_state.remaining_backoff_ms(now_ms), error)
        else:
            log.error("%s failed with a fatal error: %s", self.heartbeat_api, error)
            if isinstance(error, UnsupportedVersionError):
                error = self.unsupported_version_error(error, str(error))
            self._handle_fatal_failure(error)
        self.membership_manager.on_heartbeat_failure(retriable)

    def _on_error_response(self, response: Any, now_ms: int) -> None:
        code = response.error_code
        name = for_code(code).message  # the enum name, for the logs
        message = response.error_message
        state = self.heartbeat_request_state
        membership = self.membership_manager
        # Every error answer ends the request and starts the backoff (Java's onErrorResponse);
        # coordinator and fencing errors then drop the backoff. Without it, an error that
        # keeps the member (TOPIC_AUTHORIZATION_FAILED) left the request "in flight" forever.
        state.on_failed_attempt(now_ms)
        if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            log.info("%s failed with %s; rediscovering the coordinator", self.heartbeat_api, name)
            self.coordinator_request_manager.mark_coordinator_unknown(name, now_ms)
            # No backoff: heartbeat as soon as the coordinator is found again.
            state.reset()
        elif code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            log.info("%s: the coordinator is still loading; retrying after backoff", self.heartbeat_api)
        elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            log.info("%s: member %s with epoch %s is fenced (%s)", self.heartbeat_api,
                     membership.member_id, membership.member_epoch, name)
            membership.transition_to_fenced()
            # No backoff: rejoin as soon as the lost partitions are released.
            state.reset()
        elif code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            # Surfaced on poll(); the member stays as it is and recovers once ACLs allow it.
            log.error("%s failed: %s %s", self.heartbeat_api, name, message or "")
            self.background_event_handler.add(ErrorEvent(exception_for(code, message)))
        elif code == ErrorCode.UNSUPPORTED_VERSION:
            log.error("%s failed with %s: %s", self.heartbeat_api, name, message or "")
            self._handle_fatal_failure(self.unsupported_version_error(None, message))
        else:
            if code not in self.fatal_errors:
                log.error("%s failed with an unexpected error %s", self.heartbeat_api, name)
            else:
                log.error("%s failed with %s: %s", self.heartbeat_api, name, message or "")
            self._handle_fatal_failure(exception_for(code, message))
        # The broker may not have taken the last fields: send everything next time.
        self.reset_heartbeat_state()
        membership.on_heartbeat_failure(False)

    def _handle_fatal_failure(self, error: BaseException) -> None:
        self.background_event_handler.add(ErrorEvent(error))
        if self.membership_manager.state is not MemberState.FATAL:
            self.membership_manager.transition_to_fatal()

    def _maybe_propagate_coordinator_fatal_error(self) -> None:
        error = self.coordinator_request_manager.get_and_clear_fatal_error()
        if error is not None:
            self.background_event_handler.add(ErrorEvent(error))
