"""An application's own aiokafka assignor, for the tests of ``partition_assignment_strategy``
with aiokafka's classes (``kproto.consumer.classic.assignors.python_clients``)."""

from __future__ import annotations

from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata


class Mirror(AbstractPartitionAssignor):
    """The sorted members take each topic's partitions from both ends (4 partitions, 2
    members: {0, 3} and {1, 2}, which neither range nor roundrobin gives); records what
    ``on_assignment`` received and sends ``b"mirror"`` as its user data."""

    name = "mirror"
    version = 0
    assignments: list = []

    @classmethod
    def assign(cls, cluster, members):
        ids = sorted(members)
        out: dict = {m: {} for m in ids}
        for topic in sorted({t for md in members.values() for t in md.subscription}):
            parts = sorted(cluster.partitions_for_topic(topic) or ())
            for i, p in enumerate(parts):
                out[ids[min(i, len(parts) - 1 - i) % len(ids)]].setdefault(topic, []).append(p)
        return {m: ConsumerProtocolMemberAssignment(cls.version, sorted(out[m].items()), b"m") for m in ids}

    @classmethod
    def metadata(cls, topics):
        return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), b"mirror")

    @classmethod
    def on_assignment(cls, assignment):
        cls.assignments.append(assignment.partitions())
