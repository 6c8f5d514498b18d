"""The sticky assignors' *general* algorithm (members subscribe to different topics).

Java's ``AbstractStickyAssignor.GeneralAssignmentBuilder`` and ``PartitionMovements``: keep
every valid owned partition, assign the unassigned ones to the least loaded eligible member
(rack-matching first when rack-aware), then move partitions from members with 2+ more than
another eligible member until balanced, preferring to return a partition to its owner of
the previous generation, and keep the result only if it is more balanced than before.
"""

from __future__ import annotations

import bisect
import logging
from typing import Callable, Dict, List, Optional, Set, Tuple

from kproto.consumer.classic.assignors._java import JavaHashSet, java_str_key, topic_partition_hash
from kproto.consumer.classic.assignors.abstract import PartitionInfo
from kproto.consumer.classic.assignors.abstract_sticky import MemberData, RackInfo
from kproto.consumer.classic.consumer_protocol import DEFAULT_GENERATION, Subscription
from kproto.structs import TopicPartition

log = logging.getLogger("kproto.classic.assignors")

_Pair = Tuple[str, str]  # (source member, destination member)


class PartitionMovements:
    """Where each partition moved during this assignment, by topic and member pair, so a
    move can undo an earlier opposite move of the same topic instead of adding a cycle."""

    def __init__(self) -> None:
        self.by_topic: Dict[str, Dict[_Pair, JavaHashSet[TopicPartition]]] = {}
        self.movements: Dict[TopicPartition, _Pair] = {}

    def _remove_record(self, tp: TopicPartition) -> _Pair:
        pair = self.movements.pop(tp)
        for_topic = self.by_topic[tp.topic]
        for_topic[pair].discard(tp)
        if not len(for_topic[pair]):
            del for_topic[pair]
        if not for_topic:
            del self.by_topic[tp.topic]
        return pair

    def _add_record(self, tp: TopicPartition, pair: _Pair) -> None:
        self.movements[tp] = pair
        for_topic = self.by_topic.setdefault(tp.topic, {})
        if pair not in for_topic:
            for_topic[pair] = JavaHashSet(topic_partition_hash)
        for_topic[pair].add(tp)

    def move_partition(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.movements:
            src, _ = self._remove_record(tp)
            if src != new:
                self._add_record(tp, (src, new))
        else:
            self._add_record(tp, (old, new))

    def actual_partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        for_topic = self.by_topic.get(tp.topic)
        if for_topic is None:
            return tp
        if tp in self.movements:
            old = self.movements[tp][0]
        reverse = for_topic.get((new, old))
        if reverse is None:
            return tp
        return reverse.first()


class _SortedMembers:
    """Java's ``TreeSet`` of members ordered by (assignment size, member id); the key is
    stored at insertion so removal works as long as callers remove before resizing."""

    def __init__(self, assignment: Dict[str, List[TopicPartition]]) -> None:
        self._assignment = assignment
        self._keys: List[Tuple[int, bytes, str]] = []
        self._key_of: Dict[str, Tuple[int, bytes, str]] = {}

    def add(self, member: str) -> None:
        if member in self._key_of:
            return
        key = (len(self._assignment[member]), java_str_key(member), member)
        bisect.insort(self._keys, key)
        self._key_of[member] = key

    def remove(self, member: str) -> None:
        key = self._key_of.pop(member, None)
        if key is not None:
            del self._keys[bisect.bisect_left(self._keys, key)]

    def __iter__(self):
        return iter([k[2] for k in self._keys])

    def first(self) -> str:
        return self._keys[0][2]

    def last(self) -> str:
        return self._keys[-1][2]


class GeneralAssignmentBuilder:
    """One run of the general sticky algorithm (see the module docstring)."""

    def __init__(self, partitions_per_topic: Dict[str, List[PartitionInfo]], rack_info: RackInfo,
                 current: Dict[str, List[TopicPartition]], order: List[str],
                 subscriptions: Dict[str, Subscription],
                 member_data: Callable[[Subscription], MemberData], max_generation: int) -> None:
        self.ppt = partitions_per_topic
        self.rack_info = rack_info
        self.current = current
        self.order = order
        self.subscriptions = subscriptions
        self.member_data = member_data
        self.max_generation = max_generation
        self.total = sum(len(v) for v in partitions_per_topic.values())
        self.revocation_required = False
        self.movements = PartitionMovements()

        self.topic_consumers: Dict[str, List[str]] = {t: [] for t in partitions_per_topic}
        self.consumer_topics: Dict[str, List[str]] = {}
        for consumer in order:
            topics = [t for t in subscriptions[consumer].topics if t in partitions_per_topic]
            self.consumer_topics[consumer] = topics
            for t in topics:
                self.topic_consumers[t].append(consumer)
            current.setdefault(consumer, [])
        self.partition_consumer: Dict[TopicPartition, str] = {
            tp: c for c in order for tp in current[c]}
        topics_sorted = sorted(self.topic_consumers,
                               key=lambda t: (len(self.topic_consumers[t]), java_str_key(t)))
        self.sorted_all_partitions = [TopicPartition(i.topic, i.partition)
                                      for t in topics_sorted for i in partitions_per_topic[t]]
        self.sorted_members = _SortedMembers(current)

    def build(self) -> Dict[str, List[TopicPartition]]:
        prev = self._prepopulate_previous_assignment()
        assigned = set(self._assign_owned_partitions())
        unassigned = [tp for tp in self.sorted_all_partitions if tp not in assigned]
        for c in self.current:
            self.sorted_members.add(c)
        self._balance(prev, unassigned)
        return self.current

    def _prepopulate_previous_assignment(self) -> Dict[TopicPartition, Tuple[str, int]]:
        """Partitions members owned in generations older than the newest one seen."""
        prev: Dict[TopicPartition, Tuple[str, int]] = {}
        for consumer in self.order:
            data = self.member_data(self.subscriptions[consumer])
            if data.generation is not None and data.generation < self.max_generation:
                generation = data.generation
            elif data.generation is None and self.max_generation > DEFAULT_GENERATION:
                generation = DEFAULT_GENERATION
            else:
                continue
            for tp in data.partitions:
                if tp not in prev or generation > prev[tp][1]:
                    prev[tp] = (consumer, generation)
        return prev

    def _assign_owned_partitions(self) -> List[TopicPartition]:
        assigned: List[TopicPartition] = []
        for consumer in self.order:
            topics = set(self.subscriptions[consumer].topics)
            kept: List[TopicPartition] = []
            for tp in self.current[consumer]:
                if tp.topic not in self.topic_consumers:
                    self.partition_consumer.pop(tp, None)
                elif tp.topic not in topics or self.rack_info.racks_mismatch(consumer, tp):
                    # Java leaves the partition->member entry in place here; it is
                    # overwritten when the partition is assigned again.
                    self.revocation_required = True
                else:
                    kept.append(tp)
                    assigned.append(tp)
            self.current[consumer][:] = kept
        return assigned

    def _max_assignment_size(self, topics: List[str]) -> int:
        if len(topics) == len(self.ppt):
            return self.total
        return sum(len(self.ppt[t]) for t in topics)

    def _is_balanced(self) -> bool:
        sizes = {c: len(self.current[c]) for c in self.current}
        if sizes[self.sorted_members.first()] >= sizes[self.sorted_members.last()] - 1:
            return True
        owner: Dict[TopicPartition, str] = {}
        for c, parts in self.current.items():
            for tp in parts:
                owner[tp] = c
        for consumer in self.sorted_members:
            count = sizes[consumer]
            topics = self.consumer_topics[consumer]
            if count == self._max_assignment_size(topics):
                continue
            mine = set(self.current[consumer])
            for topic in topics:
                for i in range(len(self.ppt[topic])):
                    tp = TopicPartition(topic, i)
                    if tp not in mine:
                        other = owner.get(tp)
                        if other is not None and other in sizes and count + 1 < sizes[other]:
                            return False
        return True

    @staticmethod
    def _balance_score(assignment: Dict[str, List[TopicPartition]]) -> int:
        sizes = [len(v) for v in assignment.values()]
        return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1:])

    def _maybe_assign_partition(self, tp: TopicPartition, rack_info: Optional[RackInfo]) -> bool:
        for consumer in self.sorted_members:
            if tp.topic in self.consumer_topics[consumer] and (
                    rack_info is None or not rack_info.racks_mismatch(consumer, tp)):
                self.sorted_members.remove(consumer)
                self.current[consumer].append(tp)
                self.partition_consumer[tp] = consumer
                self.sorted_members.add(consumer)
                return True
        return False

    def _maybe_assign(self, partitions: List[TopicPartition], rack_info: Optional[RackInfo],
                      remove_assigned: bool) -> List[TopicPartition]:
        left: List[TopicPartition] = []
        for tp in partitions:
            if not self.topic_consumers[tp.topic]:
                left.append(tp)
                continue
            if not (self._maybe_assign_partition(tp, rack_info) and remove_assigned):
                left.append(tp)
        return left

    def _topic_can_move(self, topic: str) -> bool:
        return len(self.topic_consumers[topic]) >= 2

    def _consumer_can_move(self, consumer: str) -> bool:
        parts = self.current[consumer]
        max_size = self._max_assignment_size(self.consumer_topics[consumer])
        if len(parts) > max_size:
            log.error("Member %s is assigned more partitions than it can have", consumer)
        if len(parts) < max_size:
            return True
        return any(self._topic_can_move(tp.topic) for tp in parts)

    def _balance(self, prev: Dict[TopicPartition, Tuple[str, int]], unassigned: List[TopicPartition]) -> None:
        initializing = not self.current[self.sorted_members.last()]
        to_assign = unassigned
        if self.rack_info.consumer_racks:
            to_assign = self._maybe_assign(list(unassigned), self.rack_info, True)
        self._maybe_assign(to_assign, None, False)

        fixed_partitions: Set[TopicPartition] = set()
        for topic in self.topic_consumers:
            if not self._topic_can_move(topic):
                fixed_partitions.update(TopicPartition(topic, i) for i in range(len(self.ppt[topic])))
        self.sorted_all_partitions = [tp for tp in self.sorted_all_partitions if tp not in fixed_partitions]
        unassigned = [tp for tp in unassigned if tp not in fixed_partitions]

        fixed_assignments: Dict[str, List[TopicPartition]] = {}
        for consumer in self.consumer_topics:
            if not self._consumer_can_move(consumer):
                self.sorted_members.remove(consumer)
                fixed_assignments[consumer] = self.current.pop(consumer)

        pre_balance = {c: list(v) for c, v in self.current.items()}
        pre_balance_owners = dict(self.partition_consumer)
        if not self.revocation_required:
            self._perform_reassignments(unassigned, prev)
        performed = self._perform_reassignments(self.sorted_all_partitions, prev)
        if (not initializing and performed
                and self._balance_score(self.current) >= self._balance_score(pre_balance)):
            self.current.clear()
            self.current.update({c: list(v) for c, v in pre_balance.items()})
            self.partition_consumer = pre_balance_owners
        for consumer, parts in fixed_assignments.items():
            self.current[consumer] = parts

    def _perform_reassignments(self, partitions: List[TopicPartition],
                               prev: Dict[TopicPartition, Tuple[str, int]]) -> bool:
        performed = False
        modified = True
        while modified:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                consumer = self.partition_consumer.get(tp)
                if consumer is None or consumer not in self.current:
                    log.error("Expected partition %s to be assigned to a member", tp)
                    continue
                size = len(self.current[consumer])
                previous = prev.get(tp)
                # (Java would fail here if the previous owner cannot move at all; we skip it.)
                if previous is not None and previous[0] in self.current and \
                        size > len(self.current[previous[0]]) + 1:
                    self._reassign_partition_to(tp, previous[0])
                    performed = modified = True
                    continue
                if self._has_better_member(tp, consumer, size):
                    self._reassign_partition(tp)
                    performed = modified = True
        return performed

    def _has_better_member(self, tp: TopicPartition, consumer: str, size: int) -> bool:
        rack = self.rack_info.consumer_racks.get(consumer)
        partition_racks = self.rack_info.partition_racks.get(tp) or set()
        candidates = self.topic_consumers[tp.topic]
        if rack is not None and partition_racks and rack in partition_racks:
            for other in candidates:
                other_rack = self.rack_info.consumer_racks.get(other)
                if other_rack is None or other_rack not in partition_racks:
                    continue
                if other in self.current and size > len(self.current[other]) + 1:
                    return True
        return any(other in self.current and size > len(self.current[other]) + 1 for other in candidates)

    def _reassign_partition(self, tp: TopicPartition) -> None:
        new_consumer = next(c for c in self.sorted_members if tp.topic in self.consumer_topics[c])
        self._reassign_partition_to(tp, new_consumer)

    def _reassign_partition_to(self, tp: TopicPartition, new_consumer: str) -> None:
        consumer = self.partition_consumer[tp]
        to_move = self.movements.actual_partition_to_move(tp, consumer, new_consumer)
        self._process_partition_movement(to_move, new_consumer)

    def _process_partition_movement(self, tp: TopicPartition, new_consumer: str) -> None:
        old_consumer = self.partition_consumer[tp]
        self.sorted_members.remove(old_consumer)
        self.sorted_members.remove(new_consumer)
        self.movements.move_partition(tp, old_consumer, new_consumer)
        self.current[old_consumer].remove(tp)
        self.current[new_consumer].append(tp)
        self.partition_consumer[tp] = new_consumer
        self.sorted_members.add(new_consumer)
        self.sorted_members.add(old_consumer)
