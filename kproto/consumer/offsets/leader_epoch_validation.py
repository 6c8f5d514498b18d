"""Sans-IO position validation after a leader change (OffsetForLeaderEpoch, KIP-320).

Owns: which positions need validating, the OffsetForLeaderEpoch request per leader node,
per-partition response handling (Java's OffsetsForLeaderEpochClient), and applying the
answers: when the leader's end offset
for our position's epoch is below our position the log was truncated, and we either
reposition there (a reset policy is set) or report ``LogTruncationError`` with the
divergent offset (policy ``none``). The decision itself is
SubscriptionState.maybe_complete_validation's; this module asks and reports.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, NamedTuple, Optional

from kproto import errors
from kproto.consumer.subscription_state import FetchPosition, SubscriptionState
from kproto.errors import ErrorCode
from kproto.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest as Req
from kproto.messages.offset_for_leader_epoch import (OffsetForLeaderEpochRequest_OffsetForLeaderPartition,
                                                     OffsetForLeaderEpochResponse)
from kproto.structs import OffsetAndMetadata, TopicPartition

from .offset_fetcher_utils import (PARTITION_RETRIABLE, answered_partitions, current_leader, format_partitions,
                                   topic_authorization_error)

if TYPE_CHECKING:
    from kproto.net.metadata import ClusterMetadata

log = logging.getLogger("kproto.consumer.offsets")

# v2 added the current leader epoch that lets a consumer ask (KIP-320). Java waits for v3
# (Kafka 2.3, where ReplicaId appeared); librdkafka uses v2, and so does kproto, so that
# brokers stopping at v2 (the librdkafka mock) still validate. Older brokers: no validation.
MIN_CONSUMER_VERSION = 2
CONSUMER_REPLICA_ID = -1
UNDEFINED_EPOCH = -1


class EpochEndOffset(NamedTuple):
    """The leader's answer for one partition: the end offset of the requested epoch."""

    leader_epoch: int
    end_offset: int


@dataclass
class OffsetForEpochResult:
    """One OffsetForLeaderEpoch response, sorted (Java's OffsetForEpochResult)."""

    end_offsets: dict[TopicPartition, EpochEndOffset] = field(default_factory=dict)
    partitions_to_retry: set[TopicPartition] = field(default_factory=set)


def positions_to_validate(subscriptions: SubscriptionState, metadata: ClusterMetadata,
                          now_ms: int) -> dict[TopicPartition, FetchPosition]:
    """Note every assigned partition's current leader (a change moves it to
    AWAIT_VALIDATION), then the positions awaiting validation whose retry time has come."""
    subscriptions.maybe_validate_positions_for_current_leaders(lambda tp: current_leader(metadata, tp),
                                                               getattr(metadata, "update_count", None))
    positions = {tp: subscriptions.position(tp) for tp in subscriptions.partitions_needing_validation(now_ms)}
    return {tp: pos for tp, pos in positions.items() if pos is not None}


def needs_request(position: FetchPosition) -> bool:
    """Only a position that knows its epoch can be validated (else it is trusted)."""
    return position is not None and position.offset_epoch is not None


def group_validation_requests(positions: Mapping[TopicPartition, FetchPosition]
                              ) -> dict[int, dict[TopicPartition, FetchPosition]]:
    """Split positions by the leader node each one was fetched from (``current_leader``)."""
    by_node: dict[int, dict[TopicPartition, FetchPosition]] = {}
    for tp, position in positions.items():
        leader = position.current_leader.leader
        if leader is None or not needs_request(position):
            continue
        by_node.setdefault(leader, {})[tp] = position
    return by_node


def build_offset_for_leader_epoch_request(positions: Mapping[TopicPartition, FetchPosition],
                                          version: int) -> Req:
    """An OffsetForLeaderEpochRequest asking, per partition, where ``position.offset_epoch`` ends.

    ``current_leader_epoch`` fences us against a stale leader (FENCED_LEADER_EPOCH).
    """
    if version < MIN_CONSUMER_VERSION:
        raise errors.IllegalArgumentError(
            "a consumer needs OffsetForLeaderEpoch v{}+, not v{}".format(MIN_CONSUMER_VERSION, version))
    topics: dict[str, list[OffsetForLeaderEpochRequest_OffsetForLeaderPartition]] = {}
    for tp, position in positions.items():
        offset_epoch = position.offset_epoch
        if offset_epoch is None:  # not needs_request(position)
            continue
        epoch = position.current_leader.epoch
        topics.setdefault(tp.topic, []).append(Req.OffsetForLeaderPartition(
            partition=tp.partition, current_leader_epoch=UNDEFINED_EPOCH if epoch is None else epoch,
            leader_epoch=offset_epoch))
    request = Req(topics=[Req.OffsetForLeaderTopic(topic=name, partitions=parts) for name, parts in topics.items()])
    if version >= 3:
        request.replica_id = CONSUMER_REPLICA_ID
    return request


def handle_offset_for_leader_epoch_response(response: OffsetForLeaderEpochResponse,
                                            requested: Iterable[TopicPartition]) -> OffsetForEpochResult:
    """Sort the answers; leadership errors are retried, topic authorization is fatal."""
    result = OffsetForEpochResult()
    unauthorized: set[str] = set()
    wanted = set(requested)
    for tp, part in answered_partitions(response.topics, wanted, "topic", "partition"):
        code = part.error_code
        if code == ErrorCode.NONE:
            result.end_offsets[tp] = EpochEndOffset(part.leader_epoch, part.end_offset)
        elif code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            unauthorized.add(tp.topic)
        else:
            if code not in PARTITION_RETRIABLE:
                log.warning("OffsetForLeaderEpoch for %s failed with unexpected error %d; will retry", tp, code)
            result.partitions_to_retry.add(tp)
    if unauthorized:
        raise topic_authorization_error(unauthorized)
    result.partitions_to_retry.update(wanted)
    return result


def apply_validation(subscriptions: SubscriptionState, result: OffsetForEpochResult,
                     requested: Mapping[TopicPartition, FetchPosition], now_ms: int,
                     retry_backoff_ms: int) -> dict[TopicPartition, Optional[OffsetAndMetadata]]:
    """Apply one response to the SubscriptionState; returns the truncations found.

    The decision per partition is ``SubscriptionState.maybe_complete_validation``'s: no
    truncation -> FETCHING; truncation with a reset policy -> seek to the divergence point
    (or reset when the leader does not know the epoch); truncation under policy ``none`` ->
    reported here, mapped to the divergent offset (None when unknown), for the caller to
    raise with ``truncation_error``. Partitions to retry wait ``retry_backoff_ms``.
    """
    if result.partitions_to_retry:
        subscriptions.set_next_allowed_retry(result.partitions_to_retry, now_ms + retry_backoff_ms)
    truncations: dict[TopicPartition, Optional[OffsetAndMetadata]] = {}
    for tp, end in result.end_offsets.items():
        truncation = subscriptions.maybe_complete_validation(tp, requested[tp], end.end_offset, end.leader_epoch)
        if truncation is not None:
            log.info("Truncation detected for %s at fetch position %s (divergent offset %s)",
                     tp, truncation.fetch_position, truncation.divergent_offset)
            truncations[tp] = truncation.divergent_offset
    return truncations


def on_validation_response(subscriptions: SubscriptionState, response: OffsetForLeaderEpochResponse,
                           requested: Mapping[TopicPartition, FetchPosition],
                           now_ms: int, retry_backoff_ms: int, request_metadata_update: Callable[[], object],
                           pending_error: Optional[BaseException]) -> Optional[BaseException]:
    """One OffsetForLeaderEpoch answer, in both engines: decode it (a ``KafkaError`` here is
    the caller's failure path), apply it, refresh the metadata if partitions must be asked
    again, and keep a truncation found under ``auto_offset_reset="none"`` as the error the
    next position update raises (unless one is pending already). Returns the error to keep."""
    result = handle_offset_for_leader_epoch_response(response, requested)
    truncations = apply_validation(subscriptions, result, requested, now_ms, retry_backoff_ms)
    if result.partitions_to_retry:
        request_metadata_update()
    if truncations and pending_error is None:
        return truncation_error(truncations, requested)
    return pending_error


def truncation_error(truncations: Mapping[TopicPartition, Optional[OffsetAndMetadata]],
                     positions: Mapping[TopicPartition, FetchPosition]) -> errors.LogTruncationError:
    """A ``LogTruncationError`` whose ``divergent_offsets`` holds the known divergence points."""
    parts = []
    for tp, divergent in sorted(truncations.items()):
        at = positions[tp].offset if tp in positions else "?"
        parts.append("{} at fetch offset {}{}".format(
            format_partitions([tp]), at, "" if divergent is None else ", divergent offset {}".format(divergent.offset)))
    divergent_offsets = {tp: d for tp, d in truncations.items() if d is not None}
    return errors.LogTruncationError("truncation detected: " + "; ".join(parts), divergent_offsets)
