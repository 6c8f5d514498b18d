"""ShareFetch and ShareAcknowledge (Java's ``ShareConsumeRequestManager``).

Owns, on the background thread: one ``ShareSessionHandler`` per node, the
acknowledgements waiting to be sent to each node, the futures of ``commit()`` calls
waiting for theirs, and the rule of what to send to a node on each ``poll``:

1. at most one request in flight per node, so a node sees acknowledgements in the order
   the application made them; after a failure the node backs off (``RequestState``);
2. acknowledgements go to the node whose session delivered the record, and only within
   that same session: an acknowledgement for a record delivered by a session that has
   since ended fails locally (the broker already released the record; nothing is sent);
3. acknowledgements ride on the next ShareFetch to their node when the application asked
   for more records and every acknowledged partition is fetched from it; otherwise
   (a ``commit()``, RENEW, a partition no longer fetched there, or no fetch wanted) they go
   in a ShareAcknowledge;
4. a ShareFetch goes to a node only when the application asked for records (each
   ``poll``) and nothing the node delivered is still buffered or held by the application
   (``ShareFetchBuffer.buffered_nodes``): memory stays bounded by one response per node,
   no answer can repeat records the application holds, and a partition no longer
   assigned (or all of them, while a fenced member rejoins) is forgotten only once the
   application settled what it holds of that node (a broker may release a member's
   records of a forgotten partition: librdkafka's mock does);
5. a session error (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH) or a broken
   connection ends the node's session: its buffered records are dropped (the broker
   released them) and its in-flight acknowledgements fail with that error;
6. on close, each open session gets a final ShareAcknowledge (epoch -1) with the last
   acknowledgements; the broker releases whatever else this member still holds.

Every completed acknowledgement is reported to the application thread as a
``ShareAcknowledgementCommitCallbackEvent`` (its acknowledgement commit callback).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from kproto.consumer.background.events import BackgroundEventHandler, ErrorEvent
from kproto.consumer.background.request_manager import (MAX_WAIT_MS, PollResult, RequestBuilder, RequestState,
                                                         UnsentRequest)
from kproto.consumer.share.acknowledgements import Acknowledgements, AcknowledgeType
from kproto.consumer.share.events import AckEntry, ShareAcknowledgementCommitCallbackEvent
from kproto.consumer.share.share_completed_fetch import ShareCompletedFetch
from kproto.consumer.share.share_fetch_buffer import ShareFetchBuffer
from kproto.consumer.share.share_membership_manager import ShareMembershipManager
from kproto.consumer.share.share_session_handler import ShareFetchParams, ShareSessionHandler
from kproto.errors import (ErrorCode, KafkaError, ShareSessionNotFoundError, UnsupportedVersionError, error_for,
                           exception_for, for_code)
from kproto.messages import ShareAcknowledgeRequest, ShareFetchRequest
from kproto.structs import TopicIdPartition, TopicPartition

if TYPE_CHECKING:
    from kproto.net.metadata import ClusterMetadata

log = logging.getLogger("kproto.share")

_SESSION_ERRORS = frozenset((ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             ErrorCode.SHARE_SESSION_LIMIT_REACHED))
_METADATA_ERRORS = frozenset((ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.LEADER_NOT_AVAILABLE,
                              ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REPLICA_NOT_AVAILABLE))


class _CommitWaiter:
    """A ``commit()`` waiting for its acknowledgements' answers."""

    __slots__ = ("entries", "future")

    def __init__(self, entries: list[AckEntry], future: Future[Any]) -> None:
        self.entries = entries
        self.future = future

    def try_complete(self) -> bool:
        if not all(e.acks.completed for e in self.entries):
            return False
        result: dict[TopicIdPartition, Optional[BaseException]] = {}
        for e in self.entries:
            if e.acks.error is not None or e.tip not in result:
                result[e.tip] = e.acks.error
        if not self.future.done():
            self.future.set_result(result)
        return True


class ShareConsumeRequestManager:
    def __init__(self, group_id: str, membership: ShareMembershipManager, metadata: ClusterMetadata,
                 fetch_buffer: ShareFetchBuffer, background_event_handler: BackgroundEventHandler,
                 params: ShareFetchParams, *, check_crcs: bool = True, key_deserializer: Any = None,
                 value_deserializer: Any = None, retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000,
                 request_metadata_update: Callable[[], Any] = lambda: None, metrics_manager: Any = None) -> None:
        self.group_id = group_id
        self.metrics_manager = metrics_manager  # ShareFetchMetricsManager, None when metrics are off
        self.membership = membership
        self.metadata = metadata
        self.fetch_buffer = fetch_buffer
        self.background_event_handler = background_event_handler
        self.params = params
        self._check_crcs = check_crcs
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self._request_metadata_update = request_metadata_update
        self.session_handlers: dict[int, ShareSessionHandler] = {}
        self._request_states: dict[int, RequestState] = {}
        self.pending: dict[int, list[AckEntry]] = {}
        self._commit_nodes: set[int] = set()  # nodes whose acknowledgements a commit waits for
        self._waiters: list[_CommitWaiter] = []
        self._fetch_requested = False
        self._closing = False
        self._close_future: Optional[Future[Any]] = None
        self._closed_nodes: set[int] = set()

    # --- from the application event processor ---------------------------------------------------

    def handler(self, node_id: int) -> ShareSessionHandler:
        handler = self.session_handlers.get(node_id)
        if handler is None:
            handler = self.session_handlers[node_id] = ShareSessionHandler(
                node_id, self.group_id, self.membership.member_id)
        return handler

    def request_fetch(self) -> None:
        self._fetch_requested = True

    def add_acknowledgements(self, entries: Iterable[AckEntry], commit: bool = False) -> Future[Any]:
        """Queue ``entries``; the future completes with ``{partition: error or None}`` once
        every one was answered. ``commit``: send them now in ShareAcknowledge."""
        entries = [e for e in entries if e.acks]
        future: Future[Any] = Future()
        for entry in entries:
            self.pending.setdefault(entry.node_id, []).append(entry)
            if commit:
                self._commit_nodes.add(entry.node_id)
        for node_id in {e.node_id for e in entries}:
            self._fail_stale(node_id)
        waiter = _CommitWaiter(entries, future)
        if not waiter.try_complete():
            self._waiters.append(waiter)
        return future

    def acknowledge_on_close(self, entries: Iterable[AckEntry]) -> Future[Any]:
        """Send the last acknowledgements and close every share session (final epoch)."""
        self.add_acknowledgements(entries)
        self._closing = True
        self._fetch_requested = False
        self._close_future = Future()
        self._closed_nodes = set()
        self._maybe_complete_close()
        return self._close_future

    def reopen(self) -> None:
        """After an unsubscribe closed the sessions: the next subscription fetches again."""
        self._closing = False
        self._close_future = None

    # --- the loop ---------------------------------------------------------------------------

    def _state(self, node_id: int) -> RequestState:
        state = self._request_states.get(node_id)
        if state is None:
            state = self._request_states[node_id] = RequestState(
                "ShareFetch-{}".format(node_id), self._retry_backoff_ms, self._retry_backoff_max_ms)
        return state

    def fetch_partitions_by_node(self) -> dict[int, list[TopicIdPartition]]:
        by_node: dict[int, list[TopicIdPartition]] = {}
        missing_leader = False
        for tip in self.membership.assigned_partitions():
            leader = self.metadata.leader_for_partition(tip.topic_partition)
            if leader is None or leader < 0:
                missing_leader = True
                continue
            by_node.setdefault(leader, []).append(tip)
        if missing_leader:
            self._request_metadata_update()
        return by_node

    def poll(self, now_ms: int) -> PollResult:
        requests: list[UnsentRequest] = []
        wait = MAX_WAIT_MS
        if self._closing:
            nodes = set(self.pending) | {n for n, h in self.session_handlers.items() if h.has_session()}
            for node_id in sorted(nodes - self._closed_nodes):
                state = self._state(node_id)
                if state.request_in_flight():
                    continue
                self._fail_stale(node_id)
                if self.handler(node_id).has_session():
                    requests.append(self._make_acknowledge(node_id, now_ms, final=True))
                else:
                    self._fail_entries(self.pending.pop(node_id, []), ShareSessionNotFoundError(
                        "no open share session on node {}".format(node_id)))
                self._closed_nodes.add(node_id)
            self._maybe_complete_close()
            return PollResult(MAX_WAIT_MS, requests)

        fetch_by_node = self.fetch_partitions_by_node() if self._fetch_requested else {}
        # Also with nothing assigned (a fenced member rejoining): a ShareFetch that only
        # forgets partitions waits too, or the records the application holds are released.
        buffered = self.fetch_buffer.buffered_nodes() if self._fetch_requested else set()
        nodes = set(self.pending) | set(fetch_by_node)
        if self._fetch_requested:
            # Sessions holding partitions no longer assigned here: forget them.
            nodes |= {n for n, h in self.session_handlers.items() if h.has_session() and h.session_partitions}
        for node_id in sorted(nodes):
            state = self._state(node_id)
            if not state.can_send_request(now_ms):
                if not state.request_in_flight():
                    wait = min(wait, state.remaining_backoff_ms(now_ms))
                continue
            handler = self.handler(node_id)
            entries = self.pending.get(node_id)
            partitions = fetch_by_node.get(node_id, [])
            fetching = self._fetch_requested and node_id not in buffered and (
                partitions or (handler.has_session() and set(handler.session_partitions) - set(partitions)))
            if entries:
                wanted = set(partitions)
                piggyback = (fetching and handler.has_session() and node_id not in self._commit_nodes
                             and all(e.tip in wanted for e in entries)
                             and not any(t == AcknowledgeType.RENEW for e in entries for _, t in e.acks.items()))
                if not piggyback:
                    requests.append(self._make_acknowledge(node_id, now_ms))
                    continue
            if fetching:
                requests.append(self._make_fetch(node_id, partitions, now_ms))
        if fetch_by_node:
            # Without an assignment yet the wish stays: the first assignment fetches at once.
            self._fetch_requested = False
        return PollResult(wait, requests)

    def maximum_time_to_wait(self, now_ms: int) -> int:
        return MAX_WAIT_MS

    def _fail_stale(self, node_id: int) -> None:
        """Fail acknowledgements for records delivered by a session of this node that ended."""
        entries = self.pending.get(node_id)
        if not entries:
            return
        generation = self.handler(node_id).generation
        stale = [e for e in entries if e.generation != generation]
        if stale:
            self.pending[node_id] = [e for e in entries if e.generation == generation]
            if not self.pending[node_id]:
                del self.pending[node_id]
            self._fail_entries(stale, ShareSessionNotFoundError(
                "the share session on node {} that delivered these records ended; the broker released "
                "them".format(node_id)))

    # --- requests ---------------------------------------------------------------------------

    def _take_pending(self, node_id: int) -> tuple[list[AckEntry], dict[TopicIdPartition, Acknowledgements]]:
        entries = self.pending.pop(node_id, [])
        self._commit_nodes.discard(node_id)
        merged: dict[TopicIdPartition, Acknowledgements] = {}
        for entry in entries:
            merged.setdefault(entry.tip, Acknowledgements()).add_all(entry.acks)
        return entries, merged

    def _make_fetch(self, node_id: int, partitions: list[TopicIdPartition], now_ms: int) -> UnsentRequest:
        handler = self.handler(node_id)
        entries, acks = self._take_pending(node_id) if handler.has_session() else ([], {})
        state = self._state(node_id)
        state.on_send_attempt(now_ms)
        generation = handler.generation

        def _build(version: int) -> tuple[Any, int]:
            return handler.build_share_fetch(partitions, acks, self.params, version), version

        unsent = UnsentRequest(RequestBuilder(ShareFetchRequest, _build), node_id)

        def _on_complete(response: Any, error: Optional[BaseException]) -> None:
            done_ms = unsent.completion_time_ms if unsent.completion_time_ms is not None else now_ms
            try:
                if error is not None:
                    self._on_request_failure(node_id, entries, error, done_ms, fetch=True)
                else:
                    self._on_fetch_response(node_id, partitions, entries, response, generation, done_ms, now_ms)
            finally:
                self._after_completion()
                self.fetch_buffer.wakeup()

        return unsent.when_complete(_on_complete)

    def _make_acknowledge(self, node_id: int, now_ms: int, final: bool = False) -> UnsentRequest:
        handler = self.handler(node_id)
        entries, acks = self._take_pending(node_id)
        state = self._state(node_id)
        state.on_send_attempt(now_ms)

        def _build(version: int) -> tuple[Any, int]:
            return handler.build_share_acknowledge(acks, version, final=final), version

        unsent = UnsentRequest(RequestBuilder(ShareAcknowledgeRequest, _build), node_id)

        def _on_complete(response: Any, error: Optional[BaseException]) -> None:
            done_ms = unsent.completion_time_ms if unsent.completion_time_ms is not None else now_ms
            try:
                if error is not None:
                    self._on_request_failure(node_id, entries, error, done_ms)
                else:
                    self._on_acknowledge_response(node_id, entries, response, final, done_ms)
                if final:
                    handler.reset()
            finally:
                self._after_completion()

        return unsent.when_complete(_on_complete)

    # --- answers ----------------------------------------------------------------------------

    def _on_request_failure(self, node_id: int, entries: list[AckEntry], error: BaseException, now_ms: int,
                            fetch: bool = False) -> None:
        self._state(node_id).on_failed_attempt(now_ms)
        self._fail_entries(entries, error)
        if isinstance(error, (UnsupportedVersionError, ValueError)):
            # Never sent (the node lacks the API or the version the request needs): the
            # session is intact. A fetch that cannot be sent is the application's problem
            # (no share groups there, or share_acquire_mode it cannot serve): raise it.
            log.warning("Share request to node %d not sent: %s", node_id, error)
            if fetch:
                self.background_event_handler.add(ErrorEvent(error))
            return
        log.info("Share request to node %d failed: %s", node_id, error)
        self._end_session(node_id)
        self._request_metadata_update()

    def _end_session(self, node_id: int) -> None:
        self.handler(node_id).reset()
        self._fail_stale(node_id)
        dropped = self.fetch_buffer.drop_node(node_id)
        if dropped:
            log.info("Dropped %d buffered fetches of node %d: its share session ended", len(dropped), node_id)

    def _top_level_error(self, node_id: int, entries: list[AckEntry], response: Any, now_ms: int) -> bool:
        code = response.error_code
        if code == ErrorCode.NONE:
            return False
        error = exception_for(code, response.error_message)
        self._state(node_id).on_failed_attempt(now_ms)
        self._fail_entries(entries, error)
        if code in _SESSION_ERRORS:
            log.info("Share session on node %d ended: %s", node_id, error)
            self._end_session(node_id)
        elif not getattr(error, "retriable", False):
            self.background_event_handler.add(ErrorEvent(error))
        else:
            self._request_metadata_update()
        return True

    def _on_fetch_response(self, node_id: int, partitions: list[TopicIdPartition], entries: list[AckEntry],
                           response: Any, generation: int, now_ms: int, sent_ms: int) -> None:
        if self._top_level_error(node_id, entries, response, now_ms):
            return
        self._state(node_id).on_successful_attempt(now_ms)
        handler = self.handler(node_id)
        handler.on_fetch_success(partitions)
        if self.metrics_manager is not None:
            self.metrics_manager.record_fetch(now_ms - sent_ms, sum(
                len(part.records or b"") for topic in response.responses for part in topic.partitions))
        # ShareFetch v1+ says how long the acquired records stay locked (0: not said).
        lock_timeout_ms = getattr(response, "acquisition_lock_timeout_ms", 0) or None
        names = {tip.topic_id: tip.topic for tip in partitions}
        names.update({e.tip.topic_id: e.tip.topic for e in entries})
        ack_errors: dict[TopicIdPartition, Optional[BaseException]] = {}
        for topic in response.responses:
            name = names.get(topic.topic_id) or self.metadata.topic_name(topic.topic_id)
            if name is None:
                continue
            for part in topic.partitions:
                tip = TopicIdPartition(topic.topic_id, TopicPartition(name, part.partition_index))
                ack_errors[tip] = error_for(part.acknowledge_error_code, part.acknowledge_error_message)
                if part.error_code:
                    self._on_partition_error("ShareFetch", tip, part.error_code, part.error_message)
                acquired = [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records]
                if acquired and not self._closing:  # closing: the final request releases them
                    self.fetch_buffer.add(ShareCompletedFetch(
                        node_id, tip, part.records, acquired, check_crcs=self._check_crcs,
                        key_deserializer=self._key_deserializer, value_deserializer=self._value_deserializer,
                        generation=generation, acquisition_lock_timeout_ms=lock_timeout_ms))
        self._complete_entries(entries, ack_errors)

    def _on_acknowledge_response(self, node_id: int, entries: list[AckEntry], response: Any, final: bool,
                                 now_ms: int) -> None:
        if self._top_level_error(node_id, entries, response, now_ms):
            return
        self._state(node_id).on_successful_attempt(now_ms)
        if not final:
            self.handler(node_id).on_acknowledge_success()
        ack_errors: dict[TopicIdPartition, Optional[BaseException]] = {}
        tips = {(e.tip.topic_id, e.tip.partition): e.tip for e in entries}
        for topic in response.responses:
            for part in topic.partitions:
                tip = tips.get((topic.topic_id, part.partition_index))
                if tip is not None:
                    ack_errors[tip] = error_for(part.error_code, part.error_message)
                    if part.error_code:
                        self._on_partition_error("ShareAcknowledge", tip, part.error_code, part.error_message)
        self._complete_entries(entries, ack_errors)

    def _on_partition_error(self, api: str, tip: TopicIdPartition, code: int, message: Optional[str]) -> None:
        if code in _METADATA_ERRORS:
            log.debug("%s for %s: %s; refreshing metadata", api, tip, for_code(code).message)
            self._request_metadata_update()
        else:
            log.warning("%s for %s failed: %s", api, tip, error_for(code, message))

    # --- completing acknowledgements ----------------------------------------------------------

    def _complete_entries(self, entries: list[AckEntry], errors: dict[TopicIdPartition, Optional[BaseException]]
                          ) -> None:
        for entry in entries:
            entry.acks.complete(errors.get(entry.tip))
        self._report(entries)

    def _fail_entries(self, entries: list[AckEntry], error: BaseException) -> None:
        for entry in entries:
            entry.acks.complete(error)
        self._report(entries)

    def _report(self, entries: list[AckEntry]) -> None:
        reported = [e for e in entries if e.acks.offsets()]
        if self.metrics_manager is not None:
            for e in reported:
                self.metrics_manager.record_acknowledgements(len(e.acks.offsets()), e.acks.error is not None)
        if reported:
            self.background_event_handler.add(ShareAcknowledgementCommitCallbackEvent(reported))

    def _after_completion(self) -> None:
        self._waiters = [w for w in self._waiters if not w.try_complete()]
        self._maybe_complete_close()

    def _maybe_complete_close(self) -> None:
        future = self._close_future
        if future is None or future.done():
            return
        if self.pending or any(s.request_in_flight() for s in self._request_states.values()):
            return
        if any(h.has_session() for h in self.session_handlers.values()):
            return
        future.set_result(None)

    def fail_all(self, error: KafkaError) -> None:
        """On close: whatever was never answered fails (callbacks still see it)."""
        for node_id in list(self.pending):
            self._fail_entries(self.pending.pop(node_id), error)
        self._after_completion()
