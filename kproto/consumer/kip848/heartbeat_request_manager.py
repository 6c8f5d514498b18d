"""ConsumerGroupHeartbeat for the KIP-848 engine (Java's ``ConsumerHeartbeatRequestManager``).

Owns when a heartbeat is sent (the broker-given interval, at once while JOINING /
ACKNOWLEDGING / LEAVING, backoff after failures, never two in flight), what it carries
(``HeartbeatState``: every field on a (re)join, afterwards only the fields that changed
since the last one sent), how its response or failure is handled (the error table below),
and the poll timer: ``max_poll_interval_ms`` without an application ``poll()`` sends a
leave heartbeat and makes the member STALE until the next poll.

Error handling (``_on_error_response``):

- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: forget the coordinator, rediscover it, then
  heartbeat again without backoff;
- COORDINATOR_LOAD_IN_PROGRESS: retry after backoff;
- UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: the member is fenced (partitions lost, rejoin);
- TOPIC_AUTHORIZATION_FAILED: surfaced to the application, the member stays as it is and
  heartbeats again after the backoff;
- GROUP_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION, INVALID_REQUEST, GROUP_MAX_SIZE_REACHED,
  UNSUPPORTED_ASSIGNOR, UNRELEASED_INSTANCE_ID, INVALID_REGULAR_EXPRESSION and anything
  unknown: fatal, surfaced to the application as an ErrorEvent.

UnsupportedVersionError (an UNSUPPORTED_VERSION answer, or a coordinator without the API)
says "KIP-848 is unavailable, use the classic protocol", except when it is about the regex
(a regex string needs ConsumerGroupHeartbeat v1, Kafka 3.x speaks v0): that is reported as
such, since KIP-848 with topic names (or a client-matched compiled pattern) works there.

After any error the next heartbeat carries the full state again.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from kproto.consumer.background.coordinator_request_manager import CoordinatorRequestManager
from kproto.consumer.background.events import BackgroundEventHandler, ErrorEvent
from kproto.consumer.background.member_state import MemberState
from kproto.consumer.background.request_manager import PollResult, RequestBuilder, RequestState, UnsentRequest
from kproto.consumer.background.timer import Timer
from kproto.consumer.kip848.consumer_membership_manager import ConsumerMembershipManager
from kproto.consumer.subscription_state import SubscriptionType
from kproto.errors import ErrorCode, UnsupportedVersionError, error_for, for_code
from kproto.messages import ConsumerGroupHeartbeatRequest

log = logging.getLogger("kproto.kip848")

CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG = (
    "The cluster does not support the new consumer group protocol (KIP-848). Set "
    "group_protocol='classic' to use the classic group protocol.")
# A subscription to a regex string (evaluated by the broker) on a coordinator speaking
# ConsumerGroupHeartbeat v0 only (Kafka 3.x): KIP-848 works there, the regex does not.
REGEX_RESOLUTION_NOT_SUPPORTED_MSG = (
    "The cluster does not support regular expressions resolution on ConsumerGroupHeartbeat v0; "
    "subscribing to a regex string needs ConsumerGroupHeartbeat v1 (Kafka 4.0+). Subscribe to "
    "a list of topics or to a compiled re.Pattern (matched by the client) instead.")

_FATAL_ERRORS = frozenset({
    ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.INVALID_REQUEST, ErrorCode.GROUP_MAX_SIZE_REACHED,
    ErrorCode.UNSUPPORTED_ASSIGNOR, ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.INVALID_REGULAR_EXPRESSION})


class HeartbeatRequestState(RequestState):
    """RequestState plus the heartbeat interval timer."""

    def __init__(self, now_ms: int, heartbeat_interval_ms: int, retry_backoff_ms: int,
                 retry_backoff_max_ms: int, jitter: float) -> None:
        super().__init__("ConsumerGroupHeartbeat", retry_backoff_ms, retry_backoff_max_ms, jitter)
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.heartbeat_timer = Timer(now_ms, heartbeat_interval_ms)

    def can_send_request(self, now_ms: int) -> bool:
        self.heartbeat_timer.update(now_ms)
        return self.heartbeat_timer.is_expired() and super().can_send_request(now_ms)

    def reset(self) -> None:
        """No backoff and no interval: the next heartbeat may go out at once."""
        super().reset()
        self.heartbeat_timer.reset(0)

    def reset_timer(self) -> None:
        self.heartbeat_timer.reset(self.heartbeat_interval_ms)

    def time_to_next_heartbeat_ms(self, now_ms: int) -> int:
        self.heartbeat_timer.update(now_ms)
        if self.heartbeat_timer.is_expired():
            return self.remaining_backoff_ms(now_ms)
        return self.heartbeat_timer.remaining_ms()

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


class _SentFields:
    __slots__ = ("rebalance_timeout_ms", "subscribed_topic_names", "pattern", "server_assignor",
                 "rack_id", "local_assignment")

    def __init__(self) -> None:
        self.rebalance_timeout_ms: Optional[int] = None
        self.subscribed_topic_names: Optional[frozenset[str]] = None
        self.pattern: Optional[str] = None
        self.server_assignor: Optional[str] = None
        self.rack_id: Optional[str] = None
        self.local_assignment: Any = None


class HeartbeatState:
    """Builds each heartbeat: the full state on (re)join, then only what changed.

    group_id, member_id and member_epoch are always sent (and instance_id when set); the
    other fields are sent when JOINING, after ``reset()`` (any error), or when they
    differ from what was last sent. The owned partitions are resent whenever the local
    assignment changes, including an acknowledgement of the same partitions.
    """

    def __init__(self, subscriptions: Any, membership: ConsumerMembershipManager) -> None:
        self.subscriptions = subscriptions
        self.membership = membership
        self.sent_fields = _SentFields()

    def reset(self) -> None:
        self.sent_fields = _SentFields()

    def build_request(self) -> ConsumerGroupHeartbeatRequest:
        m = self.membership
        sent = self.sent_fields
        send_all = m.state is MemberState.JOINING
        request = ConsumerGroupHeartbeatRequest(
            group_id=m.group_id, member_id=m.member_id, member_epoch=m.member_epoch,
            instance_id=m.group_instance_id)
        if m.member_epoch < 0:
            # A leave heartbeat: the coordinator needs nothing else (and the subscription
            # may already be cleared).
            return request

        if send_all or sent.rebalance_timeout_ms != m.rebalance_timeout_ms:
            request.rebalance_timeout_ms = m.rebalance_timeout_ms
            sent.rebalance_timeout_ms = m.rebalance_timeout_ms

        topics = frozenset(self.subscriptions.subscription())
        if send_all or topics != sent.subscribed_topic_names:
            request.subscribed_topic_names = sorted(topics)
            sent.subscribed_topic_names = topics

        pattern = None
        if self.subscriptions.subscription_type is SubscriptionType.AUTO_PATTERN_RE2J:
            pattern = self.subscriptions.subscribed_pattern().pattern
        if (send_all and pattern is not None) or pattern != sent.pattern:
            # An empty regex tells the broker a previous pattern subscription is gone.
            request.subscribed_topic_regex = pattern if pattern is not None else ""
            sent.pattern = pattern

        if m.server_assignor is not None and (send_all or m.server_assignor != sent.server_assignor):
            request.server_assignor = m.server_assignor
            sent.server_assignor = m.server_assignor

        if send_all or m.rack_id != sent.rack_id:
            request.rack_id = m.rack_id
            sent.rack_id = m.rack_id

        local = m.current_assignment
        if send_all or local != sent.local_assignment:
            request.topic_partitions = [
                ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=topic_id, partitions=sorted(parts))
                for topic_id, parts in sorted(local.partitions.items(), key=lambda item: str(item[0]))]
            sent.local_assignment = local
        return request


def for_version(request: ConsumerGroupHeartbeatRequest, version: int) -> ConsumerGroupHeartbeatRequest:
    """Adjust the subscription fields to the version the coordinator speaks.

    From v1 the topic names and the regex travel together (an empty regex means "none"):
    librdkafka's mock coordinator insists on it and Kafka accepts it. v0 has no regex.
    """
    if version >= 1:
        if request.subscribed_topic_names is not None and request.subscribed_topic_regex is None:
            request.subscribed_topic_regex = ""
        elif request.subscribed_topic_regex is not None and request.subscribed_topic_names is None:
            request.subscribed_topic_names = []
    elif request.subscribed_topic_regex:
        raise UnsupportedVersionError(REGEX_RESOLUTION_NOT_SUPPORTED_MSG)
    else:
        request.subscribed_topic_regex = None
    return request


def _is_regex_unsupported(message: str) -> bool:
    # Java's wording (and ours) of "this coordinator cannot take the regex".
    return "regular expressions resolution" in message


class ConsumerHeartbeatRequestManager:
    """Sends ConsumerGroupHeartbeat to the coordinator and owns the poll timer."""

    def __init__(self, now_ms: int, coordinator_request_manager: CoordinatorRequestManager,
                 membership_manager: ConsumerMembershipManager, subscriptions: Any,
                 background_event_handler: BackgroundEventHandler, *, max_poll_interval_ms: int = 300000,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000,
                 jitter: float = RequestState.RETRY_BACKOFF_JITTER) -> None:
        self.coordinator_request_manager = coordinator_request_manager
        self.membership_manager = membership_manager
        self.background_event_handler = background_event_handler
        self.max_poll_interval_ms = max_poll_interval_ms
        self._retry_backoff_ms = retry_backoff_ms
        # Interval 0 until the broker says otherwise: the first heartbeat goes out at once.
        self.heartbeat_request_state = HeartbeatRequestState(now_ms, 0, retry_backoff_ms,
                                                             retry_backoff_max_ms, jitter)
        self.heartbeat_state = HeartbeatState(subscriptions, membership_manager)
        self.poll_timer = Timer(now_ms, max_poll_interval_ms)
        #: CoordinatorMetrics (None: metrics off): heartbeat-* and last-heartbeat-seconds-ago.
        self.sensors: Any = None

    # --- the request manager contract ------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        membership = self.membership_manager
        coordinator = self.coordinator_request_manager.coordinator
        if coordinator is None or membership.should_skip_heartbeat():
            membership.on_heartbeat_request_skipped()
            self._maybe_propagate_coordinator_fatal_error()
            return PollResult.EMPTY  # type: ignore[attr-defined]

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
            self.heartbeat_state.reset()
            return PollResult(self.heartbeat_request_state.heartbeat_interval_ms, [leave])

        state = self.heartbeat_request_state
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
        if self.poll_timer.is_expired():
            return 0
        half_poll = self.poll_timer.remaining_ms() // 2
        if not can_heartbeat:
            return half_poll
        if self.heartbeat_request_state.request_in_flight():
            return half_poll
        if membership.should_heartbeat_now():
            return 0
        return min(half_poll, self.heartbeat_request_state.time_to_next_heartbeat_ms(now_ms))

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
        request = self.heartbeat_state.build_request()
        unsent = UnsentRequest(RequestBuilder(ConsumerGroupHeartbeatRequest,
                                              lambda version: (for_version(request, version), version)), node_id)
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
        self.heartbeat_state.reset()
        retriable = bool(getattr(error, "retriable", False))
        if retriable:
            self.coordinator_request_manager.handle_coordinator_disconnect(error, now_ms)
            log.info("ConsumerGroupHeartbeat failed with a retriable error, will retry in %d ms: %s",
                     self.heartbeat_request_state.remaining_backoff_ms(now_ms), error)
        else:
            log.error("ConsumerGroupHeartbeat failed with a fatal error: %s", error)
            if isinstance(error, UnsupportedVersionError) and not _is_regex_unsupported(str(error)):
                # The coordinator lacks the API: KIP-848 itself is unavailable there.
                error = UnsupportedVersionError(CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG)
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
            log.info("ConsumerGroupHeartbeat failed with %s; rediscovering the coordinator", name)
            self.coordinator_request_manager.mark_coordinator_unknown(name, now_ms)
            # No backoff: heartbeat as soon as the coordinator is found again.
            state.reset()
        elif code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            log.info("ConsumerGroupHeartbeat: the coordinator is still loading; retrying after backoff")
        elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            log.info("ConsumerGroupHeartbeat: member %s with epoch %s is fenced (%s)",
                     membership.member_id, membership.member_epoch, name)
            membership.transition_to_fenced()
            # No backoff: rejoin as soon as the lost partitions are released.
            state.reset()
        elif code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            # Surfaced on poll(); the member stays as it is and recovers once ACLs allow it.
            log.error("ConsumerGroupHeartbeat failed: %s %s", name, message or "")
            self.background_event_handler.add(ErrorEvent(error_for(code, message)))
        elif code == ErrorCode.UNSUPPORTED_VERSION:
            # A broker that says the regex is the problem keeps its own explanation.
            regex = message is not None and _is_regex_unsupported(message)
            log.error("ConsumerGroupHeartbeat failed with %s: %s", name, message or "")
            self._handle_fatal_failure(UnsupportedVersionError(
                message if regex else CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG))
        else:
            if code not in _FATAL_ERRORS:
                log.error("ConsumerGroupHeartbeat failed with an unexpected error %s", name)
            else:
                log.error("ConsumerGroupHeartbeat failed with %s: %s", name, message or "")
            self._handle_fatal_failure(error_for(code, message))
        # The broker may not have taken the last fields: send everything next time.
        self.heartbeat_state.reset()
        membership.on_heartbeat_failure(False)

    def _handle_fatal_failure(self, error: BaseException) -> None:
        self.background_event_handler.add(ErrorEvent(error))
        if self.membership_manager.state is not MemberState.FATAL:
            self.membership_manager.transition_to_fatal()

    def _maybe_propagate_coordinator_fatal_error(self) -> None:
        error = self.coordinator_request_manager.get_and_clear_fatal_error()
        if error is not None:
            self.background_event_handler.add(ErrorEvent(error))
