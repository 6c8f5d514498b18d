"""The ``roundrobin`` assignor (Java's ``RoundRobinAssignor``).

All partitions of all subscribed topics, sorted by topic then partition, dealt in turn to the
members in ``MemberInfo`` order (static members by instance id first, then member ids),
skipping members not subscribed to the partition's topic.
"""

from __future__ import annotations

from typing import Dict, List

from kproto.consumer.classic.assignors._java import java_str_key
from kproto.consumer.classic.assignors.abstract import JavaStyleAssignor, PartitionInfo, member_sort_key
from kproto.consumer.classic.consumer_protocol import Subscription
from kproto.structs import TopicPartition


class RoundRobinPartitionAssignor(JavaStyleAssignor):
    """Java's ``RoundRobinAssignor``; results identical for the same members and metadata."""

    name = "roundrobin"

    def assign_partitions(self, partitions_per_topic: Dict[str, List[PartitionInfo]],
                          subscriptions: Dict[str, Subscription]) -> Dict[str, List[TopicPartition]]:
        assignment: Dict[str, List[TopicPartition]] = {mid: [] for mid in subscriptions}
        if not subscriptions:
            return assignment
        members = sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id))
        topic_sets = {m: set(subscriptions[m].topics) for m in members}
        all_topics = sorted({t for s in topic_sets.values() for t in s}, key=java_str_key)
        i = 0
        for topic in all_topics:
            infos = partitions_per_topic.get(topic)
            if infos is None:
                continue
            # Java numbers partitions 0..count-1 here (it works from partition counts).
            for p in range(len(infos)):
                while topic not in topic_sets[members[i]]:
                    i = (i + 1) % len(members)
                assignment[members[i]].append(TopicPartition(topic, p))
                i = (i + 1) % len(members)
        return assignment
