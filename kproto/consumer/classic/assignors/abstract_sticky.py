"""What the ``sticky`` and ``cooperative-sticky`` assignors share (Java's ``AbstractStickyAssignor``).

Owns the entry point that picks the algorithm, the validation of previously owned partitions
across members and generations, the KIP-881 rack information, and the *constrained*
algorithm used when every member subscribes to the same topics. The *general* algorithm
(different subscriptions) is in ``general_sticky.py``.

Iteration order matters in a few places (which members keep ``max_quota`` partitions, which
member wins a doubly claimed partition), so members are visited in the order Java's
``HashMap`` of member ids would visit them (``_java.member_hash_order``), given the JoinGroup
member order as insertion order.
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

from kproto.consumer.classic.assignors._java import java_str_key, member_hash_order
from kproto.consumer.classic.assignors.abstract import (
    JavaStyleAssignor,
    PartitionInfo,
    use_rack_aware_assignment,
)
from kproto.consumer.classic.consumer_protocol import DEFAULT_GENERATION, Subscription
from kproto.errors import IllegalStateError
from kproto.structs import TopicPartition

log = logging.getLogger("kproto.classic.assignors")


@dataclass
class MemberData:
    """A member's previously owned partitions and the generation they belong to."""

    partitions: List[TopicPartition]
    generation: Optional[int]
    rack_id: Optional[str] = None


class RackInfo:
    """Java's ``AbstractStickyAssignor.RackInfo``: member racks and replica racks, used only
    when ``use_rack_aware_assignment`` says matching racks can make a difference."""

    def __init__(self, partition_infos: List[PartitionInfo], subscriptions: Dict[str, Subscription],
                 member_order: List[str], prefer_rack_aware: bool = False) -> None:
        consumers_by_rack: Dict[str, List[str]] = {}
        for mid in member_order:
            rack = subscriptions[mid].rack_id
            if rack:
                consumers_by_rack.setdefault(rack, []).append(mid)
        partition_racks: Dict[TopicPartition, Set[str]] = {}
        partition_rack_names: Set[str] = set()
        if consumers_by_rack:
            for info in partition_infos:
                racks = {r for r in info.replica_racks if r is not None}
                partition_racks[TopicPartition(info.topic, info.partition)] = racks
                partition_rack_names |= racks
        if use_rack_aware_assignment(set(consumers_by_rack), partition_rack_names, partition_racks,
                                     prefer_rack_aware):
            self.consumer_racks = {c: rack for rack, cs in consumers_by_rack.items() for c in cs}
            self.partition_racks = partition_racks
        else:
            self.consumer_racks = {}
            self.partition_racks = {}
        # As in Java this is computed from all replica racks even when rack matching is off
        # (the sort it drives is then a no-op: every count is equal or zero).
        self.num_consumers_by_partition = {
            tp: sum(len(consumers_by_rack.get(r, ())) for r in racks) for tp, racks in partition_racks.items()}

    def racks_mismatch(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.consumer_racks.get(consumer)
        if rack is None:
            return False
        replica_racks = self.partition_racks.get(tp)
        return replica_racks is None or rack not in replica_racks

    def sort_partitions_by_rack_consumers(self, partitions: List[TopicPartition]) -> List[TopicPartition]:
        if not self.num_consumers_by_partition:
            return partitions
        counts = self.num_consumers_by_partition
        return sorted(partitions, key=lambda tp: counts.get(tp, 0))  # stable, like List.sort

    def next_rack_consumer(self, tp: TopicPartition, consumers: List[str], first_index: int) -> int:
        racks = self.partition_racks.get(tp)
        if not racks:
            return -1
        n = len(consumers)
        for i in range(n):
            index = (first_index + i) % n
            rack = self.consumer_racks.get(consumers[index])
            if rack is not None and rack in racks:
                return index
        return -1


class AbstractStickyAssignor(JavaStyleAssignor):
    """Sticky assignment: as balanced as possible, then moving as few partitions as possible."""

    #: Initial capacity of the Java HashMap holding the subscriptions. The coordinator uses
    #: a default one (16); some of Java's unit tests size it to the member count, which
    #: changes the order members are visited in. Only for reproducing those tests.
    subscriptions_map_initial_capacity: int = 16

    def __init__(self) -> None:
        # Like Java's field, kept across rebalances of this assignor instance.
        self.max_generation = DEFAULT_GENERATION
        # Partitions changing owner in the last assignment (None: the general algorithm ran
        # and the cooperative assignor must compute them itself).
        self.partitions_transferring_ownership: Optional[Dict[TopicPartition, str]] = {}

    @abc.abstractmethod
    def member_data(self, subscription: Subscription) -> MemberData:
        """The previously owned partitions and generation this member reports."""

    def assign_partitions(self, partitions_per_topic: Dict[str, List[PartitionInfo]],
                          subscriptions: Dict[str, Subscription]) -> Dict[str, List[TopicPartition]]:
        from kproto.consumer.classic.assignors.general_sticky import GeneralAssignmentBuilder

        # Java iterates the subscriptions HashMap, and (constrained) a default HashMap of
        # owned partitions filled in that order.
        order = member_hash_order(subscriptions, self.subscriptions_map_initial_capacity)
        owned_order = member_hash_order(order)
        all_partitions = [p for infos in partitions_per_topic.values() for p in infos]
        rack_info = RackInfo(all_partitions, subscriptions, order, self.prefer_rack_aware_logic)
        owned, multiple_owners, all_equal = self._all_subscriptions_equal(
            set(partitions_per_topic), subscriptions, order)
        if all_equal:
            log.debug("All members subscribe to the same topics: constrained assignment")
            self.partitions_transferring_ownership = {}
            builder = ConstrainedAssignmentBuilder(partitions_per_topic, rack_info, owned, owned_order,
                                                   multiple_owners, self.partitions_transferring_ownership)
            return builder.build()
        log.debug("Members subscribe to different topics: general assignment")
        self.partitions_transferring_ownership = None
        general = GeneralAssignmentBuilder(partitions_per_topic, rack_info, owned, order, subscriptions,
                                           self.member_data, self.max_generation)
        return general.build()

    def _all_subscriptions_equal(self, all_topics: Set[str], subscriptions: Dict[str, Subscription],
                                 order: List[str]
                                 ) -> Tuple[Dict[str, List[TopicPartition]], Set[TopicPartition], bool]:
        """Java's ``allSubscriptionsEqual``: whether every member has the same topics, plus
        each member's valid owned partitions (a partition claimed by two members of the
        same generation is dropped from both; across generations the newer claim wins)."""
        all_equal = True
        subscribed: Set[str] = set()
        owned: Dict[str, List[TopicPartition]] = {}
        multiple_owners: Set[TopicPartition] = set()
        previous_owner: Dict[TopicPartition, str] = {}
        for consumer in order:
            sub = subscriptions[consumer]
            if not subscribed:
                # As in Java: initialised from the first non-empty subscription met.
                subscribed.update(sub.topics)
            elif all_equal and not (len(sub.topics) == len(subscribed) and subscribed.issuperset(sub.topics)):
                all_equal = False
            data = self.member_data(sub)
            generation = data.generation if data.generation is not None else DEFAULT_GENERATION
            self.max_generation = max(self.max_generation, generation)
            mine: List[TopicPartition] = []
            owned[consumer] = mine
            for tp in data.partitions:
                if tp.topic not in all_topics:
                    continue
                other = previous_owner.get(tp)
                if other is None:
                    mine.append(tp)
                    previous_owner[tp] = consumer
                    continue
                other_generation = subscriptions[other].generation_id
                other_generation = other_generation if other_generation >= 0 else DEFAULT_GENERATION
                if generation == other_generation:
                    log.error("Members %s and %s both claim %s in generation %d; it is taken from both",
                              consumer, other, tp, generation)
                    multiple_owners.add(tp)
                    _remove_first(owned[other], tp)
                    previous_owner[tp] = consumer
                elif generation > other_generation:
                    mine.append(tp)
                    _remove_first(owned[other], tp)
                    previous_owner[tp] = consumer
                else:
                    log.warning("Members %s (generation %d) and %s (generation %d) both claim %s; the "
                                "newer generation keeps it", consumer, generation, other, other_generation, tp)
        return owned, multiple_owners, all_equal


def _remove_first(items: List[TopicPartition], tp: TopicPartition) -> None:
    try:
        items.remove(tp)
    except ValueError:
        pass


def sorted_topics(partitions_per_topic: Dict[str, List[PartitionInfo]]) -> List[str]:
    return sorted(partitions_per_topic, key=java_str_key)


class ConstrainedAssignmentBuilder:
    """Java's constrained algorithm (every member subscribes to the same topics):

    1. each member keeps its owned partitions (rack-matching ones when rack-aware) up to
       ``min_quota``, or ``max_quota`` while fewer than ``total % members`` members have more
       than ``min_quota``;
    2. rack-aware only: unassigned partitions go round-robin to unfilled members on a rack
       holding a replica;
    3. the rest go round-robin to unfilled members, then one each to members at ``min_quota``.
    """

    def __init__(self, partitions_per_topic: Dict[str, List[PartitionInfo]], rack_info: RackInfo,
                 owned: Dict[str, List[TopicPartition]], order: List[str],
                 multiple_owners: Set[TopicPartition], transferring: Dict[TopicPartition, str]) -> None:
        self.partitions_per_topic = partitions_per_topic
        self.rack_info = rack_info
        self.owned = owned
        self.order = order
        self.multiple_owners = multiple_owners
        self.transferring = transferring
        self.all_revoked: Set[TopicPartition] = set()
        self.under_min: List[str] = []
        self.exactly_min: List[str] = []
        total = sum(len(v) for v in partitions_per_topic.values())
        n = len(owned)
        self.min_quota = total // n if n else 0
        self.max_quota = -(-total // n) if n else 0
        self.expected_over_min = total % n if n else 0
        self.current_over_min = 0
        self.assignment: Dict[str, List[TopicPartition]] = {c: [] for c in owned}
        self.assigned: List[TopicPartition] = []

    def build(self) -> Dict[str, List[TopicPartition]]:
        self._assign_owned_partitions()
        assigned = set(self.assigned)
        unassigned = [TopicPartition(t, i) for t in sorted_topics(self.partitions_per_topic)
                      for i in range(len(self.partitions_per_topic[t]))
                      if TopicPartition(t, i) not in assigned]
        self.under_min.sort(key=java_str_key)
        self.exactly_min.sort(key=java_str_key)
        unassigned = self.rack_info.sort_partitions_by_rack_consumers(unassigned)
        unassigned = self._assign_rack_aware_round_robin(unassigned)
        self._assign_round_robin(unassigned)
        self._verify_unfilled_members()
        return self.assignment

    def _assign_owned_partitions(self) -> None:
        for consumer in self.order:
            owned = sorted((tp for tp in self.owned[consumer] if not self.rack_info.racks_mismatch(consumer, tp)),
                           key=lambda tp: (tp.partition, java_str_key(tp.topic)))
            owned = [tp for tp in owned if tp not in self.multiple_owners]
            mine = self.assignment[consumer]
            if len(owned) < self.min_quota:
                mine.extend(owned)
                self.assigned.extend(owned)
                self.under_min.append(consumer)
            elif len(owned) >= self.max_quota and self.current_over_min < self.expected_over_min:
                self.current_over_min += 1
                if self.current_over_min == self.expected_over_min:
                    self.exactly_min.clear()
                mine.extend(owned[:self.max_quota])
                self.assigned.extend(owned[:self.max_quota])
                self.all_revoked.update(owned[self.max_quota:])
            else:
                mine.extend(owned[:self.min_quota])
                self.assigned.extend(owned[:self.min_quota])
                self.all_revoked.update(owned[self.min_quota:])
                if self.current_over_min < self.expected_over_min:
                    self.exactly_min.append(consumer)

    def _assign_rack_aware_round_robin(self, unassigned: List[TopicPartition]) -> List[TopicPartition]:
        if not self.rack_info.consumer_racks:
            return unassigned
        left: List[TopicPartition] = []
        next_index = 0
        for tp in unassigned:
            consumer = None
            index = self.rack_info.next_rack_consumer(tp, self.under_min, next_index)
            if index >= 0:
                consumer = self.under_min[index]
                count = len(self.assignment[consumer]) + 1
                if count >= self.min_quota:
                    self.under_min.remove(consumer)
                    if count < self.max_quota:
                        self.exactly_min.append(consumer)
                else:
                    index += 1
                next_index = index % len(self.under_min) if self.under_min else 0
            elif self.exactly_min:
                first = self.rack_info.next_rack_consumer(tp, self.exactly_min, 0)
                if first >= 0:
                    consumer = self.exactly_min[first]
                    if len(self.assignment[consumer]) + 1 == self.max_quota:
                        del self.exactly_min[first]
            if consumer is not None:
                self._assign_new_partition(tp, consumer)
            else:
                left.append(tp)
        return left

    def _assign_round_robin(self, unassigned: List[TopicPartition]) -> None:
        # ``pos`` plays Java's iterator over the under-min list: the next index it returns;
        # ``remove()`` drops the element it returned last.
        pos = 0
        for i, tp in enumerate(unassigned):
            if pos < len(self.under_min):
                consumer = self.under_min[pos]
                pos += 1
            elif not self.under_min and not self.exactly_min:
                raise IllegalStateError("No more unfilled consumers to be assigned; left: {}".format(unassigned[i:]))
            elif not self.under_min:
                consumer = self.exactly_min.pop(0)
            else:
                consumer = self.under_min[0]
                pos = 1
            count = self._assign_new_partition(tp, consumer)
            if count == self.min_quota:
                pos -= 1
                del self.under_min[pos]
                self.exactly_min.append(consumer)
            elif count == self.max_quota:
                self.current_over_min += 1
                if self.current_over_min == self.expected_over_min and i != len(unassigned) - 1:
                    log.error("Filled the last member up to max_quota with partitions still to assign")

    def _assign_new_partition(self, tp: TopicPartition, consumer: str) -> int:
        mine = self.assignment[consumer]
        mine.append(tp)
        if tp in self.all_revoked or tp in self.multiple_owners:
            self.transferring[tp] = consumer
        return len(mine)

    def _verify_unfilled_members(self) -> None:
        if not self.under_min:
            return
        if self.current_over_min != self.expected_over_min:
            raise IllegalStateError("Fewer members than expected got more than min_quota partitions, "
                                    "but no partitions are left to assign")
        for member in self.under_min:
            if len(self.assignment[member]) != self.min_quota:
                raise IllegalStateError("Member {} did not reach min_quota partitions".format(member))
