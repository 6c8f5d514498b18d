"""Assignors written for aiokafka and kafka-python, as kproto's coordinators run them.

Owns what ``resolve.resolve_assignors`` does with a class or instance from those libraries,
so an application's ``partition_assignment_strategy`` keeps working after its import
changes (both libraries' applications pass classes, aiokafka's default being
``(RoundRobinPartitionAssignor,)``):

- their own assignors (``aiokafka.coordinator.assignors.roundrobin.RoundRobinPartitionAssignor``,
  ``kafka.coordinator.assignors.range.RangePartitionAssignor``, their sticky ones)
  become kproto's assignor of the same protocol name (:func:`builtin_name`): the group
  sees the same name and the same subscription user data, and the assignment is Java's.
  (Run as they are, kafka-python 3.0's range drops members when static and dynamic ones
  interleave, its roundrobin fails when a member skips a topic, and aiokafka's sticky keeps
  its state on the class, shared by every consumer of the process.)
- an application's own subclass of aiokafka's ``AbstractPartitionAssignor`` runs under
  :class:`AiokafkaAssignor`, which speaks aiokafka's interface to it: members as
  ``{member_id: metadata}`` with ``subscription``, ``user_data`` and ``version``, its
  results in aiokafka's shapes, ``on_assignment(assignment)`` with one argument.
- an application's own kafka-python assignor needs nothing: kafka-python 3's interface is
  kproto's (see ``abstract``).

Neither library is imported: their classes are recognised by the modules defining them.
"""

from __future__ import annotations

import inspect
from typing import Any, Collection, Dict, List, NamedTuple, Optional, Tuple

from kproto.consumer.classic.assignors.abstract import AbstractPartitionAssignor, normalize_members
from kproto.consumer.classic.consumer_protocol import Assignment, Subscription, coerce_assignment, coerce_subscription
from kproto.consumer.config import ASSIGNOR_NAMES
from kproto.errors import KafkaConfigurationError
from kproto.structs import TopicPartition

#: Where aiokafka and kafka-python define their assignors.
_LIBRARY_MODULES = ("aiokafka.coordinator.assignors.", "kafka.coordinator.assignors.")


def _class_of(value: Any) -> type:
    return value if inspect.isclass(value) else type(value)


def builtin_name(value: Any) -> Optional[str]:
    """The kproto assignor name (one of ``ASSIGNOR_NAMES``) standing for ``value``, one of
    aiokafka's or kafka-python's own assignors (class or instance); None for anything
    else, subclasses defined elsewhere included (they may assign differently)."""
    cls = _class_of(value)
    if not cls.__module__.startswith(_LIBRARY_MODULES):
        return None
    name = cls.__dict__.get("name")
    return name if isinstance(name, str) and name in ASSIGNOR_NAMES else None


def is_aiokafka_assignor(value: Any) -> bool:
    """Whether ``value`` (class or instance) implements aiokafka's assignor interface."""
    return any(base.__name__ == "AbstractPartitionAssignor" and base.__module__.startswith("aiokafka.")
               for base in _class_of(value).__mro__)


class AiokafkaMemberMetadata(NamedTuple):
    """A member's subscription as aiokafka's assignors read it (its
    ``ConsumerProtocolMemberMetadata``)."""

    version: int
    subscription: List[str]
    user_data: bytes


class AiokafkaMemberAssignment(NamedTuple):
    """A member's assignment as aiokafka's ``on_assignment`` receives it (its
    ``ConsumerProtocolMemberAssignment``)."""

    version: int
    assignment: List[Tuple[str, List[int]]]
    user_data: bytes

    def partitions(self) -> List[TopicPartition]:
        return [TopicPartition(topic, p) for topic, partitions in self.assignment for p in partitions]


class AiokafkaAssignor(AbstractPartitionAssignor):
    """An assignor written for aiokafka (its class, whose methods are classmethods, or an
    instance), run by kproto's coordinator."""

    def __init__(self, assignor: Any) -> None:
        name = getattr(assignor, "name", None)
        if not isinstance(name, str) or not name:
            raise KafkaConfigurationError("{!r} is not a partition assignor: an aiokafka assignor needs its "
                                          "protocol name as a string class attribute `name`".format(assignor))
        self.assignor = assignor
        self.name = name

    def __repr__(self) -> str:
        return "AiokafkaAssignor({!r})".format(self.assignor)

    def metadata(self, topics: Collection[str]) -> Subscription:
        return coerce_subscription(self.assignor.metadata(sorted(topics)))

    def assign(self, cluster: Any, members: Any) -> Dict[str, Assignment]:
        theirs = {m.member_id: AiokafkaMemberMetadata(m.metadata.version, list(m.metadata.topics),
                                                      m.metadata.user_data or b"")
                  for m in normalize_members(members)}
        return {member_id: coerce_assignment(a) for member_id, a in self.assignor.assign(cluster, theirs).items()}

    def on_assignment(self, assignment: Assignment, generation: Any = None) -> None:
        ours = coerce_assignment(assignment)
        self.assignor.on_assignment(AiokafkaMemberAssignment(ours.version, ours.assigned_partitions,
                                                             ours.user_data or b""))
        # aiokafka's sticky assignor has this hook (kafka-python's interface) for its user data.
        on_generation = getattr(self.assignor, "on_generation_assignment", None)
        if callable(on_generation):
            on_generation(self._generation_id(generation))
