"""Share-group membership (Java's ``ShareMembershipManager``).

A share group's member on the shell's ``AbstractMembershipManager``: the member id this
client makes (kept across rejoins), the epoch, ``MemberState`` with Java's transitions, the
target assignment by topic id and its reconciliation into the ``SubscriptionState``.
Share groups have no rebalance listener and nothing to commit before giving a partition
up, so every hook is the base's (completed at once) and a reconciliation needs no
application callback; revocations still wait for the application's next ``poll()``, as in
the base. What the member acquired of a revoked partition before is still handed out
(``ShareFetchBuffer``): the broker's locks, not the assignment, say whose records are whose.

What the share engine adds: ``assigned_partitions`` (the owned partitions, not pending
revocation, with their topic ids) for the share consume request manager, and the rack.
Everything runs on the background thread.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from kproto.consumer.background.abstract_membership_manager import AbstractMembershipManager
from kproto.clock import monotonic_ms
from kproto.structs import TopicIdPartition

log = logging.getLogger("kproto.share")


class ShareMembershipManager(AbstractMembershipManager):
    def __init__(self, group_id: str, subscriptions: Any, *, topic_name_for_id: Callable[[Any], Optional[str]],
                 request_metadata_update: Callable[[], None] = lambda: None, rack_id: Optional[str] = None,
                 member_id: Optional[str] = None, time_ms: Callable[[], int] = monotonic_ms) -> None:
        super().__init__(group_id, subscriptions, topic_name_for_id=topic_name_for_id,
                         request_metadata_update=request_metadata_update, member_id=member_id, time_ms=time_ms)
        self.rack_id = rack_id

    def assigned_partitions(self) -> list[TopicIdPartition]:
        """The partitions to fetch: owned, not pending revocation, named by topic id."""
        ids = {name: topic_id for topic_id, name in self._assigned_topic_names.items()}
        subscriptions = self.subscriptions
        return [TopicIdPartition(ids[tp.topic], tp) for tp in sorted(subscriptions.assigned_partitions())
                if tp.topic in ids and not subscriptions.is_pending_revocation(tp)]
