"""aiokafka's and kafka-python's assignor classes in ``partition_assignment_strategy``: their
own assignors become kproto's of the same name; an application's own aiokafka assignor runs
through aiokafka's interface; one that is no assignor fails at construction, named."""

from __future__ import annotations

import pytest

from kproto.consumer.classic.assignors import (ClusterView, GroupMember, RangePartitionAssignor,
                                               RoundRobinPartitionAssignor, StickyPartitionAssignor,
                                               resolve_assignors)
from kproto.consumer.classic.assignors.leader import group_protocols, perform_assignment
from kproto.consumer.classic.assignors.python_clients import AiokafkaAssignor
from kproto.consumer.classic.consumer_protocol import (Assignment, Subscription, decode_assignment,
                                                       decode_subscription)
from kproto.consumer.config import ConsumerConfig
from kproto.errors import KafkaConfigurationError
from kproto.structs import TopicPartition

aiokafka_range = pytest.importorskip("aiokafka.coordinator.assignors.range")
aiokafka_roundrobin = pytest.importorskip("aiokafka.coordinator.assignors.roundrobin")
aiokafka_sticky = pytest.importorskip("aiokafka.coordinator.assignors.sticky.sticky_assignor")
aiokafka_abstract = pytest.importorskip("aiokafka.coordinator.assignors.abstract")

from tests.support.aiokafka_assignors import Mirror  # noqa: E402


def _library_classes() -> list:
    from kafka.coordinator.assignors.range import RangePartitionAssignor as KPRange
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as KPRoundRobin
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor as KPSticky

    return [(aiokafka_range.RangePartitionAssignor, RangePartitionAssignor),
            (aiokafka_roundrobin.RoundRobinPartitionAssignor, RoundRobinPartitionAssignor),
            (aiokafka_sticky.StickyPartitionAssignor, StickyPartitionAssignor),
            (KPRange, RangePartitionAssignor), (KPRoundRobin, RoundRobinPartitionAssignor),
            (KPSticky, StickyPartitionAssignor)]


def test_the_libraries_own_assignors_become_ours_by_name():
    for theirs, ours in _library_classes():
        for given in (theirs, [theirs], (theirs,)):
            (resolved,) = resolve_assignors(given)
            assert type(resolved) is ours and resolved.name == theirs.name, theirs
    # aiokafka's default, as its users write it, in a whole configuration
    config = ConsumerConfig({"group_id": "g", "partition_assignment_strategy":
                             (aiokafka_roundrobin.RoundRobinPartitionAssignor,)})
    (resolved,) = resolve_assignors(config["partition_assignment_strategy"])
    assert type(resolved) is RoundRobinPartitionAssignor


def test_an_aiokafka_assignor_of_ones_own_runs_through_aiokafkas_interface():
    (adapted,) = resolve_assignors([Mirror])
    assert isinstance(adapted, AiokafkaAssignor) and adapted.name == "mirror"
    ((name, data),) = group_protocols([adapted], ["t"], [TopicPartition("t", 1)], 3)
    sub = decode_subscription(data)
    assert (name, sub.topics, sub.user_data, sub.owned_partitions, sub.generation_id) == \
        ("mirror", ["t"], b"mirror", [TopicPartition("t", 1)], 3)

    class JoinMember:
        def __init__(self, member_id: str, metadata: bytes) -> None:
            self.member_id, self.group_instance_id, self.metadata = member_id, None, metadata

    out = perform_assignment(adapted, ClusterView({"t": 4}), [JoinMember("b", data), JoinMember("a", data)])
    got = {m: (sorted(decode_assignment(b).partitions()), decode_assignment(b).user_data) for m, b in out.items()}
    assert got == {"a": ([TopicPartition("t", 0), TopicPartition("t", 3)], b"m"),
                   "b": ([TopicPartition("t", 1), TopicPartition("t", 2)], b"m")}
    Mirror.assignments.clear()
    adapted.on_assignment(Assignment([TopicPartition("t", 2), TopicPartition("t", 1)]), 5)
    assert [sorted(p) for p in Mirror.assignments] == [[TopicPartition("t", 1), TopicPartition("t", 2)]]


def test_a_subclass_of_an_aiokafka_builtin_is_run_not_replaced():
    class Renamed(aiokafka_roundrobin.RoundRobinPartitionAssignor):
        name = "roundrobin-own"

    (adapted,) = resolve_assignors([Renamed])
    assert isinstance(adapted, AiokafkaAssignor)
    members = [GroupMember(m, None, Subscription(["t"])) for m in ("b", "a")]
    result = {m: sorted(a.partitions()) for m, a in adapted.assign(ClusterView({"t": 4}), members).items()}
    expected = RoundRobinPartitionAssignor().assign(ClusterView({"t": 4}), members)
    assert result == {m: sorted(a.partitions()) for m, a in expected.items()}


def test_an_aiokafka_class_without_a_name_fails_at_construction_naming_it():
    class Nameless(aiokafka_abstract.AbstractPartitionAssignor):
        @classmethod
        def assign(cls, cluster, members):
            return {}

        @classmethod
        def metadata(cls, topics):
            return None

        @classmethod
        def on_assignment(cls, assignment):
            pass

    with pytest.raises(KafkaConfigurationError, match="Nameless"):
        ConsumerConfig({"group_id": "g", "partition_assignment_strategy": (Nameless,)})
    with pytest.raises(KafkaConfigurationError, match="Nameless"):
        resolve_assignors([Nameless])
