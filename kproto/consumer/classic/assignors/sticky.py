"""The ``sticky`` (eager) and ``cooperative-sticky`` (KIP-429) assignors.

Both run the sticky algorithm of ``abstract_sticky``; they differ in where a member's
previously owned partitions come from and in what the leader sends back:

- ``sticky`` members carry their last assignment and generation in the subscription's user
  data (``StickyAssignorUserData`` v1; v0 without generation from very old members), since
  under the eager protocol they revoked everything before joining.
- ``cooperative-sticky`` members report ``owned_partitions`` and ``generation_id`` in the
  subscription itself (v2+; older ones send the generation as an int32 in user data). The
  leader then removes from each new owner every partition still owned by another member:
  the owner revokes it, rejoins, and the second rebalance hands it over.
"""

from __future__ import annotations

from typing import Any, Collection, Dict, List, Optional

from kproto.consumer.classic.assignors.abstract import PartitionInfo, RebalanceProtocol
from kproto.consumer.classic.assignors.abstract_sticky import AbstractStickyAssignor, MemberData
from kproto.consumer.classic.consumer_protocol import (
    DEFAULT_GENERATION,
    Assignment,
    Subscription,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from kproto.structs import TopicPartition


class StickyPartitionAssignor(AbstractStickyAssignor):
    """Java's ``StickyAssignor`` (eager)."""

    name = "sticky"

    def __init__(self) -> None:
        super().__init__()
        self.member_assignment: Optional[List[TopicPartition]] = None
        self.generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation: Any = None) -> None:
        self.member_assignment = list(assignment.partitions())
        self.generation = self._generation_id(generation)

    def subscription_user_data(self, topics: Collection[str]) -> Optional[bytes]:
        if self.member_assignment is None:
            return None
        return encode_sticky_user_data(self.member_assignment, self.generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        partitions, generation = decode_sticky_user_data(subscription.user_data)
        return MemberData(partitions, generation)


class CooperativeStickyAssignor(AbstractStickyAssignor):
    """Java's ``CooperativeStickyAssignor`` (KIP-429; supports COOPERATIVE and EAGER)."""

    name = "cooperative-sticky"

    def __init__(self) -> None:
        super().__init__()
        self.generation = DEFAULT_GENERATION

    def supported_protocols(self) -> List[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]

    def on_assignment(self, assignment: Assignment, generation: Any = None) -> None:
        self.generation = self._generation_id(generation)

    def subscription_user_data(self, topics: Collection[str]) -> Optional[bytes]:
        return encode_cooperative_user_data(self.generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.generation_id >= 0:
            return MemberData(list(subscription.owned_partitions), subscription.generation_id)
        return MemberData(list(subscription.owned_partitions),
                          decode_cooperative_user_data(subscription.user_data))

    def assign_partitions(self, partitions_per_topic: Dict[str, List[PartitionInfo]],
                          subscriptions: Dict[str, Subscription]) -> Dict[str, List[TopicPartition]]:
        assignments = super().assign_partitions(partitions_per_topic, subscriptions)
        transferring = self.partitions_transferring_ownership
        if transferring is None:
            transferring = self._compute_transferring(subscriptions, assignments)
        # A partition changing owner is left out of its new owner's assignment this round.
        for tp, consumer in transferring.items():
            if tp in assignments[consumer]:
                assignments[consumer].remove(tp)
        return assignments

    @staticmethod
    def _compute_transferring(subscriptions: Dict[str, Subscription],
                              assignments: Dict[str, List[TopicPartition]]) -> Dict[TopicPartition, str]:
        added: Dict[TopicPartition, str] = {}
        revoked: set[TopicPartition] = set()
        for consumer, assigned in assignments.items():
            owned = subscriptions[consumer].owned_partitions
            owned_set = set(owned)
            assigned_set = set(assigned)
            for tp in assigned:
                if tp not in owned_set:
                    added[tp] = consumer
            revoked.update(tp for tp in owned if tp not in assigned_set)
        return {tp: c for tp, c in added.items() if tp in revoked}
