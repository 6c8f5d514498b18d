"""The partition-assignor interface, for the built-in assignors and custom ones.

Owns ``AbstractPartitionAssignor`` (kafka-python's interface, plus Java's
``ConsumerPartitionAssignor`` view), ``RebalanceProtocol``, ``GroupMember``, and the small
cluster view assignors read (``ClusterView``), so assignors never touch the network client.

Writing a custom assignor: subclass ``AbstractPartitionAssignor``, set ``name`` (the
protocol name sent in JoinGroup; every member must agree on it), implement
``assign(cluster, members)`` returning ``{member_id: Assignment}`` for every member, and
optionally ``metadata(topics)``/``subscription_user_data(topics)`` (what this member sends),
``on_assignment(assignment, generation)`` (called on every member after SyncGroup) and
``supported_protocols()`` (``[RebalanceProtocol.EAGER]`` unless it follows KIP-429). Subclasses
of ``JavaStyleAssignor`` implement Java's simpler
``assign_partitions(partitions_per_topic, subscriptions) -> {member_id: [TopicPartition]}``
instead.

What ``assign`` receives: ``cluster`` has ``partitions_for_topic(topic) -> set[int] | None``
and, for KIP-881 rack-aware assignment, either ``partition_racks(topic) -> {partition:
racks of its replicas}`` or ``partition_metadata(tp).replicas`` plus
``broker_metadata(node_id).rack`` (what ``kproto.net``'s ClusterMetadata offers); ``members`` is a list of
``GroupMember`` (``member_id``, ``group_instance_id``, ``metadata``: a decoded
``Subscription``) in JoinGroup response order. For kafka-python 2.x compatibility a dict
``{member_id: subscription}`` is accepted too.
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from enum import IntEnum
from typing import (Any, Collection, Dict, Iterable, List, Mapping, NamedTuple, Optional, Set,
                    Tuple)

from kproto.consumer.classic.assignors._java import java_str_key
from kproto.consumer.classic.consumer_protocol import (
    HIGHEST_VERSION,
    Assignment,
    Subscription,
    coerce_subscription,
)
from kproto.structs import TopicPartition

log = logging.getLogger("kproto.classic.assignors")


class RebalanceProtocol(IntEnum):
    """KIP-429 rebalance protocols, ordered as Java orders them (EAGER < COOPERATIVE).

    EAGER: every member revokes all its partitions before joining. COOPERATIVE: members keep
    their partitions through the join; only partitions that move are revoked, and a second
    rebalance hands them to their new owner.
    """

    EAGER = 0
    COOPERATIVE = 1


class PartitionInfo(NamedTuple):
    """One partition as the assignors see it: its number and its replicas' racks."""

    topic: str
    partition: int
    replica_racks: Tuple[Optional[str], ...] = ()


@dataclass
class GroupMember:
    """A JoinGroup response member, with its metadata decoded (kafka-python's shape)."""

    member_id: str
    group_instance_id: Optional[str]
    metadata: Subscription


class ClusterView:
    """A static cluster for assignors: partition counts (or lists) and optional replica racks.

    ``ClusterView({"t0": 3, "t1": [0, 1]}, racks={("t0", 0): {"a", "b"}})``.
    """

    def __init__(self, partitions: Mapping[str, Any],
                 racks: Optional[Mapping[Tuple[str, int], Iterable[Optional[str]]]] = None) -> None:
        self._partitions: Dict[str, Set[int]] = {
            t: set(range(v)) if isinstance(v, int) else set(v) for t, v in partitions.items()}
        self._racks = {k: tuple(v) for k, v in (racks or {}).items()}

    def partitions_for_topic(self, topic: str) -> Optional[Set[int]]:
        return self._partitions.get(topic)

    def partition_racks(self, topic: str) -> Dict[int, Tuple[Optional[str], ...]]:
        return {p: self._racks.get((topic, p), ()) for p in self._partitions.get(topic, ())}


def _replica_racks_from_metadata(cluster: Any, topic: str, partitions: Iterable[int]
                                 ) -> Dict[int, Tuple[Optional[str], ...]]:
    """Replica racks from a ``kproto.net`` ClusterMetadata-like object: the partition's
    replica node ids (``partition_metadata(tp).replicas``) and each broker's ``rack``
    (``broker_metadata(node_id)``; unknown brokers have no rack, like Java's Node)."""
    racks: Dict[int, Tuple[Optional[str], ...]] = {}
    for p in partitions:
        meta = cluster.partition_metadata(TopicPartition(topic, p))
        replicas = getattr(meta, "replicas", None) or ()
        brokers = (cluster.broker_metadata(node) for node in replicas)
        racks[p] = tuple(getattr(b, "rack", None) if b is not None else None for b in brokers)
    return racks


def partitions_per_topic(cluster: Any, topics: Iterable[str]) -> Dict[str, List[PartitionInfo]]:
    """Java's ``AbstractPartitionAssignor.assign(Cluster, ...)`` preparation: for each
    subscribed topic with metadata, its partitions sorted by number (topics without
    metadata or without partitions are left out), with their replicas' racks when the
    cluster tells them (``partition_racks(topic)``, or ClusterMetadata's partition and
    broker metadata)."""
    result: Dict[str, List[PartitionInfo]] = {}
    racks_of = getattr(cluster, "partition_racks", None)
    from_metadata = hasattr(cluster, "partition_metadata") and hasattr(cluster, "broker_metadata")
    for topic in topics:
        parts = cluster.partitions_for_topic(topic)
        if not parts:
            log.debug("Skipping assignment for topic %s since no metadata is available", topic)
            continue
        racks: Mapping[int, Collection[Optional[str]]] = {}
        if racks_of is not None:
            racks = racks_of(topic)
        elif from_metadata:
            racks = _replica_racks_from_metadata(cluster, topic, parts)
        result[topic] = [PartitionInfo(topic, p, tuple(racks.get(p, ()) or ())) for p in sorted(parts)]
    return result


def normalize_members(members: Any) -> List[GroupMember]:
    """``GroupMember`` list from a list of member-like objects or a ``{member_id: metadata}``
    dict; metadata may be a ``Subscription``, bytes, or a kafka-python subscription."""
    result: List[GroupMember] = []
    if isinstance(members, Mapping):
        items: Iterable[Tuple[str, Optional[str], Any]] = (
            (mid, getattr(md, "group_instance_id", None), md) for mid, md in members.items())
    else:
        items = ((m.member_id, getattr(m, "group_instance_id", None), m.metadata) for m in members)
    for member_id, instance_id, metadata in items:
        sub = coerce_subscription(metadata, instance_id)
        result.append(GroupMember(member_id, sub.group_instance_id, sub))
    return result


class AbstractPartitionAssignor(abc.ABC):
    """Base of every assignor (kafka-python's interface; Java's names as aliases)."""

    #: Protocol name sent in JoinGroup; also the name ``partition_assignment_strategy`` uses.
    name: str = ""
    #: ConsumerProtocol version this assignor's ``metadata()`` asks for (Java sends the latest).
    version: int = HIGHEST_VERSION

    def supported_protocols(self) -> List[RebalanceProtocol]:
        """Rebalance protocols this assignor supports, most preferred first."""
        return [RebalanceProtocol.EAGER]

    def subscription_user_data(self, topics: Collection[str]) -> Optional[bytes]:
        """User data this member sends with its subscription (Java's ``subscriptionUserData``)."""
        return None

    def metadata(self, topics: Collection[str]) -> Subscription:
        """This member's subscription for JoinGroup, before the coordinator adds the owned
        partitions, generation and rack (see ``consumer_protocol.Subscription``)."""
        return Subscription(topics=sorted(topics), user_data=self.subscription_user_data(topics),
                            version=self.version)

    @abc.abstractmethod
    def assign(self, cluster: Any, members: Any) -> Dict[str, Assignment]:
        """Leader only: the assignment of every member (see the module docstring)."""

    def on_assignment(self, assignment: Assignment, generation: Any = None) -> None:
        """Called on every member with its own assignment after SyncGroup. ``generation``
        is the generation id (an int) or an object with ``generation_id``."""

    @staticmethod
    def _generation_id(generation: Any) -> int:
        if generation is None:
            return -1
        return int(getattr(generation, "generation_id", generation))


class JavaStyleAssignor(AbstractPartitionAssignor):
    """Java's ``AbstractPartitionAssignor``: gathers partitions per subscribed topic, calls
    ``assign_partitions`` and wraps each member's partitions in an ``Assignment``."""

    #: Use rack-aware logic even when every partition is on every rack (Java's test hook).
    prefer_rack_aware_logic: bool = False

    def assign(self, cluster: Any, members: Any) -> Dict[str, Assignment]:
        group = normalize_members(members)
        subscriptions: Dict[str, Subscription] = {m.member_id: m.metadata for m in group}
        topics: Set[str] = set()
        for sub in subscriptions.values():
            topics.update(sub.topics)
        raw = self.assign_partitions(partitions_per_topic(cluster, sorted(topics)), subscriptions)
        result = {mid: Assignment(list(raw.get(mid, [])), self.assignment_user_data(mid), self.version)
                  for mid in subscriptions}
        log.debug("%s assignment: %s", self.name, raw)
        return result

    def assignment_user_data(self, member_id: str) -> Optional[bytes]:
        return None

    @abc.abstractmethod
    def assign_partitions(self, partitions_per_topic: Dict[str, List[PartitionInfo]],
                          subscriptions: Dict[str, Subscription]) -> Dict[str, List[TopicPartition]]:
        """``subscriptions`` keeps JoinGroup member order (it stands for Java's HashMap)."""


def use_rack_aware_assignment(consumer_racks: Set[str], partition_racks: Set[str],
                              racks_per_partition: Mapping[Any, Set[str]], prefer: bool = False) -> bool:
    """KIP-881: rack-aware only if some consumer rack is a replica rack and not every
    partition has replicas on all racks (otherwise every choice is equally local).
    ``prefer`` (Java's test-only ``preferRackAwareLogic``) skips the second condition."""
    if not consumer_racks or consumer_racks.isdisjoint(partition_racks):
        return False
    if prefer:
        return True
    return not all(r == partition_racks for r in racks_per_partition.values())


def member_sort_key(member_id: str, group_instance_id: Optional[str]) -> Tuple[int, bytes]:
    """Java's ``MemberInfo`` order: static members first (by instance id), then by member id."""
    if group_instance_id is not None:
        return (0, java_str_key(group_instance_id))
    return (1, java_str_key(member_id))
