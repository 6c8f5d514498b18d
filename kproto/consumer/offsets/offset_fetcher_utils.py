"""Sans-IO ListOffsets logic shared by both engines (Java's OffsetFetcherUtils).

Owns: grouping of partitions by
leader node, ListOffsets request building per version, per-partition response handling
(which errors are retried, which need a metadata refresh, which are fatal), turning the
results into ``offsets_for_times`` / ``beginning_offsets`` / ``end_offsets`` answers, and
applying reset results to the SubscriptionState. No I/O and no clock of its own: callers
pass ``now_ms`` and send the requests.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Optional

from kproto import errors
from kproto.consumer.subscription_state import AutoOffsetResetStrategy, FetchPosition, LeaderAndEpoch
from kproto.errors import ErrorCode
from kproto.messages.list_offsets import (ListOffsetsRequest, ListOffsetsRequest_ListOffsetsPartition, ListOffsetsResponse,
                                          ListOffsetsResponse_ListOffsetsPartitionResponse)
from kproto.net.client_versions import client_max_version
from kproto.structs import IsolationLevel, OffsetAndTimestamp, TopicPartition

if TYPE_CHECKING:
    from kproto.consumer.subscription_state import SubscriptionState
    from kproto.net.metadata import ClusterMetadata

log = logging.getLogger("kproto.consumer.offsets")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
# The other special timestamps (Java's ListOffsetsRequest constants, used by its Admin's
# OffsetSpec; a consumer's offsets_for_times takes none of them, as Java's) and the first
# ListOffsets version a broker understands each in.
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # KIP-1023
SPECIAL_TIMESTAMP_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8, LATEST_TIERED_TIMESTAMP: 9,
                                 EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11}
UNKNOWN_OFFSET = -1
# ListOffsets' ReplicaId for an ordinary consumer.
CONSUMER_REPLICA_ID = -1

# Partition errors that mean "the leader (or our view of it) is not ready yet": the request
# is retried after a metadata refresh (Java's OffsetFetcherUtils / OffsetsForLeaderEpochClient).
PARTITION_RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.REQUEST_TIMED_OUT,
})


class ListOffsetData(NamedTuple):
    """One partition's ListOffsets answer: the offset, its timestamp and leader epoch."""

    offset: int
    timestamp: Optional[int]
    leader_epoch: Optional[int]


@dataclass
class ListOffsetResult:
    """What one ListOffsets response settled (Java's ListOffsetResult).

    ``fetched_offsets`` holds the partitions that have an answer; a partition whose answer
    is "no such offset" (e.g. no record at or after a timestamp) is in ``no_offset``;
    ``partitions_to_retry`` must be asked again, after a metadata refresh if
    ``metadata_update_needed``.
    """

    fetched_offsets: dict[TopicPartition, ListOffsetData] = field(default_factory=dict)
    partitions_to_retry: set[TopicPartition] = field(default_factory=set)
    no_offset: set[TopicPartition] = field(default_factory=set)
    metadata_update_needed: bool = False


def format_partitions(partitions: Iterable[TopicPartition]) -> str:
    """``a-0, a-1, b-0``: partitions as Kafka's messages print them."""
    return ", ".join("{}-{}".format(tp.topic, tp.partition) for tp in sorted(partitions))


def answered_partitions(topics: Iterable[Any], wanted: set[TopicPartition], topic_field: str = "name",
                        partition_field: str = "partition_index") -> Iterator[tuple[TopicPartition, Any]]:
    """``(tp, partition_entry)`` for each requested partition a response answers.

    Answered partitions are removed from ``wanted`` (what is left was left out); answers
    for partitions nobody asked about are skipped.
    """
    for topic in topics:
        name = getattr(topic, topic_field)
        for part in topic.partitions:
            tp = TopicPartition(name, getattr(part, partition_field))
            if tp in wanted:
                wanted.discard(tp)
                yield tp, part
            else:
                log.debug("Ignoring an answer for unrequested partition %s", tp)


def topic_authorization_error(topics: Iterable[str], action: str = "read") -> errors.KafkaError:
    """``TopicAuthorizationFailedError`` naming the topics (Java's TopicAuthorizationException)."""
    return errors.TopicAuthorizationFailedError(
        "not authorized to {} topics {}".format(action, ", ".join(sorted(topics))))


def list_offsets_min_version(isolation_level: IsolationLevel, require_timestamp: bool) -> int:
    """The oldest ListOffsets version that can carry the request (as Java's Builder.forConsumer).

    v2 added the isolation level, v1 the per-offset timestamp a by-time lookup needs.
    """
    if isolation_level == IsolationLevel.READ_COMMITTED:
        return 2
    return 1 if require_timestamp else 0


def choose_version(request_cls: Any, broker_versions: Any, min_version: int = 0) -> int:
    """The highest version both kproto (``client_max_version``) and the broker support.

    ``broker_versions`` is the broker's max version or a ``(min, max)`` pair (None means
    unknown: use ours). Raises ``UnsupportedVersionError`` when the broker is too old for
    ``min_version``.
    """
    ours_min, ours_max = request_cls.min_version, client_max_version(request_cls)
    if broker_versions is None:
        broker_min, broker_max = ours_min, ours_max
    elif isinstance(broker_versions, int):
        broker_min, broker_max = 0, broker_versions
    else:
        broker_min, broker_max = broker_versions
    version = min(ours_max, broker_max)
    if version < max(min_version, ours_min, broker_min):
        raise errors.UnsupportedVersionError(
            "{} needs v{}+, the broker supports up to v{}".format(
                request_cls.__name__, max(min_version, ours_min), broker_max))
    return version


def current_leader(metadata: ClusterMetadata, tp: TopicPartition) -> LeaderAndEpoch:
    """The partition's leader node and epoch from ClusterMetadata (None when unknown)."""
    leader = metadata.leader_for_partition(tp)
    if leader is None or leader < 0:
        return LeaderAndEpoch(None, None)
    epoch = metadata.leader_epoch_for_partition(tp)
    return LeaderAndEpoch(leader, None if epoch is None or epoch < 0 else epoch)


def group_list_offsets_requests(
    timestamps: Mapping[TopicPartition, int], metadata: ClusterMetadata,
) -> tuple[dict[int, dict[TopicPartition, tuple[int, int]]], set[TopicPartition]]:
    """Split ``{tp: timestamp}`` by leader node (Java's groupListOffsetRequests).

    Returns ``({node_id: {tp: (timestamp, current_leader_epoch)}}, partitions_without_leader)``;
    the second set needs a metadata refresh before it can be asked.
    """
    by_node: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
    no_leader: set[TopicPartition] = set()
    for tp, timestamp in timestamps.items():
        leader = current_leader(metadata, tp)
        if leader.leader is None:
            log.debug("Leader for %s unknown; refreshing metadata before ListOffsets", tp)
            no_leader.add(tp)
            continue
        epoch = -1 if leader.epoch is None else leader.epoch
        by_node.setdefault(leader.leader, {})[tp] = (timestamp, epoch)
    return by_node, no_leader


def build_list_offsets_request(partitions: Mapping[TopicPartition, tuple[int, int]],
                               isolation_level: IsolationLevel, version: int,
                               timeout_ms: int = 30000) -> ListOffsetsRequest:
    """A ListOffsetsRequest for ``{tp: (timestamp, current_leader_epoch)}`` to send at ``version``.

    Fields a version lacks (isolation level < v2, leader epoch < v4, timeout < v10) stay at
    their defaults, which the encoder leaves out; v0's ``max_num_offsets`` defaults to 1. A
    special timestamp the version predates (``SPECIAL_TIMESTAMP_MIN_VERSION``: -6,
    EARLIEST_PENDING_UPLOAD, from v11) is an ``UnsupportedVersionError``.
    """
    if isolation_level == IsolationLevel.READ_COMMITTED and version < 2:
        raise errors.IllegalArgumentError("read_committed needs ListOffsets v2+, not v{}".format(version))
    topics: dict[str, list[ListOffsetsRequest_ListOffsetsPartition]] = {}
    for tp, (timestamp, leader_epoch) in partitions.items():
        needs = SPECIAL_TIMESTAMP_MIN_VERSION.get(timestamp, 0)
        if version < needs:
            # An older broker would take the timestamp for an ordinary one (or refuse it).
            raise errors.UnsupportedVersionError("timestamp {} of {} needs ListOffsets v{}+, not v{}".format(
                timestamp, tp, needs, version))
        part = ListOffsetsRequest.ListOffsetsPartition(partition_index=tp.partition, timestamp=timestamp)
        if version >= 4:  # the leader epoch fences a stale leader; older brokers ignore it
            part.current_leader_epoch = leader_epoch
        topics.setdefault(tp.topic, []).append(part)
    request = ListOffsetsRequest(
        replica_id=CONSUMER_REPLICA_ID,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=parts) for name, parts in topics.items()])
    if version >= 2:
        request.isolation_level = isolation_level
    if version >= 10:
        request.timeout_ms = timeout_ms
    return request


def handle_list_offsets_response(response: ListOffsetsResponse, version: int,
                                 requested: Iterable[TopicPartition]) -> ListOffsetResult:
    """Sort one ListOffsets response's partitions into answers, retries and "no offset".

    Raises ``TopicAuthorizationFailedError`` (code 29) naming the topics we may not read;
    every other partition error is retried, with a metadata refresh for leadership errors
    (as Java's OffsetFetcherUtils.handleListOffsetResponse does). A requested partition the
    response leaves out is retried too.
    """
    result = ListOffsetResult()
    unauthorized: set[str] = set()
    wanted = set(requested)
    for tp, part in answered_partitions(response.topics, wanted):
        code = part.error_code
        if code == ErrorCode.NONE:
            data = _partition_offset(part, version)
            if data is None:
                result.no_offset.add(tp)
            else:
                result.fetched_offsets[tp] = data
        elif code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT:
            # A pre-0.10 message format has no timestamps: treated as "no offset found".
            log.debug("ListOffsets for %s unsupported by the message format", tp)
            result.no_offset.add(tp)
        elif code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            unauthorized.add(tp.topic)
        elif code in PARTITION_RETRIABLE:
            log.debug("ListOffsets for %s failed with error %d; will retry", tp, code)
            result.partitions_to_retry.add(tp)
            result.metadata_update_needed = True
        else:
            log.warning("ListOffsets for %s failed with unexpected error %d (%s); will retry",
                        tp, code, errors.for_code(code).__name__)
            result.partitions_to_retry.add(tp)
    if unauthorized:
        raise topic_authorization_error(unauthorized)
    if wanted:
        log.debug("ListOffsets response left out %s; will retry", format_partitions(wanted))
        result.partitions_to_retry.update(wanted)
    return result


def _partition_offset(part: ListOffsetsResponse_ListOffsetsPartitionResponse, version: int) -> Optional[ListOffsetData]:
    if version == 0:
        offsets = part.old_style_offsets
        if not offsets:
            return None
        offset, timestamp, epoch = offsets[0], None, None
    else:
        offset, timestamp = part.offset, part.timestamp
        epoch = part.leader_epoch if version >= 4 else -1
    if offset == UNKNOWN_OFFSET:
        return None
    return ListOffsetData(offset, timestamp, None if epoch is None or epoch < 0 else epoch)


# --- turning results into the façade's answers ------------------------------------------


def to_offsets_for_times(requested: Iterable[TopicPartition],
                         fetched: Mapping[TopicPartition, ListOffsetData]
                         ) -> dict[TopicPartition, Optional[OffsetAndTimestamp]]:
    """``offsets_for_times``' answer: every requested partition, None where no offset exists."""
    out: dict[TopicPartition, Optional[OffsetAndTimestamp]] = {}
    for tp in requested:
        data = fetched.get(tp)
        out[tp] = None if data is None else OffsetAndTimestamp(
            data.offset, -1 if data.timestamp is None else data.timestamp, data.leader_epoch)
    return out


def to_offsets(requested: Iterable[TopicPartition],
               fetched: Mapping[TopicPartition, ListOffsetData]) -> dict[TopicPartition, int]:
    """``beginning_offsets``/``end_offsets``' answer; a missing partition is a protocol fault."""
    out = {}
    for tp in requested:
        data = fetched.get(tp)
        if data is None:
            raise errors.ProtocolError("the broker returned no offset for {}".format(tp))
        out[tp] = data.offset
    return out


def validate_timestamps(timestamps: Mapping[TopicPartition, int]) -> None:
    """``offsets_for_times`` takes non-negative timestamps only (as Java and kafka-python)."""
    for tp, ts in timestamps.items():
        if not isinstance(tp, TopicPartition):
            raise errors.IllegalArgumentError("expected TopicPartition keys, got {!r}".format(tp))
        if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
            raise errors.IllegalArgumentError(
                "the target time for {} must be an int >= 0, not {!r}".format(tp, ts))


# --- position resets (applied to the SubscriptionState) ----------------------------------


def partitions_to_reset(subscriptions: SubscriptionState, now_ms: int) -> dict[TopicPartition, int]:
    """``{tp: timestamp}`` for the partitions awaiting a reset whose retry time has come.

    (Partitions still INITIALIZING reach AWAIT_RESET, or ``NoOffsetForPartitionError``
    under policy ``none``, through ``SubscriptionState.reset_initializing_positions``.)
    """
    out = {}
    for tp in subscriptions.partitions_needing_reset(now_ms):
        strategy = subscriptions.reset_strategy(tp)
        if strategy is not None and strategy is not AutoOffsetResetStrategy.NONE:
            out[tp] = strategy.timestamp
    return out


def apply_reset_result(subscriptions: SubscriptionState, metadata: ClusterMetadata,
                       requested: Mapping[TopicPartition, int], result: ListOffsetResult,
                       now_ms: int, retry_backoff_ms: int) -> None:
    """Seek each answered partition; back off the ones that must be asked again.

    A partition whose strategy changed (or that was unassigned) while the request was in
    flight is left alone: ``maybe_seek_unvalidated`` checks the requested strategy.
    """
    for tp, data in result.fetched_offsets.items():
        if data.leader_epoch is not None:
            # An epoch newer than our metadata's means leadership moved: refresh it.
            metadata.update_last_seen_epoch_if_newer(tp, data.leader_epoch)
        strategy = _strategy_for(requested[tp])
        # No offset epoch, as Java's OffsetFetcherUtils.resetPositionIfNeeded: the offset
        # was just read from the leader, so there is nothing for OffsetsForLeaderEpoch to
        # check, and validating would cost a round trip before the first Fetch. The epoch
        # only went into the metadata above.
        position = FetchPosition(data.offset, None, current_leader(metadata, tp))
        subscriptions.maybe_seek_unvalidated(tp, position, strategy)
    # "No offset" for earliest/latest only happens on a broken broker: ask again later.
    retry = set(result.partitions_to_retry) | set(result.no_offset)
    if retry:
        subscriptions.request_failed(retry, now_ms + retry_backoff_ms)


def ensure_topics(metadata: ClusterMetadata, partitions: Iterable[TopicPartition]) -> None:
    """Add the topics of ``partitions`` the metadata does not track yet (offset lookups and
    resets may name topics outside the subscription), so its next refresh names their leaders."""
    for topic in {tp.topic for tp in partitions if metadata.partitions_for_topic(tp.topic) is None}:
        metadata.add_topic(topic)


def retry_after_metadata_update(subscriptions: SubscriptionState, metadata: ClusterMetadata,
                                partitions: Iterable[TopicPartition], now_ms: int, retry_backoff_ms: int,
                                request_update: Callable[[], Any],
                                on_retry: Optional[Callable[[], None]] = None) -> None:
    """No leader is known for ``partitions``: retry them when the metadata refresh
    ``request_update()`` asks for is applied, not a backoff later (at start-up the first
    refresh is usually in flight already, and its answer names the leaders). Topics the
    metadata does not track yet are added to it. The backoff holds only if the refresh
    fails. Both engines' resets use it, each with its own refresh call; the callback runs on
    whichever thread polls the client (one locked SubscriptionState call, then ``on_retry``)."""
    partitions = list(partitions)
    ensure_topics(metadata, partitions)
    subscriptions.request_failed(partitions, now_ms + retry_backoff_ms)

    def retry(_: Any) -> None:
        subscriptions.set_next_allowed_retry(partitions, 0)
        if on_retry is not None:
            on_retry()
    request_update().add_callback(retry)


def position_request_failed(subscriptions: SubscriptionState, requested: Iterable[TopicPartition], exc: BaseException,
                            retry_at_ms: int, request_metadata_update: Any,
                            pending_error: Optional[BaseException]) -> Optional[BaseException]:
    """The failure path of a reset (ListOffsets) or validation (OffsetForLeaderEpoch), in
    both engines as in Java: back the partitions off until ``retry_at_ms``, refresh the
    metadata (the leader may have moved), and keep the first non-retriable error for the
    next position update to raise. Returns the error to keep."""
    subscriptions.request_failed(requested, retry_at_ms)
    request_metadata_update()
    if getattr(exc, "retriable", False):
        return pending_error
    if pending_error is not None:
        log.error("Discarding %s: another error is pending", exc)
        return pending_error
    return exc


def _strategy_for(timestamp: int) -> AutoOffsetResetStrategy:
    if timestamp == EARLIEST_TIMESTAMP:
        return AutoOffsetResetStrategy.EARLIEST
    return AutoOffsetResetStrategy.LATEST
