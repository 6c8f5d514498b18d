"""One node's share session (Java's ``ShareSessionHandler``), sans-IO.

Owns the session epoch and the partitions the broker's session holds for this member on
this node, and builds the requests that use them:

* epoch 0 opens a session: the ShareFetch names every partition to fetch and carries no
  acknowledgements (a broker refuses acknowledgements in an opening request: nothing was
  acquired in a session that does not exist yet);
* epoch n > 0 continues it: the ShareFetch names only the partitions added since the
  session's last state and the partitions it acknowledges, and lists removed ones as
  forgotten (the broker releases what this member still holds in them);
* ShareAcknowledge needs an open session (epoch > 0) and leaves its partitions alone;
* epoch -1 (``FINAL_EPOCH``) closes it: a last ShareAcknowledge carries the final
  acknowledgements, and the broker releases every record still acquired in the session.

A successful answer moves the epoch on by one (``on_success``); SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH or a broken connection end the session (``reset``): the next
request opens a new one, and acknowledgements for records acquired in the old one can no
longer be sent (the broker already released those records).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from kproto.consumer.share.acknowledgements import Acknowledgements, AcknowledgeType
from kproto.errors import UnsupportedVersionError
from kproto.messages import ShareAcknowledgeRequest, ShareFetchRequest
from kproto.structs import TopicIdPartition

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
# ShareFetch/ShareAcknowledge v2 (Kafka 4.2+) carry ShareAcquireMode and IsRenewAck; RENEW
# acknowledgements need it.
RENEW_MIN_VERSION = 2
SHARE_ACQUIRE_MODES = {"batch_optimized": 0, "record_limit": 1}


class ShareFetchParams:
    """The fetch settings every ShareFetch carries."""

    __slots__ = ("max_wait_ms", "min_bytes", "max_bytes", "max_records", "batch_size", "share_acquire_mode")

    def __init__(self, max_wait_ms: int = 500, min_bytes: int = 1, max_bytes: int = 52428800,
                 max_records: int = 500, batch_size: Optional[int] = None,
                 share_acquire_mode: str = "batch_optimized") -> None:
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.max_records = max_records
        self.batch_size = max_records if batch_size is None else batch_size
        self.share_acquire_mode = share_acquire_mode


def _by_topic(partitions: Iterable[TopicIdPartition]) -> dict[Any, list[TopicIdPartition]]:
    topics: dict[Any, list[TopicIdPartition]] = {}
    for tip in partitions:
        topics.setdefault(tip.topic_id, []).append(tip)
    return topics


def _has_renew(acks: Mapping[TopicIdPartition, Acknowledgements]) -> bool:
    return any(t == AcknowledgeType.RENEW for a in acks.values() for _, t in a.items())


class ShareSessionHandler:
    def __init__(self, node_id: int, group_id: str, member_id: str) -> None:
        self.node_id = node_id
        self.group_id = group_id
        self.member_id = member_id
        self.epoch = INITIAL_EPOCH
        self.session_partitions: dict[TopicIdPartition, None] = {}
        # Counts the sessions ended on this node: records carry the generation that
        # delivered them, and only acknowledgements of the current one can be sent.
        self.generation = 0

    def has_session(self) -> bool:
        return self.epoch > 0

    # --- requests -------------------------------------------------------------------------

    def build_share_fetch(self, partitions: Iterable[TopicIdPartition],
                          acks: Mapping[TopicIdPartition, Acknowledgements], params: ShareFetchParams,
                          version: int) -> ShareFetchRequest:
        """The ShareFetch for ``partitions`` (all of them when opening), acknowledging ``acks``
        (only partitions among ``partitions``, and only in an open session)."""
        partitions = list(dict.fromkeys(partitions))
        if acks and self.epoch == INITIAL_EPOCH:
            raise ValueError("an opening ShareFetch cannot carry acknowledgements")
        if _has_renew(acks):
            raise ValueError("RENEW acknowledgements go in ShareAcknowledge")
        mode = SHARE_ACQUIRE_MODES[params.share_acquire_mode]
        if mode and version < 2:
            raise UnsupportedVersionError(
                "share_acquire_mode={!r} needs ShareFetch v2 (Kafka 4.2+); node {} offers v{}".format(
                    params.share_acquire_mode, self.node_id, version))
        if self.epoch == INITIAL_EPOCH:
            named = partitions
            forgotten: list[TopicIdPartition] = []
        else:
            named = [tip for tip in partitions if tip not in self.session_partitions or tip in acks]
            current = set(partitions)
            forgotten = [tip for tip in self.session_partitions if tip not in current]
        request = ShareFetchRequest(
            group_id=self.group_id, member_id=self.member_id, share_session_epoch=self.epoch,
            max_wait_ms=params.max_wait_ms, min_bytes=params.min_bytes, max_bytes=params.max_bytes,
            max_records=params.max_records, batch_size=params.batch_size)
        if version >= 2:
            request.share_acquire_mode = mode
        request.topics = [ShareFetchRequest.FetchTopic(topic_id=topic_id, partitions=[
            ShareFetchRequest.FetchPartition(partition_index=tip.partition, acknowledgement_batches=[
                ShareFetchRequest.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
                for f, la, t in (acks[tip].to_batches() if tip in acks else ())])
            for tip in tips]) for topic_id, tips in _by_topic(named).items()]
        request.forgotten_topics_data = [
            ShareFetchRequest.ForgottenTopic(topic_id=topic_id, partitions=[tip.partition for tip in tips])
            for topic_id, tips in _by_topic(forgotten).items()]
        return request

    def build_share_acknowledge(self, acks: Mapping[TopicIdPartition, Acknowledgements], version: int,
                                final: bool = False) -> ShareAcknowledgeRequest:
        """ShareAcknowledge in the open session (``final``: closing it)."""
        if not final and self.epoch == INITIAL_EPOCH:
            raise ValueError("ShareAcknowledge needs an open share session")
        renew = _has_renew(acks)
        if renew and version < RENEW_MIN_VERSION:
            raise UnsupportedVersionError(
                "RENEW needs ShareAcknowledge v{} (Kafka 4.2+); node {} offers v{}".format(
                    RENEW_MIN_VERSION, self.node_id, version))
        request = ShareAcknowledgeRequest(group_id=self.group_id, member_id=self.member_id,
                                          share_session_epoch=FINAL_EPOCH if final else self.epoch)
        if version >= RENEW_MIN_VERSION:
            request.is_renew_ack = renew
        request.topics = [ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=topic_id, partitions=[
            ShareAcknowledgeRequest.AcknowledgePartition(partition_index=tip.partition, acknowledgement_batches=[
                ShareAcknowledgeRequest.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
                for f, la, t in acks[tip].to_batches()])
            for tip in tips]) for topic_id, tips in _by_topic(acks).items()]
        return request

    # --- answers --------------------------------------------------------------------------

    def on_fetch_success(self, partitions: Iterable[TopicIdPartition]) -> None:
        """The ShareFetch built for ``partitions`` was answered without a session error."""
        self.session_partitions = dict.fromkeys(partitions)
        self.epoch += 1

    def on_acknowledge_success(self) -> None:
        self.epoch += 1

    def on_close(self) -> None:
        self.reset()

    def reset(self) -> None:
        """The broker's session is gone: the next ShareFetch opens a new one."""
        if self.epoch != INITIAL_EPOCH:
            self.generation += 1
        self.epoch = INITIAL_EPOCH
        self.session_partitions = {}

    def __repr__(self) -> str:
        return "ShareSessionHandler(node={}, epoch={}, partitions={})".format(
            self.node_id, self.epoch, list(self.session_partitions))
