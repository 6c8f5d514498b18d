"""Offset commits and committed-offset fetches for the KIP-848 engine (Java's
``CommitRequestManager``).

Owns the queue of OffsetCommit / OffsetFetch requests to the group coordinator, each
retried with backoff until it succeeds, fails with a non-retriable error, or reaches its
deadline (an async commit, which has none, is retried once after a retriable error); the auto-commit
timer (``update_timer_and_maybe_commit``, called for every application poll); and the
commit before revocation (``maybe_auto_commit_sync_before_rebalance``), which treats
STALE_MEMBER_EPOCH as retriable with the newer epoch and UNKNOWN_TOPIC_OR_PARTITION as
fatal, so a deleted topic cannot stall a rebalance.

Requests carry the member id and epoch (OffsetCommit v9+, OffsetFetch v9+), kept current
through the membership manager's ``on_member_epoch_updated``, and name topics by id (v10+)
when the metadata (``topic_ids()``) has an id for each of them, else use v9; an
UNKNOWN_TOPIC_ID answer is retried after a metadata refresh. Judging responses is the
shared ``kproto.consumer.offsets`` code; this module only decides when to send and retry.
"""

from __future__ import annotations

import logging
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from kproto.consumer.background.coordinator_request_manager import CoordinatorRequestManager
from kproto.consumer.background.local_assignment import completed_future
from kproto.consumer.background.request_manager import (
    MAX_WAIT_MS,
    PollResult,
    RequestBuilder,
    RequestState,
    UnsentRequest,
)
from kproto.consumer.offsets import (
    AutoCommitState,
    build_offset_commit_request,
    build_offset_fetch_request,
    handle_offset_commit_response,
    handle_offset_fetch_response,
    max_version_for_topic_ids,
    topic_ids_or_none,
)
from kproto.errors import KafkaTimeoutError
from kproto.messages import OffsetCommitRequest, OffsetFetchRequest
from kproto.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kproto.consumer.subscription_state import SubscriptionState

log = logging.getLogger("kproto.kip848")


class _PendingRequest:
    """One commit or fetch with its retry state; ``future`` completes once."""

    def __init__(self, kind: str, payload: Any, deadline_ms: Optional[int], retry_backoff_ms: int,
                 retry_backoff_max_ms: int, jitter: float, *, before_revocation: bool = False,
                 retry_once: bool = False) -> None:
        self.kind = kind  # "commit" or "fetch"
        self.payload = payload  # offsets to commit, or partitions to fetch
        self.deadline_ms = deadline_ms
        self.before_revocation = before_revocation
        self.retry_once = retry_once
        self.state = RequestState("Offset" + kind.capitalize(), retry_backoff_ms, retry_backoff_max_ms, jitter)
        self.future: Future[Any] = Future()
        self.version: Optional[int] = None
        self.topic_ids: Optional[dict[str, uuid.UUID]] = None  # the ids the last request used (v10)


class CommitRequestManager:
    def __init__(self, group_id: str, subscriptions: SubscriptionState,
                 coordinator_request_manager: CoordinatorRequestManager, *, auto_commit_enabled: bool,
                 auto_commit_interval_ms: int = 5000,
                 group_instance_id: Optional[str] = None, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 1000, jitter: float = RequestState.RETRY_BACKOFF_JITTER,
                 require_stable: bool = False,
                 now_ms: int = 0, time_ms: Optional[Callable[[], int]] = None,
                 topic_ids: Callable[[], Mapping[str, uuid.UUID]] = dict,
                 request_metadata_update: Callable[[], Any] = lambda: None) -> None:
        self.group_id = group_id
        self._topic_ids = topic_ids
        self._request_metadata_update = request_metadata_update
        self.subscriptions = subscriptions
        self.coordinator_request_manager = coordinator_request_manager
        self.group_instance_id = group_instance_id
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.jitter = jitter
        self.require_stable = require_stable
        self.auto_commit_state = AutoCommitState(auto_commit_interval_ms, now_ms, retry_backoff_ms) \
            if auto_commit_enabled else None
        self._time_ms = time_ms
        self.member_id = ""
        self.member_epoch: Optional[int] = None
        self.pending: list[_PendingRequest] = []
        self._closing = False
        #: CoordinatorMetrics (None: metrics off): commit-latency-*, commit-rate/total.
        self.sensors: Any = None
        #: How commit answers are judged: "classic" when the epoch is a classic generation id
        #: (``kproto.aio``'s classic group drives this manager).
        self.group_protocol = "consumer"

    # --- member state listener ---------------------------------------------------------

    def on_member_epoch_updated(self, member_epoch: Optional[int], member_id: str) -> None:
        self.member_epoch = member_epoch
        self.member_id = member_id if member_epoch is not None else ""

    def on_group_assignment_updated(self, partitions: set[TopicPartition]) -> None:
        pass

    # --- the request manager contract ----------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        # The auto-commit timer is not this loop's business: it fires from the application's
        # poll (maximum_time_to_wait makes that poll wake up in time).
        self._expire(now_ms)
        coordinator = self.coordinator_request_manager.coordinator
        if coordinator is None:
            self._maybe_fail_on_coordinator_fatal_error()
        if not self.pending or coordinator is None:
            return PollResult(MAX_WAIT_MS if not self.pending else self.retry_backoff_ms)
        unsent = []
        wait = MAX_WAIT_MS
        for pending in self.pending:
            if pending.state.can_send_request(now_ms):
                unsent.append(self._make_request(pending, coordinator.node_id, now_ms))
            elif not pending.state.request_in_flight():
                wait = min(wait, pending.state.remaining_backoff_ms(now_ms))
        return PollResult(wait, unsent)

    def maximum_time_to_wait(self, now_ms: int) -> int:
        return self._auto_commit_wait(now_ms)

    def _maybe_fail_on_coordinator_fatal_error(self) -> None:
        # Java's maybeFailOnCoordinatorFatalError: no coordinator will come (an
        # authentication failure, a denied group), so waiting out the deadline helps nobody.
        error = self.coordinator_request_manager.fatal_error
        if error is not None:
            for pending in list(self.pending):
                self._finish(pending, error=error)

    def signal_close(self) -> None:
        self._closing = True

    def _auto_commit_wait(self, now_ms: int) -> int:
        if self.auto_commit_state is None or self._closing:
            return MAX_WAIT_MS
        return self.auto_commit_state.remaining_ms(now_ms)

    # --- API used by the application event processor ------------------------------------

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Future[Any]:
        """Commit once (retried only after coordinator rediscovery), no deadline."""
        return self._add("commit", dict(offsets), None, retry_once=True)

    def commit_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], deadline_ms: int) -> Future[Any]:
        """Commit, retrying retriable errors until ``deadline_ms``."""
        return self._add("commit", dict(offsets), deadline_ms)

    def fetch_offsets(self, partitions: set[TopicPartition], deadline_ms: int) -> Future[Any]:
        """Committed offsets ``{tp: OffsetAndMetadata or None}``, retried until the deadline."""
        return self._add("fetch", frozenset(partitions), deadline_ms)

    def update_timer_and_maybe_commit(self, now_ms: int) -> None:
        """Every application poll: auto-commit the consumed positions when the interval is due."""
        state = self.auto_commit_state
        if state is None or self._closing or not state.can_send_auto_commit(now_ms):
            return
        offsets = self.subscriptions.all_consumed()
        if not offsets:
            state.reset(now_ms)
            return
        state.on_sent(now_ms)
        log.debug("Auto-committing %s", offsets)
        self.commit_async(offsets).add_done_callback(
            lambda f: state.on_completed(self._now(now_ms), f.exception()))

    def maybe_auto_commit_sync_before_rebalance(self, deadline_ms: int) -> Future[Any]:
        """Before partitions are revoked: commit what was consumed (auto-commit only)."""
        if self.auto_commit_state is None:
            return completed_future()
        offsets = self.subscriptions.all_consumed()
        if not offsets:
            return completed_future()
        return self._add("commit", offsets, deadline_ms, before_revocation=True)

    # --- requests and responses ------------------------------------------------------------

    def _now(self, fallback: int) -> int:
        return self._time_ms() if self._time_ms is not None else fallback

    def _add(self, kind: str, payload: Any, deadline_ms: Optional[int], **flags: bool) -> Future[Any]:
        if not payload:
            return completed_future({} if kind == "fetch" else None)
        pending = _PendingRequest(kind, payload, deadline_ms, self.retry_backoff_ms, self.retry_backoff_max_ms,
                                  self.jitter, **flags)
        self.pending.append(pending)
        return pending.future

    def _expire(self, now_ms: int) -> None:
        for pending in list(self.pending):
            if pending.deadline_ms is not None and now_ms >= pending.deadline_ms \
                    and not pending.state.request_in_flight():
                self._finish(pending, error=KafkaTimeoutError(
                    "Offset{} did not complete before its deadline".format(pending.kind.capitalize())))

    def _finish(self, pending: _PendingRequest, result: Any = None, error: Optional[BaseException] = None) -> None:
        if pending in self.pending:
            self.pending.remove(pending)
        if pending.future.done():
            return
        if error is not None:
            pending.future.set_exception(error)
        else:
            pending.future.set_result(result)

    def _build(self, pending: _PendingRequest, max_version: int) -> tuple[Any, int]:
        epoch = -1 if self.member_epoch is None else self.member_epoch
        topic_ids = topic_ids_or_none({tp.topic for tp in pending.payload}, self._topic_ids())
        version = max_version_for_topic_ids(topic_ids, max_version)
        pending.version, pending.topic_ids = version, topic_ids
        if pending.kind == "commit":
            return build_offset_commit_request(
                self.group_id, pending.payload, version, generation_id_or_member_epoch=epoch,
                member_id=self.member_id, group_instance_id=self.group_instance_id, topic_ids=topic_ids), version
        member_id = self.member_id if self.member_epoch is not None else None
        return build_offset_fetch_request(self.group_id, sorted(pending.payload), version,
                                          require_stable=self.require_stable, member_id=member_id,
                                          member_epoch=epoch, topic_ids=topic_ids), version

    def _make_request(self, pending: _PendingRequest, node_id: int, now_ms: int) -> UnsentRequest:
        pending.state.on_send_attempt(now_ms)
        request_class = OffsetCommitRequest if pending.kind == "commit" else OffsetFetchRequest
        unsent = UnsentRequest(RequestBuilder(request_class, lambda v: self._build(pending, v)), node_id)

        def _on_complete(response: Any, error: Optional[BaseException]) -> None:
            done_ms = unsent.completion_time_ms if unsent.completion_time_ms is not None else now_ms
            if error is not None:
                self.coordinator_request_manager.handle_coordinator_disconnect(error, done_ms)
                self._on_failure(pending, error, getattr(error, "retriable", False), False, done_ms)
            elif pending.kind == "commit":
                if self.sensors is not None:
                    self.sensors.record_commit(done_ms - now_ms)
                result = handle_offset_commit_response(response, self.group_id, group_protocol=self.group_protocol,
                                                       before_revocation=pending.before_revocation,
                                                       topic_ids=pending.topic_ids)
                if result.error is None:
                    self._finish(pending, None)
                else:
                    self._on_failure(pending, result.error, result.retriable, result.coordinator_unknown, done_ms,
                                     result.metadata_update_needed)
            else:
                assert pending.version is not None  # set by _build() when the request went out
                fetched = handle_offset_fetch_response(response, pending.version, self.group_id, pending.payload,
                                                       pending.topic_ids)
                if fetched.error is None:
                    self._finish(pending, fetched.offsets)
                else:
                    self._on_failure(pending, fetched.error, fetched.retriable, fetched.coordinator_unknown, done_ms,
                                     fetched.metadata_update_needed)

        return unsent.when_complete(_on_complete)

    def _on_failure(self, pending: _PendingRequest, error: BaseException, retriable: bool,
                    coordinator_unknown: bool, now_ms: int, metadata_update_needed: bool = False) -> None:
        pending.state.on_failed_attempt(now_ms)
        if coordinator_unknown:
            self.coordinator_request_manager.mark_coordinator_unknown(str(error), now_ms)
        if metadata_update_needed:
            self._request_metadata_update()
        expired = pending.deadline_ms is not None and now_ms >= pending.deadline_ms
        if retriable and not expired and not (pending.retry_once and pending.state.num_attempts > 1):
            log.debug("Offset%s failed with a retriable error, retrying: %s", pending.kind.capitalize(), error)
            return
        self._finish(pending, error=error)
