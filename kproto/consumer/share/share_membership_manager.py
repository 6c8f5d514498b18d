"""Share-group membership (Java's ``ShareMembershipManager``), sans-IO.

Owns the member's identity (a member id this client makes once, as Java's
``Uuid.randomUuid()``, kept across rejoins; the member epoch the coordinator gives), its
state, its subscription and its assignment. Share groups have no rebalance callbacks and
no offsets to commit before giving a partition up, so an assignment takes effect as soon
as the heartbeat answer carries it: there is no reconciliation step.

States::

    UNSUBSCRIBED --subscribe--> JOINING --answer--> STABLE
    STABLE/JOINING --UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH--> JOINING (assignment dropped,
        same member id, epoch 0)
    any --leave_group--> LEAVING --leave answered or failed--> UNSUBSCRIBED (JOINING if
        subscribe came meanwhile)
    any --fatal error--> FATAL

The heartbeat request manager reads ``member_epoch_to_send`` and
``topic_names_to_send`` and reports answers back; the share consume request manager reads
``assigned_partitions``. Everything runs on the background thread.
"""

from __future__ import annotations

import base64
import enum
import logging
import uuid
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Optional

from kproto.consumer.share.share_session_handler import FINAL_EPOCH
from kproto.structs import TopicIdPartition, TopicPartition

log = logging.getLogger("kproto.share")


class ShareMemberState(enum.Enum):
    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    STABLE = "STABLE"
    LEAVING = "LEAVING"
    FATAL = "FATAL"


def new_member_id() -> str:
    """A random member id in Kafka's Uuid string form (22 URL-safe base64 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ShareMembershipManager:
    def __init__(self, group_id: str, topic_name_for_id: Callable[[Any], Optional[str]],
                 rack_id: Optional[str] = None, member_id: Optional[str] = None) -> None:
        self.group_id = group_id
        self.member_id = member_id or new_member_id()
        self.member_epoch = 0
        self.rack_id = rack_id
        self.state = ShareMemberState.UNSUBSCRIBED
        self._topic_name_for_id = topic_name_for_id
        self.subscribed_topics: tuple[str, ...] = ()
        self._send_topic_names = False
        # The coordinator's latest assignment: (topic id, partition) pairs.
        self._assignment: frozenset[tuple[Any, int]] = frozenset()
        self._leave_future: Optional[Future] = None
        self.fatal_error: Optional[BaseException] = None
        self.assignment_listeners: list[Callable[[], None]] = []
        self._rejoin_after_leave = False

    # --- what the application asks ----------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        topics = tuple(sorted(set(topics)))
        if topics != self.subscribed_topics or self.state is ShareMemberState.UNSUBSCRIBED:
            self._send_topic_names = True
        self.subscribed_topics = topics
        if self.state is ShareMemberState.UNSUBSCRIBED:
            self._transition_to_joining()
        elif self.state is ShareMemberState.LEAVING:
            self._rejoin_after_leave = True  # the leave heartbeat's answer must not pass for a join

    def leave_group(self) -> Future:
        """Send the leave heartbeat; the future completes when it was answered (or failed)."""
        future: Future = Future()
        if self.state in (ShareMemberState.UNSUBSCRIBED, ShareMemberState.FATAL):
            future.set_result(None)
            return future
        if self.state is ShareMemberState.JOINING and self.member_epoch == 0:
            # Never joined: nothing to leave.
            self._unsubscribed()
            future.set_result(None)
            return future
        self.state = ShareMemberState.LEAVING
        self._set_assignment(frozenset())
        self._leave_future = future
        return future

    # --- what the heartbeat sends -----------------------------------------------------------

    def member_epoch_to_send(self) -> int:
        if self.state is ShareMemberState.LEAVING:
            return FINAL_EPOCH
        if self.state is ShareMemberState.JOINING:
            return 0
        return self.member_epoch

    def topic_names_to_send(self) -> Optional[list[str]]:
        if self.state is ShareMemberState.JOINING or self._send_topic_names:
            return list(self.subscribed_topics)
        return None

    def should_heartbeat_now(self) -> bool:
        return self.state in (ShareMemberState.JOINING, ShareMemberState.LEAVING) or self._send_topic_names

    def is_active(self) -> bool:
        return self.state in (ShareMemberState.JOINING, ShareMemberState.STABLE, ShareMemberState.LEAVING)

    # --- answers ------------------------------------------------------------------------------

    def on_heartbeat_sent(self) -> None:
        self._send_topic_names = False

    def on_heartbeat_success(self, response: Any) -> None:
        if self.state is ShareMemberState.LEAVING:
            self._unsubscribed()
            return
        if self.state not in (ShareMemberState.JOINING, ShareMemberState.STABLE):
            return
        self.member_epoch = response.member_epoch
        self.state = ShareMemberState.STABLE
        assignment = response.assignment
        if assignment is not None:
            self._set_assignment(frozenset((tp.topic_id, p) for tp in assignment.topic_partitions
                                           for p in tp.partitions))

    def on_heartbeat_failure(self) -> None:
        """The heartbeat failed without an answer (a disconnect): a leave still counts as done."""
        self._send_topic_names = True
        if self.state is ShareMemberState.LEAVING:
            self._unsubscribed()

    def on_fenced(self) -> None:
        """UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: the coordinator forgot us; rejoin."""
        log.info("Share member %s of group %s was fenced (epoch %d); rejoining", self.member_id, self.group_id,
                 self.member_epoch)
        if self.state is ShareMemberState.LEAVING:
            self._unsubscribed()
            return
        self._set_assignment(frozenset())
        self._transition_to_joining()

    def on_fatal(self, error: BaseException) -> None:
        self.fatal_error = error
        self.state = ShareMemberState.FATAL
        self._set_assignment(frozenset())
        self._complete_leave()

    def on_unsubscribe_without_leave(self) -> None:
        self._unsubscribed()

    # --- the assignment -----------------------------------------------------------------------

    def assigned_partitions(self) -> list[TopicIdPartition]:
        """The assignment with topic names; partitions of topics the metadata does not name
        yet are left out (``unresolved_topic_ids`` says which)."""
        out = []
        for topic_id, partition in sorted(self._assignment, key=lambda a: (str(a[0]), a[1])):
            name = self._topic_name_for_id(topic_id)
            if name is not None:
                out.append(TopicIdPartition(topic_id, TopicPartition(name, partition)))
        return out

    def unresolved_topic_ids(self) -> set[Any]:
        return {t for t, _ in self._assignment if self._topic_name_for_id(t) is None}

    def _set_assignment(self, assignment: frozenset) -> None:
        if assignment != self._assignment:
            self._assignment = assignment
            for listener in self.assignment_listeners:
                listener()

    def _transition_to_joining(self) -> None:
        self.member_epoch = 0
        self.state = ShareMemberState.JOINING
        self._send_topic_names = True

    def _unsubscribed(self) -> None:
        self.state = ShareMemberState.UNSUBSCRIBED
        self.member_epoch = 0
        self._set_assignment(frozenset())
        self._complete_leave()
        if self._rejoin_after_leave:
            self._rejoin_after_leave = False
            self._transition_to_joining()

    def _complete_leave(self) -> None:
        future, self._leave_future = self._leave_future, None
        if future is not None and not future.done():
            future.set_result(None)

    def __repr__(self) -> str:
        return "ShareMembershipManager(member_id={}, epoch={}, state={}, assignment={})".format(
            self.member_id, self.member_epoch, self.state.name, sorted(map(str, self._assignment)))
