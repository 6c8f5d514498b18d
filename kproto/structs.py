"""Plain value types shared by every layer: topic-partitions, offsets, records, brokers,
the isolation level.

Field names and defaults match kafka-python's ``kafka.structs`` and its ``ConsumerRecord``
so code written against kafka-python keeps working after switching the import.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple, Optional


class IsolationLevel(IntEnum):
    """Java's ``IsolationLevel``: which records a fetch or an offset lookup may see. The
    value is the byte Fetch (v4+) and ListOffsets (v2+) requests carry."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class TopicPartition(NamedTuple):
    """A topic name and a partition number."""

    topic: str
    partition: int


#: ``ConsumerGroupMetadata.state``: kafka-python's ``MemberState`` values.
UNJOINED, REBALANCING, STABLE = "<unjoined>", "<rebalancing>", "<stable>"


class ConsumerGroupMetadata(NamedTuple):
    """A snapshot of a consumer's group membership (``KafkaConsumer.group_metadata()``):
    Java's ``ConsumerGroupMetadata`` (what a transactional producer's
    ``sendOffsetsToTransaction`` needs so the broker can fence a stale member, KIP-447)
    plus kafka-python's ``state`` (:data:`UNJOINED`, :data:`REBALANCING`, :data:`STABLE`),
    with kafka-python's fields in its order: ``kafka.structs.ConsumerGroupMetadata(*m)``
    converts one for kafka-python's producer. The generation is a KIP-848 member's epoch."""

    group_id: Optional[str] = None
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: Optional[str] = None
    state: str = UNJOINED


def check_partition(partition: Any) -> TopicPartition:
    """``partition`` if it is a TopicPartition; TypeError otherwise (kafka-python's check)."""
    if not isinstance(partition, TopicPartition):
        raise TypeError("partition must be a TopicPartition namedtuple, not {!r}".format(partition))
    return partition


class OffsetAndMetadata(NamedTuple):
    """A committed (or to-be-committed) offset with its metadata string and leader epoch."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    """An offset found by timestamp (``offsets_for_times``)."""

    offset: int
    timestamp: int
    leader_epoch: Optional[int] = None


class BrokerMetadata(NamedTuple):
    """A broker as the cluster metadata describes it."""

    node_id: Any  # int for brokers; a str like "bootstrap-0" before the first metadata
    host: str
    port: int
    rack: Optional[str] = None


class ConsumerRecord(NamedTuple):
    """One record returned by ``poll()``, field for field as kafka-python returns it."""

    topic: str
    partition: int
    leader_epoch: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[tuple[str, Optional[bytes]], ...]  # () when none (see kproto.records.Record)
    checksum: Optional[int]
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


class ShareConsumerRecord(NamedTuple):
    """One record returned by ``KafkaShareConsumer.poll()``: ``ConsumerRecord``'s fields and
    ``delivery_count``, how many times the share group handed this record out (1 the first
    time; each release or lock expiry adds one on the next delivery)."""

    topic: str
    partition: int
    leader_epoch: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[tuple[str, Optional[bytes]], ...]
    checksum: Optional[int]
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int
    delivery_count: int


class TopicIdPartition(NamedTuple):
    """A partition named by its topic id and its topic-partition (Java's ``TopicIdPartition``)."""

    topic_id: Any  # uuid.UUID
    topic_partition: TopicPartition

    @property
    def topic(self) -> str:
        return self.topic_partition.topic

    @property
    def partition(self) -> int:
        return self.topic_partition.partition
