"""The classic group protocol's "consumer" embedded format: subscription and assignment metadata.

Owns the bytes a consumer puts in JoinGroup's protocol metadata (``Subscription``) and the
bytes the leader puts in SyncGroup's per-member assignment (``Assignment``), versions 0-3,
as Java's ``ConsumerProtocol`` and librdkafka write them: a leading int16 version, then the
``ConsumerProtocolSubscription``/``ConsumerProtocolAssignment`` body (never flexible). Also
the sticky assignors' own user-data formats (``StickyAssignorUserData`` v0/v1 and the
cooperative-sticky generation int32), needed to interoperate with older members.

The body is encoded and decoded by the generated ``kproto.messages`` classes; this module
adds the version prefix and Java's rules:
- a version above 3 is read (and written) as version 3: newer versions only append fields,
  so a newer member's bytes decode with the fields we know and the rest ignored;
- topics are written sorted (``String.compareTo``), owned partitions sorted by topic then
  partition and grouped by topic;
- a generation id below 0 means "none" and an empty rack id means "no rack".
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple

from kproto.errors import CorruptMessageError, IllegalArgumentError
from kproto.messages import ConsumerProtocolAssignment as _MsgAssignment
from kproto.messages import ConsumerProtocolSubscription as _MsgSubscription
from kproto.structs import TopicPartition

from kproto.consumer.classic.assignors._java import (
    default_capacity,
    hash_order,
    java_str_key,
    java_string_hash,
)

log = logging.getLogger("kproto.classic.consumer_protocol")

PROTOCOL_TYPE = "consumer"
LOWEST_VERSION = 0
HIGHEST_VERSION = 3
DEFAULT_GENERATION = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass
class Subscription:
    """One member's subscription (Java's ``ConsumerPartitionAssignor.Subscription``).

    ``group_instance_id`` is not on the wire: the coordinator fills it from the JoinGroup
    member. ``version`` is the version the bytes were decoded from (informational).
    """

    topics: List[str]
    user_data: Optional[bytes] = None
    owned_partitions: List[TopicPartition] = field(default_factory=list)
    generation_id: int = DEFAULT_GENERATION
    rack_id: Optional[str] = None
    group_instance_id: Optional[str] = None
    version: int = HIGHEST_VERSION

    @property
    def generation(self) -> Optional[int]:
        """Java's ``generationId()``: None when below 0 (v0/v1 bytes, or not in a group)."""
        return self.generation_id if self.generation_id >= 0 else None

    def encode(self, version: int = HIGHEST_VERSION) -> bytes:
        return encode_subscription(self, version)


@dataclass
class Assignment:
    """One member's assignment (Java's ``ConsumerPartitionAssignor.Assignment``).

    kafka-python's spelling is available too: ``assigned_partitions`` (``[(topic,
    [partition, ...]), ...]``) and its alias ``assignment``.
    """

    partitions_list: List[TopicPartition] = field(default_factory=list)
    user_data: Optional[bytes] = None
    version: int = HIGHEST_VERSION

    def partitions(self) -> List[TopicPartition]:
        """The assigned partitions (a method, as in kafka-python and Java)."""
        return list(self.partitions_list)

    @property
    def assigned_partitions(self) -> List[Tuple[str, List[int]]]:
        return group_partitions_by_topic(self.partitions_list)

    assignment = assigned_partitions

    def encode(self, version: int = HIGHEST_VERSION) -> bytes:
        return encode_assignment(self, version)


# --- grouping helpers -------------------------------------------------------------------


def group_partitions_by_topic(partitions: Iterable[TopicPartition]) -> List[Tuple[str, List[int]]]:
    """``[(topic, [partition, ...]), ...]`` in first-appearance order of the topics."""
    by_topic: dict[Any, Any] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return list(by_topic.items())


def _java_grouped(partitions: Iterable[TopicPartition]) -> List[Tuple[str, List[int]]]:
    # The sticky assignor's user data goes through CollectionUtils.groupPartitionsByTopic, a
    # HashMap<String, List<Integer>>: topics in HashMap order, partitions in list order.
    groups = group_partitions_by_topic(partitions)
    order = hash_order([t for t, _ in groups], java_string_hash, default_capacity(len(groups)))
    as_dict = dict(groups)
    return [(t, as_dict[t]) for t in order]


def _sorted_grouped(partitions: Iterable[TopicPartition]) -> List[Tuple[str, List[int]]]:
    ordered = sorted(partitions, key=lambda tp: (java_str_key(tp.topic), tp.partition))
    return group_partitions_by_topic(ordered)


# --- writing ----------------------------------------------------------------------------


def _w_string(out: List[bytes], s: str) -> None:
    b = s.encode("utf-8")
    if len(b) > 0x7FFF:
        raise IllegalArgumentError("string of {} bytes is longer than 32767".format(len(b)))
    out.append(_I16.pack(len(b)))
    out.append(b)


def _w_topic_partitions(out: List[bytes], groups: Sequence[Tuple[str, Sequence[int]]]) -> None:
    out.append(_I32.pack(len(groups)))
    for topic, parts in groups:
        _w_string(out, topic)
        out.append(_I32.pack(len(parts)))
        out.extend(_I32.pack(p) for p in parts)


def _check_version(version: int) -> int:
    if version < LOWEST_VERSION:
        raise IllegalArgumentError("unsupported consumer protocol version {}".format(version))
    return min(version, HIGHEST_VERSION)


def encode_subscription(subscription: Any, version: int = HIGHEST_VERSION) -> bytes:
    """Version-prefixed ``ConsumerProtocolSubscription`` bytes, as Java writes them.

    Accepts a ``Subscription`` or anything ``coerce_subscription`` understands.
    """
    sub = coerce_subscription(subscription)
    version = _check_version(version)
    body = _MsgSubscription(
        topics=sorted(sub.topics, key=java_str_key),
        user_data=None if sub.user_data is None else bytes(sub.user_data),
        owned_partitions=[_MsgSubscription.TopicPartition(topic=t, partitions=ps)
                          for t, ps in _sorted_grouped(sub.owned_partitions)] if version >= 1 else [],
        generation_id=sub.generation_id if version >= 2 else DEFAULT_GENERATION,
        rack_id=sub.rack_id if version >= 3 else None,
    )
    return _I16.pack(version) + body.encode(version)


def encode_assignment(assignment: Any, version: int = HIGHEST_VERSION) -> bytes:
    """Version-prefixed ``ConsumerProtocolAssignment`` bytes: partitions grouped by topic in
    the order the topics first appear, as Java's keyed collection does."""
    a = coerce_assignment(assignment)
    version = _check_version(version)
    body = _MsgAssignment(
        assigned_partitions=[_MsgAssignment.TopicPartition(topic=t, partitions=ps)
                             for t, ps in group_partitions_by_topic(a.partitions_list)],
        user_data=None if a.user_data is None else bytes(a.user_data),
    )
    return _I16.pack(version) + body.encode(version)


# --- reading ----------------------------------------------------------------------------


class _Reader:
    """Bounds-checked reader for the sticky user data (not a Kafka message schema, so not
    generated); every failure is a ``CorruptMessageError``."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, data: Any, what: str) -> None:
        self.buf = memoryview(bytes(data) if not isinstance(data, (bytes, bytearray, memoryview)) else data)
        self.pos = 0
        self.what = what

    def _fail(self, msg: str) -> CorruptMessageError:
        return CorruptMessageError(msg, api=self.what, offset=self.pos)

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def _take(self, n: int) -> memoryview:
        if n > self.remaining():
            raise self._fail("truncated: needed {} bytes, {} left".format(n, self.remaining()))
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return v

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self) -> str:
        n = _I16.unpack(self._take(2))[0]
        if n < 0:
            raise self._fail("non-nullable string is null")
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as e:
            raise self._fail("invalid UTF-8 in string") from e

    def count(self, min_size: int) -> int:
        n = self.i32()
        if n < 0:
            raise self._fail("non-nullable array is null")
        # Refuse counts the remaining bytes cannot hold, before allocating anything.
        if n * min_size > self.remaining():
            raise self._fail("array of {} elements does not fit in {} bytes".format(n, self.remaining()))
        return n

    def topic_partitions(self) -> List[TopicPartition]:
        result: List[TopicPartition] = []
        for _ in range(self.count(6)):
            topic = self.string()
            for _ in range(self.count(4)):
                result.append(TopicPartition(topic, self.i32()))
        return result


def read_version(data: Any, what: str = "ConsumerProtocol") -> int:
    """The leading int16 version of a ConsumerProtocol blob (negative versions rejected)."""
    return _split_version(data, what)[0]


def _split_version(data: Any, what: str) -> Tuple[int, memoryview]:
    mv = memoryview(data if isinstance(data, (bytes, bytearray, memoryview)) else bytes(data)).cast("B")
    if len(mv) < 2:
        raise CorruptMessageError("no version: {} bytes".format(len(mv)), api=what, offset=0)
    version = _I16.unpack_from(mv, 0)[0]
    if version < LOWEST_VERSION:
        raise CorruptMessageError("unsupported version {}".format(version), api=what, offset=0)
    return version, mv[2:]


def decode_subscription(data: Any) -> Subscription:
    """Parse version-prefixed subscription bytes (any version >= 0; above 3 read as 3, and
    bytes after the known fields ignored, as Java does)."""
    wire_version, body = _split_version(data, "ConsumerProtocolSubscription")
    msg = _MsgSubscription.decode(body, min(wire_version, HIGHEST_VERSION), allow_trailing=True)
    owned = [TopicPartition(tp.topic, p) for tp in msg.owned_partitions for p in tp.partitions]
    generation_id = msg.generation_id
    return Subscription(topics=list(msg.topics),
                        user_data=None if msg.user_data is None else bytes(msg.user_data),
                        owned_partitions=owned,
                        generation_id=generation_id if generation_id >= 0 else DEFAULT_GENERATION,
                        rack_id=msg.rack_id or None, version=wire_version)


def decode_assignment(data: Any) -> Assignment:
    """Parse version-prefixed assignment bytes (any version >= 0)."""
    wire_version, body = _split_version(data, "ConsumerProtocolAssignment")
    msg = _MsgAssignment.decode(body, min(wire_version, HIGHEST_VERSION), allow_trailing=True)
    partitions = [TopicPartition(tp.topic, p) for tp in msg.assigned_partitions for p in tp.partitions]
    return Assignment(partitions, None if msg.user_data is None else bytes(msg.user_data), wire_version)


# --- sticky assignors' user data --------------------------------------------------------


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: Optional[int]) -> bytes:
    """``StickyAssignorUserData`` v1 (previous assignment + generation), as Java writes it.

    With ``generation=None`` the v0 layout (no generation) is written, for tests of
    interoperability with pre-2.3 members.
    """
    out: List[bytes] = []
    _w_topic_partitions(out, _java_grouped(partitions))
    if generation is not None:
        out.append(_I32.pack(generation))
    return b"".join(out)


def decode_sticky_user_data(data: Optional[bytes]) -> Tuple[List[TopicPartition], Optional[int]]:
    """The (previous assignment, generation) a ``sticky`` member sent, as Java reads it.

    Empty or absent user data: ``([], None)``. v1 is tried first, then v0 (no generation);
    bytes neither can parse: ``([], -1)`` (the previous assignment is ignored).
    """
    if not data:
        return [], None
    try:
        r = _Reader(data, "StickyAssignorUserData")
        partitions = r.topic_partitions()
    except CorruptMessageError:
        return [], DEFAULT_GENERATION
    if r.remaining() >= 4:
        return partitions, r.i32()
    return partitions, None


def encode_cooperative_user_data(generation: int) -> bytes:
    """The cooperative-sticky assignor's user data: its last generation as an int32."""
    return _I32.pack(generation)


def decode_cooperative_user_data(data: Optional[bytes]) -> Optional[int]:
    """Generation from cooperative-sticky user data; None if absent, -1 if unparseable."""
    if data is None:
        return None
    if len(data) < 4:
        return DEFAULT_GENERATION
    return _I32.unpack_from(data, 0)[0]


# --- accepting what custom (kafka-python style) assignors hand us ----------------------


def _partitions_from(value: Any) -> List[TopicPartition]:
    """TopicPartitions from a list of TopicPartition/(topic, partition) pairs, a list of
    (topic, [partitions]) groups or objects with ``.topic``/``.partitions``, or a dict."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [TopicPartition(t, p) for t, ps in value.items() for p in ps]
    result: List[TopicPartition] = []
    for item in value:
        if isinstance(item, TopicPartition):
            result.append(item)
        elif hasattr(item, "partitions") and hasattr(item, "topic"):
            result.extend(TopicPartition(item.topic, p) for p in item.partitions)
        elif hasattr(item, "partition") and hasattr(item, "topic"):
            result.append(TopicPartition(item.topic, item.partition))
        else:
            topic, second = item
            if isinstance(second, int):
                result.append(TopicPartition(topic, second))
            else:
                result.extend(TopicPartition(topic, p) for p in second)
    return result


def coerce_subscription(value: Any, group_instance_id: Optional[str] = None) -> Subscription:
    """A ``Subscription`` from ours, encoded bytes, or a kafka-python-style object."""
    if isinstance(value, Subscription):
        sub = value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        sub = decode_subscription(value)
    else:
        gen = getattr(value, "generation_id", DEFAULT_GENERATION)
        sub = Subscription(
            topics=list(getattr(value, "topics", None) or getattr(value, "subscription", None) or []),
            user_data=getattr(value, "user_data", None),
            owned_partitions=_partitions_from(getattr(value, "owned_partitions", None)),
            generation_id=DEFAULT_GENERATION if gen is None else gen,
            rack_id=getattr(value, "rack_id", None) or None,
            version=getattr(value, "version", HIGHEST_VERSION) or 0,
        )
    if group_instance_id is not None and sub.group_instance_id != group_instance_id:
        sub = Subscription(sub.topics, sub.user_data, list(sub.owned_partitions), sub.generation_id,
                           sub.rack_id, group_instance_id, sub.version)
    return sub


def coerce_assignment(value: Any) -> Assignment:
    """An ``Assignment`` from ours, bytes, kafka-python's ConsumerProtocolAssignment (or its
    ``assigned_partitions`` list), a ``{topic: [partitions]}`` dict or a TopicPartition list."""
    if isinstance(value, Assignment):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return decode_assignment(value)
    if hasattr(value, "assigned_partitions") or hasattr(value, "assignment"):
        groups = getattr(value, "assigned_partitions", None)
        if groups is None:
            groups = value.assignment
        return Assignment(_partitions_from(groups), getattr(value, "user_data", None),
                          getattr(value, "version", HIGHEST_VERSION) or 0)
    return Assignment(_partitions_from(value))


__all__ = [
    "PROTOCOL_TYPE", "HIGHEST_VERSION", "DEFAULT_GENERATION", "Subscription", "Assignment",
    "encode_subscription", "decode_subscription", "encode_assignment", "decode_assignment",
    "read_version", "group_partitions_by_topic", "encode_sticky_user_data",
    "decode_sticky_user_data", "encode_cooperative_user_data", "decode_cooperative_user_data",
    "coerce_subscription", "coerce_assignment",
]
