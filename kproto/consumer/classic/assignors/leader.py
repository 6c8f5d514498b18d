"""The two places the classic coordinator hands over to the assignors, as Java's
``ConsumerCoordinator`` does them: the JoinGroup protocol list each member sends, and the
leader's assignment of the whole group for SyncGroup.

Owns only the glue (what goes into a subscription, decoding members, encoding results and
Java's cooperative sanity check); the coordinator owns the requests and the state.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from kproto.consumer.classic.assignors.abstract import GroupMember, RebalanceProtocol
from kproto.consumer.classic.consumer_protocol import (
    DEFAULT_GENERATION,
    HIGHEST_VERSION,
    Subscription,
    coerce_assignment,
    coerce_subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kproto.errors import IllegalStateError
from kproto.structs import TopicPartition

log = logging.getLogger("kproto.classic.assignors")


def group_protocols(assignors: Sequence[Any], topics: Iterable[str],
                    owned_partitions: Iterable[TopicPartition] = (),
                    generation_id: int = DEFAULT_GENERATION,
                    rack_id: Optional[str] = None) -> List[Tuple[str, bytes]]:
    """``[(assignor name, subscription bytes)]`` for JoinGroup, in preference order.

    As Java: every assignor's subscription is v3 with the subscribed topics, that assignor's
    user data, the partitions currently owned (empty after an eager revocation), the current
    generation and the client rack. kafka-python-style assignors returning their own
    subscription objects from ``metadata()`` are accepted.
    """
    topic_set = set(topics)
    owned = list(owned_partitions)
    result = []
    for assignor in assignors:
        base = coerce_subscription(assignor.metadata(topic_set))
        sub = Subscription(sorted(topic_set), base.user_data, owned, generation_id, rack_id or None)
        result.append((assignor.name, encode_subscription(sub, HIGHEST_VERSION)))
    return result


def decode_members(join_members: Iterable[Any]) -> List[GroupMember]:
    """JoinGroup response members (``member_id``, ``group_instance_id``, ``metadata``
    bytes) as ``GroupMember``s with decoded subscriptions, in response order."""
    result = []
    for m in join_members:
        sub = decode_subscription(m.metadata)
        instance_id = getattr(m, "group_instance_id", None)
        sub.group_instance_id = instance_id
        result.append(GroupMember(m.member_id, instance_id, sub))
    return result


def perform_assignment(assignor: Any, cluster: Any, join_members: Iterable[Any],
                       protocol: RebalanceProtocol = RebalanceProtocol.EAGER) -> Dict[str, bytes]:
    """The leader's SyncGroup assignments ``{member_id: assignment bytes}`` for every member.

    Under the COOPERATIVE protocol it checks, as Java does, that no partition is given to a
    member while another member still reports owning it; an assignor breaking that raises
    ``IllegalStateError``.
    """
    members = decode_members(join_members)
    raw = assignor.assign(cluster, members)
    assignments = {m.member_id: coerce_assignment(raw.get(m.member_id, [])) for m in members}
    unknown = set(raw) - set(assignments)
    if unknown:
        log.warning("Assignor %s assigned partitions to unknown members %s", assignor.name, sorted(unknown))
    if protocol == RebalanceProtocol.COOPERATIVE:
        _validate_cooperative(members, assignments)
    return {member_id: encode_assignment(a) for member_id, a in assignments.items()}


def _validate_cooperative(members: List[GroupMember], assignments: Dict[str, Any]) -> None:
    added, revoked = set(), set()
    for m in members:
        owned = set(m.metadata.owned_partitions)
        assigned = set(assignments[m.member_id].partitions())
        added |= assigned - owned
        revoked |= owned - assigned
    both = added & revoked
    if both:
        raise IllegalStateError("Assignor supporting the COOPERATIVE protocol violates its requirements: "
                                "{} assigned while still owned by another member".format(sorted(both)))
