"""The consumer group's member (Java's ``ConsumerMembershipManager``).

Owns what a KIP-848 consumer group adds to ``AbstractMembershipManager`` (the member state
machine and reconciliation, in the shell): the static member (``group_instance_id``, whose
leave epoch is -2), the fields its heartbeats carry (rack, server assignor, rebalance
timeout), the auto-commit before partitions are given up, and the rebalance-listener
callbacks, which it never runs itself: it enqueues a
``ConsumerRebalanceListenerCallbackNeededEvent`` for the application thread and the
reconciliation continues when the matching completed event comes back.
"""

from __future__ import annotations

import uuid
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Optional

from kproto.consumer.background.abstract_membership_manager import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    AbstractMembershipManager,
)
from kproto.consumer.background.events import BackgroundEventHandler
from kproto.consumer.background.local_assignment import completed_future
from kproto.clock import monotonic_ms
from kproto.consumer.kip848.events import (
    ConsumerRebalanceListenerCallbackCompletedEvent,
    ConsumerRebalanceListenerMethodName,
    request_listener_callback,
)
from kproto.structs import TopicPartition

Method = ConsumerRebalanceListenerMethodName


class ConsumerMembershipManager(AbstractMembershipManager):
    """A consumer group member; see the module docstring.

    ``auto_commit_before_rebalance(deadline_ms)`` returns a future completed when the
    consumed offsets are committed (or the commit gave up); None disables that step.
    """

    def __init__(self, group_id: str, subscriptions: Any, background_event_handler: BackgroundEventHandler,
                 *, topic_name_for_id: Callable[[uuid.UUID], Optional[str]],
                 request_metadata_update: Callable[[], object] = lambda: None,
                 group_instance_id: Optional[str] = None, rack_id: Optional[str] = None,
                 server_assignor: Optional[str] = None, rebalance_timeout_ms: int = 300000,
                 auto_commit_before_rebalance: Optional[Callable[[int], Future[Any]]] = None,
                 member_id: Optional[str] = None, time_ms: Callable[[], int] = monotonic_ms) -> None:
        super().__init__(group_id, subscriptions, topic_name_for_id=topic_name_for_id,
                         request_metadata_update=request_metadata_update, member_id=member_id, time_ms=time_ms)
        self.group_instance_id = group_instance_id
        self.rack_id = rack_id
        self.server_assignor = server_assignor
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.background_event_handler = background_event_handler
        self._auto_commit_before_rebalance = auto_commit_before_rebalance

    def leave_group_epoch(self) -> int:
        return LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.group_instance_id else LEAVE_GROUP_MEMBER_EPOCH

    # --- auto-commit before revocation ---------------------------------------------------------

    def auto_commit_enabled(self) -> bool:
        return self._auto_commit_before_rebalance is not None

    def signal_reconciliation_started(self) -> Future[Any]:
        # The broker gives a member the rebalance timeout to reconcile: the commit's deadline.
        if self._auto_commit_before_rebalance is None:
            return completed_future()
        return self._auto_commit_before_rebalance(self._time_ms() + self.rebalance_timeout_ms)

    # --- rebalance listener callbacks --------------------------------------------------------

    def signal_partitions_being_revoked(self, partitions: set[TopicPartition]) -> Future[Any]:
        return self._invoke_listener(Method.ON_PARTITIONS_REVOKED, partitions)

    def signal_partitions_assigned(self, partitions: set[TopicPartition]) -> Future[Any]:
        return self._invoke_listener(Method.ON_PARTITIONS_ASSIGNED, partitions, always=True)

    def signal_partitions_lost(self, partitions: Iterable[TopicPartition]) -> Future[Any]:
        return self._invoke_listener(Method.ON_PARTITIONS_LOST, partitions)

    def _invoke_listener(self, method: ConsumerRebalanceListenerMethodName,
                         partitions: Iterable[TopicPartition], always: bool = False) -> Future[Any]:
        return request_listener_callback(self.background_event_handler,
                                         self.subscriptions.rebalance_listener is not None,
                                         method, partitions, always)

    def consumer_rebalance_listener_callback_completed(
            self, event: ConsumerRebalanceListenerCallbackCompletedEvent) -> None:
        """The application thread ran the callback: resume what waited on it."""
        event.resume_waiter()
