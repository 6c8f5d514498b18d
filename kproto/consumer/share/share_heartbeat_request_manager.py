"""ShareGroupHeartbeat (Java's ``ShareHeartbeatRequestManager``).

The shell's ``AbstractHeartbeatRequestManager`` owns when a heartbeat goes out, the error
table (coordinator errors rediscover, UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH fence and
rejoin at epoch 0 with the same member id, the rest is fatal and raised from ``poll()``)
and the poll timer (``max_poll_interval_ms`` without a ``poll()``: leave, then rejoin on
the next one). This class builds the request: group, member id, epoch (0 to join, -1 to
leave), rack and the subscribed topic names, sent on a join, after an error and when they
changed (``None`` otherwise: unchanged), as Java's ``ShareHeartbeatState``.
"""

from __future__ import annotations

from typing import Any, Optional

from kproto.consumer.background.abstract_heartbeat_request_manager import AbstractHeartbeatRequestManager
from kproto.consumer.background.member_state import MemberState
from kproto.errors import UnsupportedVersionError
from kproto.messages import ShareGroupHeartbeatRequest


class ShareHeartbeatRequestManager(AbstractHeartbeatRequestManager):
    heartbeat_api = "ShareGroupHeartbeat"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sent_topic_names: Optional[list[str]] = None

    def build_heartbeat_request(self) -> ShareGroupHeartbeatRequest:
        membership = self.membership_manager
        topics = sorted(membership.subscriptions.subscription())
        send_topics = None
        if membership.state is MemberState.JOINING or topics != self._sent_topic_names:
            send_topics = topics
            self._sent_topic_names = topics
        return ShareGroupHeartbeatRequest(
            group_id=membership.group_id, member_id=membership.member_id, member_epoch=membership.member_epoch,
            rack_id=getattr(membership, "rack_id", None), subscribed_topic_names=send_topics)

    def reset_heartbeat_state(self) -> None:
        self._sent_topic_names = None

    def unsupported_version_error(self, cause: Optional[BaseException], message: Optional[str]) -> BaseException:
        return UnsupportedVersionError("the group coordinator does not support share groups (ShareGroupHeartbeat "
                                       "v1, Kafka 4.1+): {}".format(message or cause or "UNSUPPORTED_VERSION"))
