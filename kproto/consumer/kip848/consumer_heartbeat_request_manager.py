"""ConsumerGroupHeartbeat for the KIP-848 engine (Java's ``ConsumerHeartbeatRequestManager``).

Owns what a consumer group adds to ``AbstractHeartbeatRequestManager`` (timing, poll
timer and the common error table, in the shell): what a heartbeat carries
(``HeartbeatState``: every field on a (re)join, afterwards only the fields that changed
since the last one sent), the request's version rules (``for_version``), the consumer
group's fatal errors (UNSUPPORTED_ASSIGNOR, UNRELEASED_INSTANCE_ID,
INVALID_REGULAR_EXPRESSION) and what UNSUPPORTED_VERSION means.

UnsupportedVersionError (an UNSUPPORTED_VERSION answer, or a coordinator without the API)
says "KIP-848 is unavailable, use the classic protocol", except when it is about the regex
(a regex string needs ConsumerGroupHeartbeat v1, Kafka 3.x speaks v0): that is reported as
such, since KIP-848 with topic names (or a client-matched compiled pattern) works there.
"""

from __future__ import annotations

from typing import Any, Optional

from kproto.consumer.background.abstract_heartbeat_request_manager import AbstractHeartbeatRequestManager
from kproto.consumer.background.coordinator_request_manager import CoordinatorRequestManager
from kproto.consumer.background.events import BackgroundEventHandler
from kproto.consumer.background.member_state import MemberState
from kproto.consumer.background.request_manager import RequestBuilder, RequestState
from kproto.consumer.kip848.consumer_membership_manager import ConsumerMembershipManager
from kproto.consumer.subscription_state import SubscriptionType
from kproto.errors import ErrorCode, UnsupportedVersionError
from kproto.messages import ConsumerGroupHeartbeatRequest

CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG = (
    "The cluster does not support the new consumer group protocol (KIP-848). Set "
    "group_protocol='classic' to use the classic group protocol.")
# A subscription to a regex string (evaluated by the broker) on a coordinator speaking
# ConsumerGroupHeartbeat v0 only (Kafka 3.x): KIP-848 works there, the regex does not.
REGEX_RESOLUTION_NOT_SUPPORTED_MSG = (
    "The cluster does not support regular expressions resolution on ConsumerGroupHeartbeat v0; "
    "subscribing to a regex string needs ConsumerGroupHeartbeat v1 (Kafka 4.0+). Subscribe to "
    "a list of topics or to a compiled re.Pattern (matched by the client) instead.")


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


class ConsumerHeartbeatRequestManager(AbstractHeartbeatRequestManager):
    """Sends ConsumerGroupHeartbeat to the coordinator and owns the poll timer."""

    heartbeat_api = "ConsumerGroupHeartbeat"
    fatal_errors = AbstractHeartbeatRequestManager.fatal_errors | {
        ErrorCode.UNSUPPORTED_ASSIGNOR, ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.INVALID_REGULAR_EXPRESSION}

    def __init__(self, now_ms: int, coordinator_request_manager: CoordinatorRequestManager,
                 membership_manager: ConsumerMembershipManager, subscriptions: Any,
                 background_event_handler: BackgroundEventHandler, *, max_poll_interval_ms: int = 300000,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000,
                 jitter: float = RequestState.RETRY_BACKOFF_JITTER) -> None:
        super().__init__(now_ms, coordinator_request_manager, membership_manager, background_event_handler,
                         max_poll_interval_ms=max_poll_interval_ms, retry_backoff_ms=retry_backoff_ms,
                         retry_backoff_max_ms=retry_backoff_max_ms, jitter=jitter)
        self.heartbeat_state = HeartbeatState(subscriptions, membership_manager)

    def build_heartbeat_request(self) -> RequestBuilder:
        request = self.heartbeat_state.build_request()
        return RequestBuilder(ConsumerGroupHeartbeatRequest, lambda version: (for_version(request, version), version))

    def reset_heartbeat_state(self) -> None:
        self.heartbeat_state.reset()

    def unsupported_version_error(self, cause: Optional[BaseException], message: Optional[str]) -> BaseException:
        if message is not None and _is_regex_unsupported(message):
            # The regex is the problem (a broker's answer, or for_version's): say so.
            return cause if cause is not None else UnsupportedVersionError(message)
        # The coordinator lacks the API: KIP-848 itself is unavailable there.
        return UnsupportedVersionError(CONSUMER_PROTOCOL_NOT_SUPPORTED_MSG)
