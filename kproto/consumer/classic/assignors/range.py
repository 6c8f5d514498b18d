"""The ``range`` assignor (Java's ``RangeAssignor``), rack-aware per KIP-881.

Per topic: partitions in numeric order, subscribed members in ``MemberInfo`` order (static
members by instance id first, then member ids); each member gets a contiguous range and the
first ``partitions % members`` get one extra. When member racks and replica racks are known
and some partitions are not on every rack, partitions whose replicas share the member's rack
are matched first within the same per-member quotas; topics with the same subscribers and
partition count stay co-partitioned (partition p of each goes to the same member).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from kproto.consumer.classic.assignors._java import java_str_key
from kproto.consumer.classic.assignors.abstract import (
    JavaStyleAssignor,
    PartitionInfo,
    member_sort_key,
    use_rack_aware_assignment,
)
from kproto.consumer.classic.consumer_protocol import Subscription
from kproto.structs import TopicPartition


class _TopicState:
    """Java's ``TopicAssignmentState``: one topic's quotas and what is left to assign."""

    def __init__(self, topic: str, infos: List[PartitionInfo],
                 members: List[Tuple[str, Optional[str]]], consumer_racks: Dict[str, str],
                 prefer_rack_aware: bool) -> None:
        self.topic = topic
        ordered = sorted(members, key=lambda m: member_sort_key(m[0], m[1]))
        # member id -> rack (None if none); dict keeps Java's LinkedHashMap order
        self.consumers: Dict[str, Optional[str]] = {}
        for mid, _ in ordered:
            self.consumers.setdefault(mid, consumer_racks.get(mid))
        self.unassigned: Dict[TopicPartition, None] = {TopicPartition(topic, i.partition): None for i in infos}
        self.num_assigned = {c: 0 for c in self.consumers}
        n = len(self.consumers)
        self.per_consumer = len(infos) // n if n else 0
        self.remaining_extra = len(infos) % n if n else 0
        all_consumer_racks = {r for r in self.consumers.values() if r is not None}
        self.partition_racks: Dict[TopicPartition, Set[str]] = {}
        all_partition_racks: Set[str] = set()
        if all_consumer_racks:
            for info in infos:
                racks = {r for r in info.replica_racks if r is not None}
                self.partition_racks[TopicPartition(topic, info.partition)] = racks
                all_partition_racks |= racks
        self.needs_rack_aware = use_rack_aware_assignment(all_consumer_racks, all_partition_racks,
                                                          self.partition_racks, prefer_rack_aware)

    def racks_match(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.consumers.get(consumer)
        if rack is None:
            return True
        replica_racks = self.partition_racks.get(tp)
        return replica_racks is not None and rack in replica_racks

    def max_assignable(self, consumer: str) -> int:
        extra = 1 if self.remaining_extra > 0 else 0
        return max(0, self.per_consumer + extra - self.num_assigned[consumer])

    def on_assigned(self, consumer: str, partitions: List[TopicPartition]) -> None:
        self.num_assigned[consumer] += len(partitions)
        if self.num_assigned[consumer] > self.per_consumer:
            self.remaining_extra -= 1
        for tp in partitions:
            self.unassigned.pop(tp, None)


class RangePartitionAssignor(JavaStyleAssignor):
    """Java's ``RangeAssignor``; results identical for the same members and metadata."""

    name = "range"

    def assign_partitions(self, partitions_per_topic: Dict[str, List[PartitionInfo]],
                          subscriptions: Dict[str, Subscription]) -> Dict[str, List[TopicPartition]]:
        consumers_per_topic: Dict[str, List[Tuple[str, Optional[str]]]] = {}
        consumer_racks: Dict[str, str] = {}
        for mid, sub in subscriptions.items():
            for topic in sub.topics:
                consumers_per_topic.setdefault(topic, []).append((mid, sub.group_instance_id))
            if sub.rack_id:
                consumer_racks[mid] = sub.rack_id
        states = [_TopicState(t, infos, consumers_per_topic.get(t, []), consumer_racks,
                              self.prefer_rack_aware_logic)
                  for t, infos in partitions_per_topic.items() if infos]
        assignment: Dict[str, List[TopicPartition]] = {mid: [] for mid in subscriptions}

        use_rack_aware = any(s.needs_rack_aware for s in states)
        if use_rack_aware:
            self._assign_with_rack_matching(states, assignment)
        for state in states:
            self._assign_ranges(state, lambda c, tp: True, assignment)
        # Each topic is independent, so only the order inside a member's list is left open;
        # Java sorts it when racks were used, we always do for a stable output.
        for parts in assignment.values():
            parts.sort(key=lambda tp: (java_str_key(tp.topic), tp.partition))
        return assignment

    @staticmethod
    def _assign(consumer: str, partitions: List[TopicPartition], state: _TopicState,
                assignment: Dict[str, List[TopicPartition]]) -> None:
        assignment[consumer].extend(partitions)
        state.on_assigned(consumer, partitions)

    def _assign_ranges(self, state: _TopicState, may_assign: Callable[[str, TopicPartition], bool],
                       assignment: Dict[str, List[TopicPartition]]) -> None:
        for consumer in state.consumers:
            if not state.unassigned:
                break
            limit = state.max_assignable(consumer)
            assignable = [tp for tp in state.unassigned if may_assign(consumer, tp)][:limit]
            if assignable:
                self._assign(consumer, assignable, state, assignment)

    def _assign_with_rack_matching(self, states: List[_TopicState],
                                   assignment: Dict[str, List[TopicPartition]]) -> None:
        # Group topics by identical (ordered) subscribers, then by partition count; each
        # group touches only its own topics, so the order groups are visited in is moot.
        groups: Dict[tuple[Any, ...], Dict[int, List[_TopicState]]] = {}
        for s in states:
            key = tuple(s.consumers.items())
            groups.setdefault(key, {}).setdefault(len(s.partition_racks), []).append(s)
        for key, by_count in groups.items():
            consumers = [c for c, _ in key]
            for num_partitions, co_partitioned in by_count.items():
                if len(co_partitioned) > 1:
                    self._assign_co_partitioned(consumers, num_partitions, co_partitioned, assignment)
                elif co_partitioned[0].needs_rack_aware:
                    state = co_partitioned[0]
                    self._assign_ranges(state, state.racks_match, assignment)

    def _assign_co_partitioned(self, consumers: List[str], num_partitions: int,
                               states: List[_TopicState],
                               assignment: Dict[str, List[TopicPartition]]) -> None:
        remaining = list(consumers)
        for p in range(num_partitions):
            match = next((c for c in remaining
                          if all(s.racks_match(c, TopicPartition(s.topic, p)) and s.max_assignable(c) > 0
                                 for s in states)), None)
            if match is None:
                continue
            for s in states:
                self._assign(match, [TopicPartition(s.topic, p)], s, assignment)
            if not any(s.max_assignable(match) > 0 for s in states):
                remaining.remove(match)
                if not remaining:
                    break
