"""Blocking committed-offset fetches and commits for the classic engine.

Owns the retry loops around the sans-IO OffsetFetch/OffsetCommit code (Java's
ConsumerCoordinator.fetchCommittedOffsets / commitOffsetsSync / commitOffsetsAsync):
find the coordinator, send, judge the answer, and on a retriable error rediscover the
coordinator if needed, back off and try again until the timeout. The coordinator itself
(FindCoordinator, generations, rejoining) belongs to the engine; it is reached through
the small ``Coordinator`` protocol below, and it hears of every commit verdict so it can
reset its generation or rejoin.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Protocol

from kproto import errors
from kproto.consumer.offsets import commit as commit_mod
from kproto.consumer.offsets import committed_offsets as co
from kproto.consumer.offsets.offset_fetcher_utils import choose_version
from kproto.messages import OffsetCommitRequest, OffsetFetchRequest
from kproto.messages.offset_commit import OffsetCommitResponse
from kproto.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kproto.net.client import NetworkClient

log = logging.getLogger("kproto.consumer.offsets")


class Coordinator(Protocol):
    """What the engine's coordinator offers these loops."""

    def ensure_coordinator_ready(self, timeout_ms: float) -> Optional[int]:
        """The coordinator's node id once known and connected, or None if time ran out."""

    def mark_coordinator_unknown(self, reason: str, *, cause: Optional[BaseException] = None) -> None:
        """Forget the coordinator (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection
        given as ``cause``, ...)."""


class Membership(Protocol):
    """The identity a commit carries; read again for every attempt (it may change)."""

    @property
    def generation_id_or_member_epoch(self) -> int: ...

    @property
    def member_id(self) -> str: ...

    @property
    def group_instance_id(self) -> Optional[str]: ...


class GroupOffsets:
    """Committed offsets of one group over a NetworkClient, from the thread that polls it."""

    def __init__(self, client: NetworkClient, group_id: str, coordinator: Coordinator, *,
                 group_protocol: str = "classic", retry_backoff_ms: int = 100,
                 clock: Optional[Callable[[], float]] = None) -> None:
        self._client = client
        self.group_id = group_id
        self._coordinator = coordinator
        self._group_protocol = group_protocol
        self._retry_backoff_ms = retry_backoff_ms
        self._clock = clock or (lambda: time.monotonic() * 1000.0)

    def fetch_committed_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: float, *,
                                require_stable: bool = False, member_id: Optional[str] = None,
                                member_epoch: int = -1) -> dict[TopicPartition, Optional[OffsetAndMetadata]]:
        """Each partition's committed offset (None if nothing is committed); retries until the timeout."""
        wanted = list(partitions)
        if not wanted:
            return {}
        deadline = self._clock() + timeout_ms
        last: Optional[BaseException] = None
        while True:
            node, version = self._ready(OffsetFetchRequest, 1, deadline)
            if node is not None:
                topic_ids, version = self._topic_ids(wanted, version)
                request = co.build_offset_fetch_request(self.group_id, wanted, version, require_stable=require_stable,
                                                        member_id=member_id, member_epoch=member_epoch,
                                                        topic_ids=topic_ids)
                response, failure = self._roundtrip(node, request, version, deadline)
                if response is not None:
                    result = co.handle_offset_fetch_response(response, version, self.group_id, wanted, topic_ids)
                    if result.error is None:
                        return result.offsets
                    if not result.retriable:
                        raise result.error
                    failure = result.error
                    if result.coordinator_unknown:
                        self._coordinator.mark_coordinator_unknown(str(result.error))
                    if result.metadata_update_needed:
                        self._client.request_metadata_update()
                last = failure or last
            self._wait_or_timeout(deadline, "fetch committed offsets", last)

    def commit_offsets_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float,
                            membership: Optional[Membership] = None,
                            on_result: Optional[Callable[[commit_mod.CommitResult], None]] = None) -> None:
        """Commit and wait; retriable errors are retried until the timeout, others raised.

        ``membership`` None commits outside group management (generation -1, member "").
        ``on_result`` sees every verdict (the engine resets its generation or rejoins).
        """
        if not offsets:
            return
        deadline = self._clock() + timeout_ms
        last: Optional[BaseException] = None
        while True:
            node, version = self._ready(OffsetCommitRequest, self._min_commit_version(), deadline)
            if node is not None:
                topic_ids, version = self._topic_ids(offsets, version)
                response, failure = self._roundtrip(
                    node, self._commit_request(offsets, version, membership, topic_ids), version, deadline)
                if response is not None:
                    result = self._judge(response, on_result, topic_ids)
                    if result.error is None:
                        return
                    if not result.retriable:
                        raise result.error
                    failure = result.error
                last = failure or last
            self._wait_or_timeout(deadline, "commit offsets", last)

    def commit_offsets_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                             callback: Optional[Callable[[Mapping[TopicPartition, OffsetAndMetadata],
                                                         Optional[BaseException]], Any]] = None,
                             membership: Optional[Membership] = None,
                             on_result: Optional[Callable[[commit_mod.CommitResult], None]] = None) -> Any:
        """Send one commit without waiting (no retries, as Java's commitAsync).

        ``callback(offsets, error_or_None)`` runs from the network client's poll. Returns
        the request's Future, or None when the coordinator is not ready (the callback then
        gets a retriable ``CoordinatorNotAvailableError`` at once).
        """
        offsets = dict(offsets)
        node, version = self._ready(OffsetCommitRequest, self._min_commit_version(), self._clock())
        if node is None:
            if callback is not None:
                callback(offsets, errors.CoordinatorNotAvailableError("coordinator of {!r} unknown".format(self.group_id)))
            return None
        topic_ids, version = self._topic_ids(offsets, version)
        future = self._client.send(node, self._commit_request(offsets, version, membership, topic_ids),
                                   version=version)

        def done(response: Any) -> None:
            result = self._judge(response, on_result, topic_ids)
            if callback is not None:
                callback(offsets, result.error)

        def failed(exc: BaseException) -> None:
            self._coordinator.mark_coordinator_unknown(str(exc), cause=exc)
            if callback is not None:
                callback(offsets, exc)

        future.add_callback(done)
        future.add_errback(failed)
        return future

    # --- helpers -----------------------------------------------------------------------

    def _min_commit_version(self) -> int:
        # The member epoch of a KIP-848 member is only understood from v9.
        return commit_mod.MIN_VERSION_CONSUMER_PROTOCOL if self._group_protocol == "consumer" else 2

    def _topic_ids(self, partitions: Iterable[TopicPartition], version: int) -> tuple[Optional[dict[str, Any]], int]:
        """The partitions' topic ids from the metadata (None unless every topic has one)
        and the version that allows: v10 names topics by id only."""
        topic_ids = commit_mod.topic_ids_or_none({tp.topic for tp in partitions}, self._client.cluster.topic_ids())
        return topic_ids, commit_mod.max_version_for_topic_ids(topic_ids, version)

    def _commit_request(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], version: int,
                        membership: Optional[Membership], topic_ids: Optional[Mapping[str, Any]]) -> Any:
        if membership is None:
            return commit_mod.build_offset_commit_request(self.group_id, offsets, version, topic_ids=topic_ids)
        return commit_mod.build_offset_commit_request(
            self.group_id, offsets, version, generation_id_or_member_epoch=membership.generation_id_or_member_epoch,
            member_id=membership.member_id, group_instance_id=membership.group_instance_id, topic_ids=topic_ids)

    def _judge(self, response: OffsetCommitResponse, on_result: Optional[Callable[[commit_mod.CommitResult], None]],
               topic_ids: Optional[Mapping[str, Any]]) -> commit_mod.CommitResult:
        result = commit_mod.handle_offset_commit_response(response, self.group_id, group_protocol=self._group_protocol,
                                                          topic_ids=topic_ids)
        if result.coordinator_unknown:
            self._coordinator.mark_coordinator_unknown(str(result.error))
        if result.metadata_update_needed:
            self._client.request_metadata_update()
        if on_result is not None:
            on_result(result)
        return result

    def _ready(self, request_cls: Any, min_version: int, deadline: float) -> tuple[Optional[int], int]:
        """The coordinator and the version to use with it; (None, -1) if not ready in time."""
        node = self._coordinator.ensure_coordinator_ready(max(0.0, deadline - self._clock()))
        if node is None:
            return None, -1
        broker = self._client.broker_api_versions(node).get(request_cls.api_key)
        if broker is None:
            raise errors.UnsupportedVersionError("coordinator {} does not support {}".format(node, request_cls.__name__))
        return node, choose_version(request_cls, broker, min_version)

    def _roundtrip(self, node: int, request: Any, version: int,
                   deadline: float) -> tuple[Any, Optional[BaseException]]:
        """(response, None), or (None, retriable error); a fatal send error is raised."""
        future = self._client.send(node, request, version=version)
        while not future.is_done and self._clock() < deadline:
            self._client.poll(timeout_ms=deadline - self._clock(), future=future)
        if not future.is_done:
            return None, None
        if future.exception is not None:  # failed
            if not future.retriable():
                raise future.exception
            # A lost connection to the coordinator: look it up again, as Java does.
            self._coordinator.mark_coordinator_unknown(str(future.exception), cause=future.exception)
            return None, future.exception
        return future.value, None

    def _wait_or_timeout(self, deadline: float, what: str, last: Optional[BaseException]) -> None:
        now = self._clock()
        if now >= deadline:
            raise errors.KafkaTimeoutError("failed to {} of group {!r} before the timeout{}".format(
                what, self.group_id, "" if last is None else " (last error: {})".format(last)))
        wait_until = min(deadline, now + self._retry_backoff_ms)
        while self._clock() < wait_until:
            self._client.poll(timeout_ms=wait_until - self._clock())
