"""Sans-IO offset commits shared by both engines, and the auto-commit timer.

Owns: the OffsetCommit request at any version (generation id / member id / group
instance id for the classic protocol, the member epoch for KIP-848 from v9, per-partition
leader epoch and metadata, topic ids instead of names from v10: ``topic_ids_or_none`` and
``max_version_for_topic_ids`` decide whether v10 may be used, for OffsetFetch too), the
per-error verdict on a response (retriable or fatal, coordinator rediscovery, rejoin,
generation reset; KIP-848's commit-before-revocation rules), and ``AutoCommitState``, a
pure timer object fed a clock.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from kproto import errors
from kproto.errors import ErrorCode
from kproto.messages.offset_commit import OffsetCommitRequest as Req
from kproto.messages.offset_commit import OffsetCommitRequest_OffsetCommitRequestPartition, OffsetCommitResponse
from kproto.structs import OffsetAndMetadata, TopicPartition

from .offset_fetcher_utils import topic_authorization_error

log = logging.getLogger("kproto.consumer.offsets")

# Errors after which the coordinator must be looked up again.
_COORDINATOR_GONE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                               ErrorCode.REQUEST_TIMED_OUT})
# The generation/member id of a consumer outside group management (assign() with a
# group_id): the coordinator accepts commits from it while the group is empty.
DEFAULT_GENERATION_ID = -1
UNKNOWN_MEMBER_ID = ""
# KIP-848 needs v9 (the member epoch goes into the generation field).
MIN_VERSION_CONSUMER_PROTOCOL = 9
# OffsetCommit and OffsetFetch v10 name topics by id only (KIP-848); v9 by name only.
LAST_VERSION_WITHOUT_TOPIC_IDS = 9
FIRST_VERSION_WITH_TOPIC_IDS = 10
_ZERO_UUID = uuid.UUID(int=0)


def topic_ids_or_none(topics: Iterable[str], known: Mapping[str, uuid.UUID]) -> Optional[dict[str, uuid.UUID]]:
    """``{topic: id}`` for the topics when the metadata (``known``) has an id for every
    one of them, else None: OffsetCommit/OffsetFetch v10 cannot name a topic without its
    id (Java's ``canUseTopicIds``)."""
    ids = {}
    for topic in topics:
        tid = known.get(topic)
        if tid is None or tid == _ZERO_UUID:
            return None
        ids[topic] = tid
    return ids


def max_version_for_topic_ids(topic_ids: Optional[Mapping[str, uuid.UUID]], max_version: int) -> int:
    """The newest OffsetCommit/OffsetFetch version to send: ``max_version``, or v9 when
    some topic has no id (``topic_ids`` None)."""
    return max_version if topic_ids is not None else min(max_version, LAST_VERSION_WITHOUT_TOPIC_IDS)


def topic_name_of(topic: Any, names_by_id: Optional[Mapping[uuid.UUID, str]]) -> Optional[str]:
    """The name of a response's topic entry: its name (v9-), or the name its id (v10+)
    stands for in the request (None when the answer names an id nobody asked about)."""
    if topic.name:
        return topic.name
    tid = getattr(topic, "topic_id", None)
    return None if tid is None or names_by_id is None else names_by_id.get(tid)


@dataclass
class CommitResult:
    """One OffsetCommit response, judged (first error that decides wins, as in Java).

    ``retriable``: sending the commit again may work (after ``coordinator_unknown``
    rediscovery, or a metadata refresh for ``metadata_update_needed``, if set).
    ``request_rejoin``/``reset_generation`` tell the classic engine its membership is stale.
    ``failed_partitions`` holds each partition's own error.
    """

    error: Optional[errors.KafkaError] = None
    retriable: bool = False
    coordinator_unknown: bool = False
    request_rejoin: bool = False
    reset_generation: bool = False
    metadata_update_needed: bool = False
    failed_partitions: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.error is None


def build_offset_commit_request(group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                version: int, *, generation_id_or_member_epoch: int = DEFAULT_GENERATION_ID,
                                member_id: str = UNKNOWN_MEMBER_ID,
                                group_instance_id: Optional[str] = None,
                                topic_ids: Optional[Mapping[str, uuid.UUID]] = None) -> Req:
    """An OffsetCommitRequest for ``offsets`` at ``version``.

    The classic engine passes its generation id; the KIP-848 engine its member epoch (and
    must use v9+). The leader epoch (v6+) lets the next owner validate the position.
    From v10 topics go by id: ``topic_ids`` must hold every topic's (else
    ``IllegalArgumentError``: choose the version with ``max_version_for_topic_ids``).
    """
    for tp, om in offsets.items():
        if not isinstance(om, OffsetAndMetadata):
            raise errors.IllegalArgumentError("commit offsets must be OffsetAndMetadata, got {!r} for {}".format(om, tp))
        if om.offset < 0:
            raise errors.IllegalArgumentError("cannot commit negative offset {} for {}".format(om.offset, tp))
    if group_instance_id is not None and version < 7:
        raise errors.UnsupportedVersionError(
            "OffsetCommit v{} cannot carry group_instance_id (static membership needs v7+)".format(version))
    by_topic: dict[str, list[OffsetCommitRequest_OffsetCommitRequestPartition]] = {}
    if version >= FIRST_VERSION_WITH_TOPIC_IDS and \
            topic_ids_or_none({tp.topic for tp in offsets}, topic_ids or {}) is None:
        raise errors.IllegalArgumentError("OffsetCommit v{} names topics by id and some topic has none".format(version))
    for tp, om in offsets.items():
        part = Req.OffsetCommitRequestPartition(
            partition_index=tp.partition, committed_offset=om.offset,
            committed_metadata="" if om.metadata is None else om.metadata)
        if version >= 6:  # older versions have no leader epoch: dropped, as Java does
            part.committed_leader_epoch = -1 if om.leader_epoch is None else om.leader_epoch
        by_topic.setdefault(tp.topic, []).append(part)
    request = Req(group_id=group_id, group_instance_id=group_instance_id,
                  topics=[_request_topic(name, parts, version, topic_ids) for name, parts in by_topic.items()])
    if version >= 1:
        request.generation_id_or_member_epoch = generation_id_or_member_epoch
        request.member_id = member_id
    return request


def _request_topic(name: str, partitions: list[OffsetCommitRequest_OffsetCommitRequestPartition], version: int,
                   topic_ids: Optional[Mapping[str, uuid.UUID]]) -> Any:
    if version >= FIRST_VERSION_WITH_TOPIC_IDS:
        assert topic_ids is not None  # checked by the caller
        return Req.OffsetCommitRequestTopic(topic_id=topic_ids[name], partitions=partitions)
    return Req.OffsetCommitRequestTopic(name=name, partitions=partitions)


def handle_offset_commit_response(response: OffsetCommitResponse, group_id: str, *, group_protocol: str = "classic",
                                  before_revocation: bool = False,
                                  topic_ids: Optional[Mapping[str, uuid.UUID]] = None) -> CommitResult:
    """Judge an OffsetCommit response.

    Retriable: COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION, and (with coordinator
    rediscovery) COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, REQUEST_TIMED_OUT. Fatal:
    OFFSET_METADATA_TOO_LARGE, INVALID_COMMIT_OFFSET_SIZE, FENCED_INSTANCE_ID, authorization.
    Classic: REBALANCE_IN_PROGRESS asks for a rejoin; UNKNOWN_MEMBER_ID/ILLEGAL_GENERATION
    reset the generation; both end in ``CommitFailedError``. KIP-848: UNKNOWN_MEMBER_ID is a
    ``CommitFailedError``; ``before_revocation`` (the commit before partitions are given up)
    retries STALE_MEMBER_EPOCH with the newer epoch and gives up on UNKNOWN_TOPIC_OR_PARTITION
    so a deleted topic cannot stall the rebalance. UNKNOWN_TOPIC_ID (v10: the coordinator
    does not know the id the metadata gave) is retriable after a metadata refresh
    (``metadata_update_needed``), like Java's ``UnknownTopicIdException``. ``topic_ids``
    are the ids the request named topics by (v10), to name the answer's topics.
    """
    result = CommitResult()
    unauthorized: set[str] = set()
    names = None if topic_ids is None else {tid: name for name, tid in topic_ids.items()}
    for topic in response.topics:
        name = topic_name_of(topic, names)
        if name is None:
            log.warning("Ignoring an OffsetCommit answer for unknown topic id %s", getattr(topic, "topic_id", None))
            continue
        for part in topic.partitions:
            if part.error_code != ErrorCode.NONE:
                result.failed_partitions[TopicPartition(name, part.partition_index)] = part.error_code
    for tp, code in result.failed_partitions.items():
        if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            unauthorized.add(tp.topic)
            continue
        verdict = _judge(code, group_id, tp, group_protocol, before_revocation)
        verdict.failed_partitions = result.failed_partitions
        log.log(logging.WARNING if verdict.retriable else logging.ERROR,
                "OffsetCommit for group %s failed on %s: %s", group_id, tp, verdict.error)
        return verdict
    if unauthorized:
        result.error = topic_authorization_error(unauthorized, "commit to")
    return result


def _judge(code: int, group_id: str, tp: TopicPartition, group_protocol: str, before_revocation: bool) -> CommitResult:
    exc = errors.for_code(code)("commit of {} in group {!r}".format(tp, group_id))
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and before_revocation:
        return CommitResult(error=exc)
    if code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return CommitResult(error=exc, retriable=True)
    if code == ErrorCode.UNKNOWN_TOPIC_ID:
        return CommitResult(error=exc, retriable=True, metadata_update_needed=True)
    if code in _COORDINATOR_GONE:
        return CommitResult(error=exc, retriable=True, coordinator_unknown=True)
    if code in (ErrorCode.OFFSET_METADATA_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
                ErrorCode.FENCED_INSTANCE_ID, ErrorCode.GROUP_AUTHORIZATION_FAILED):
        return CommitResult(error=exc)
    if code == ErrorCode.STALE_MEMBER_EPOCH:
        # Outside commit-before-revocation the caller's view of the epoch is stale: fatal.
        return CommitResult(error=exc, retriable=before_revocation)
    if group_protocol == "classic":
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            return CommitResult(error=errors.for_code(code)(
                "group {!r} is rebalancing: poll() to complete the rebalance, then commit again".format(group_id)),
                request_rejoin=True)
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            return CommitResult(error=_commit_failed(group_id, code), reset_generation=True, request_rejoin=True)
    elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
        return CommitResult(error=_commit_failed(group_id, code))
    return CommitResult(error=errors.KafkaError("unexpected error {} ({}) committing {} in group {!r}".format(
        code, errors.for_code(code).message, tp, group_id)))


def _commit_failed(group_id: str, code: int) -> errors.CommitFailedError:
    return errors.CommitFailedError(
        "commit cannot be completed since the group {!r} has already rebalanced and assigned the partitions "
        "to another member ({}); this means the time between poll() calls exceeded max_poll_interval_ms, or the "
        "member was fenced".format(group_id, errors.for_code(code).message))


class AutoCommitState:
    """When the next auto-commit is due (Java's AutoCommitState / nextAutoCommitTimer).

    Pure: fed ``now_ms`` by its caller. At most one auto-commit is in flight; a retriable
    failure brings the next attempt forward to ``retry_backoff_ms`` instead of a full
    interval. What to commit (the positions of records already returned, the
    SubscriptionState's ``all_consumed()``) is the caller's to supply.
    """

    def __init__(self, interval_ms: int, now_ms: int, retry_backoff_ms: int = 100) -> None:
        if interval_ms <= 0:
            raise errors.KafkaConfigurationError("auto_commit_interval_ms must be > 0, not {}".format(interval_ms))
        self.interval_ms = interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._deadline_ms = now_ms + interval_ms
        self._in_flight = False

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    def can_send_auto_commit(self, now_ms: int) -> bool:
        """True when the interval has elapsed and no auto-commit is in flight."""
        return not self._in_flight and now_ms >= self._deadline_ms

    def remaining_ms(self, now_ms: int) -> int:
        """How long the caller may wait before the next auto-commit is due (0 = now)."""
        return max(0, self._deadline_ms - now_ms)

    def on_sent(self, now_ms: int) -> None:
        """The commit went out: the next one is due a full interval from now."""
        self._in_flight = True
        self._deadline_ms = now_ms + self.interval_ms

    def on_completed(self, now_ms: int, error: Optional[BaseException] = None) -> None:
        """The commit finished; a retriable failure is retried after the backoff."""
        self._in_flight = False
        if error is not None and getattr(error, "retriable", False):
            self._deadline_ms = min(self._deadline_ms, now_ms + self.retry_backoff_ms)

    def reset(self, now_ms: int) -> None:
        """Restart the interval (e.g. after a manual commit of the same positions)."""
        self._deadline_ms = now_ms + self.interval_ms
