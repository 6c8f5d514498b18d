"""Sans-IO committed-offset lookups (OffsetFetch) shared by both engines.

Owns: the OffsetFetch request for one group at any version (v0-7 group + topics, v8+ the
groups array, v9+ the KIP-848 member id/epoch, v7+ ``require_stable`` for read_committed,
v10+ topic ids instead of names),
response handling at group and partition level (what is retried, what sends us back to
coordinator discovery, what is fatal), and seeding positions from committed offsets
(Java's ConsumerCoordinator.refreshCommittedOffsets).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Optional, Union

from kproto import errors
from kproto.consumer.subscription_state import FetchPosition
from kproto.errors import ErrorCode
from kproto.messages.offset_fetch import OffsetFetchRequest as Req
from kproto.messages.offset_fetch import (OffsetFetchResponse, OffsetFetchResponse_OffsetFetchResponseTopic,
                                          OffsetFetchResponse_OffsetFetchResponseTopics)
from kproto.structs import OffsetAndMetadata, TopicPartition

from .commit import FIRST_VERSION_WITH_TOPIC_IDS, topic_ids_or_none, topic_name_of
from .offset_fetcher_utils import current_leader, format_partitions, topic_authorization_error

if TYPE_CHECKING:
    from kproto.consumer.subscription_state import SubscriptionState
    from kproto.net.metadata import ClusterMetadata

log = logging.getLogger("kproto.consumer.offsets")

# Before v2 the group-level errors came back in every partition; these are the ones that
# mean the whole request failed (as Java's OffsetFetchResponse lifts them).
_GROUP_ERRORS_IN_PARTITIONS = frozenset({
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
})


@dataclass
class OffsetFetchResult:
    """One OffsetFetch response, judged.

    On success ``offsets`` maps every answered partition to its committed offset (None when
    nothing is committed). Otherwise ``error`` is set; ``retriable`` says whether sending
    the request again may work, and ``coordinator_unknown`` that the coordinator must be
    rediscovered first, ``metadata_update_needed`` the metadata refreshed (topic ids).
    """

    offsets: dict[TopicPartition, Optional[OffsetAndMetadata]] = field(default_factory=dict)
    error: Optional[errors.KafkaError] = None
    retriable: bool = False
    coordinator_unknown: bool = False
    metadata_update_needed: bool = False


def build_offset_fetch_request(group_id: str, partitions: Optional[Iterable[TopicPartition]], version: int, *,
                               require_stable: bool = False, member_id: Optional[str] = None,
                               member_epoch: int = -1, topic_ids: Optional[Mapping[str, uuid.UUID]] = None) -> Req:
    """An OffsetFetchRequest for ``partitions`` of ``group_id`` (None = all, v2-v9).

    ``require_stable`` (read_committed: wait for pending transactional commits) needs v7;
    older brokers silently get False, as Java's consumer does. ``member_id``/``member_epoch``
    are sent from v9 (KIP-848 members; the classic engine leaves them null/-1). From v10
    topics go by id: ``topic_ids`` must hold every topic's (``IllegalArgumentError``
    otherwise, as for all partitions, whose answer could name ids the client does not know).
    """
    partitions = None if partitions is None else list(partitions)
    if partitions is None and version < 2:
        raise errors.IllegalArgumentError("fetching all committed offsets needs OffsetFetch v2+")
    if version >= FIRST_VERSION_WITH_TOPIC_IDS and (
            partitions is None or topic_ids_or_none({tp.topic for tp in partitions}, topic_ids or {}) is None):
        raise errors.IllegalArgumentError("OffsetFetch v{} names topics by id and some topic has none".format(version))
    if require_stable and version < 7:
        log.debug("OffsetFetch v%d cannot require stable offsets; sending without", version)
        require_stable = False
    by_topic: Optional[dict[str, list[int]]] = None
    if partitions is not None:
        by_topic = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
    if version >= 8:
        group_topics = None if by_topic is None else [
            Req.OffsetFetchRequestTopics(topic_id=topic_ids[name], partition_indexes=parts)
            if version >= FIRST_VERSION_WITH_TOPIC_IDS and topic_ids is not None
            else Req.OffsetFetchRequestTopics(name=name, partition_indexes=parts) for name, parts in by_topic.items()]
        group = Req.OffsetFetchRequestGroup(group_id=group_id, topics=group_topics)
        if version >= 9:
            group.member_id = member_id
            group.member_epoch = member_epoch
        return Req(groups=[group], require_stable=require_stable)
    topics = None if by_topic is None else [
        Req.OffsetFetchRequestTopic(name=name, partition_indexes=parts) for name, parts in by_topic.items()]
    return Req(group_id=group_id, topics=topics, require_stable=require_stable)


def handle_offset_fetch_response(response: OffsetFetchResponse, version: int, group_id: str,
                                 requested: Optional[Iterable[TopicPartition]] = None,
                                 topic_ids: Optional[Mapping[str, uuid.UUID]] = None) -> OffsetFetchResult:
    """Judge an OffsetFetch response (Java's OffsetFetchResponseHandler, both engines).

    Group level: COORDINATOR_LOAD_IN_PROGRESS retried; NOT_COORDINATOR /
    COORDINATOR_NOT_AVAILABLE retried after rediscovery; STALE_MEMBER_EPOCH retried with
    the member's newer epoch; anything else (authorization, UNKNOWN_MEMBER_ID,
    GROUP_ID_NOT_FOUND, ...) fatal. Partition level: UNSTABLE_OFFSET_COMMIT retried
    (a transaction holds the offsets), UNKNOWN_TOPIC_ID (v10: the coordinator does not
    know the id the metadata gave) retried after a metadata refresh, TOPIC_AUTHORIZATION_FAILED
    and UNKNOWN_TOPIC_OR_PARTITION fatal. ``topic_ids`` are the ids the request named
    topics by (v10), to name the answer's topics.
    """
    group_code, topics = _group_view(response, version, group_id)
    if group_code is None:
        return OffsetFetchResult(error=errors.ProtocolError(
            "OffsetFetch response has no answer for group {!r}".format(group_id)))
    if group_code == ErrorCode.NONE and version < 2:
        lifted = {p.error_code for t in topics for p in t.partitions} & _GROUP_ERRORS_IN_PARTITIONS
        group_code = min(lifted) if lifted else ErrorCode.NONE
    if group_code != ErrorCode.NONE:
        return _group_error(group_code, group_id)

    result = OffsetFetchResult()
    unauthorized: set[str] = set()
    unstable: list[TopicPartition] = []
    unknown_ids: list[TopicPartition] = []
    names = None if topic_ids is None else {tid: name for name, tid in topic_ids.items()}
    for topic in topics:
        name = topic_name_of(topic, names)
        if name is None:
            log.warning("Ignoring an OffsetFetch answer for unknown topic id %s", getattr(topic, "topic_id", None))
            continue
        for part in topic.partitions:
            tp = TopicPartition(name, part.partition_index)
            code = part.error_code
            if code == ErrorCode.NONE:
                if part.committed_offset >= 0:
                    epoch = part.committed_leader_epoch
                    result.offsets[tp] = OffsetAndMetadata(
                        part.committed_offset, part.metadata or "", -1 if epoch is None else epoch)
                else:
                    log.debug("No committed offset for %s in group %s", tp, group_id)
                    result.offsets[tp] = None
            elif code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                unauthorized.add(tp.topic)
            elif code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                unstable.append(tp)
            elif code == ErrorCode.UNKNOWN_TOPIC_ID:
                unknown_ids.append(tp)
            elif code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                return OffsetFetchResult(error=errors.for_code(code)(
                    "topic or partition {} does not exist".format(tp)))
            else:
                return OffsetFetchResult(error=errors.for_code(code)(
                    "unexpected error fetching the committed offset of {}".format(tp)))
    if unauthorized:
        return OffsetFetchResult(error=topic_authorization_error(unauthorized))
    if unknown_ids:
        return OffsetFetchResult(error=errors.UnknownTopicIdError(
            "the coordinator does not know the topic ids of {}".format(format_partitions(unknown_ids))),
            retriable=True, metadata_update_needed=True)
    if unstable:
        return OffsetFetchResult(error=errors.UnstableOffsetCommitError(
            "a pending transactional commit holds the offsets of {}".format(format_partitions(unstable))), retriable=True)
    if requested is not None:
        # A partition the coordinator left out has nothing committed.
        for tp in requested:
            result.offsets.setdefault(tp, None)
    return result


_Topic = Union[OffsetFetchResponse_OffsetFetchResponseTopic, OffsetFetchResponse_OffsetFetchResponseTopics]


def _group_view(response: OffsetFetchResponse, version: int, group_id: str) -> tuple[Optional[int], list[_Topic]]:
    if version >= 8:
        for group in response.groups:
            if group.group_id == group_id:
                return group.error_code, list(group.topics)
        return None, []
    code = response.error_code if version >= 2 else ErrorCode.NONE
    return code, list(response.topics)


def _group_error(code: int, group_id: str) -> OffsetFetchResult:
    exc = errors.for_code(code)("OffsetFetch for group {!r} failed".format(group_id))
    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
        return OffsetFetchResult(error=exc, retriable=True, coordinator_unknown=True)
    if code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.STALE_MEMBER_EPOCH):
        return OffsetFetchResult(error=exc, retriable=True)
    return OffsetFetchResult(error=exc)


def refresh_committed_offsets(subscriptions: SubscriptionState, metadata: ClusterMetadata,
                              offsets: Mapping[TopicPartition, Optional[OffsetAndMetadata]]) -> set[TopicPartition]:
    """Seed positions from committed offsets; returns the partitions that were seeked.

    The position is unvalidated: with a known leader epoch it goes through
    OffsetForLeaderEpoch validation before fetching, as Java's refreshCommittedOffsets does.
    Partitions unassigned since the request went out, or with nothing committed, are
    skipped (the latter are reset per ``auto_offset_reset`` afterwards).
    """

    seeked = set()
    for tp, committed in offsets.items():
        if committed is None or not subscriptions.is_assigned(tp):
            continue
        epoch = committed.leader_epoch if committed.leader_epoch is not None and committed.leader_epoch >= 0 else None
        if epoch is not None:
            metadata.update_last_seen_epoch_if_newer(tp, epoch)
        subscriptions.seek_unvalidated(tp, FetchPosition(committed.offset, epoch, current_leader(metadata, tp)))
        seeked.add(tp)
    return seeked
