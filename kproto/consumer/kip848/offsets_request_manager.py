"""Positions for the KIP-848 engine (Java's ``OffsetsRequestManager.updateFetchPositions``).

Owns the "find a position for every assigned partition" routine run for each application
poll on the background thread: validate positions after leader changes
(OffsetForLeaderEpoch), seed missing positions from committed offsets (an OffsetFetch
through the commit request manager, one at a time), move the rest to AWAIT_RESET per
``auto_offset_reset`` and send the ListOffsets resets. ``update_fetch_positions`` returns
a future that completes once committed offsets were applied and resets were sent (not
answered), as in Java; a fatal error (NoOffsetForPartitionError, truncation, ...) fails
it and surfaces from the application's poll().

Also the application's lookups (``offsets_for_times``, ``beginning_offsets``,
``end_offsets``: a ListOffsetsEvent): ``fetch_offsets_by_times`` sends one ListOffsets per
leader as UnsentRequests, asks again (after backoff, refreshing metadata) for partitions
without an answer, and completes with ``{tp: ListOffsetData}`` or fails at the deadline.

Resets (ListOffsets) and validations (OffsetForLeaderEpoch) are ``UnsentRequest``s too,
queued by ``update_fetch_positions`` and handed to the network thread by the next
``poll``, as in Java; request building and response handling are the shared pure helpers
of ``kproto.consumer.offsets`` (the classic engine's OffsetFetcher uses the same ones).
A node without a usable OffsetForLeaderEpoch (brokers before 2.3, Tansu) cannot validate:
its positions are trusted, as Java does. A fatal reset or validation error is kept and
raised by the next ``update_fetch_positions`` (so from the application's poll()).
"""

from __future__ import annotations

import functools
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Optional

from kproto.consumer.background.local_assignment import completed_future, when_complete
from kproto.consumer.background.request_manager import MAX_WAIT_MS, PollResult, RequestBuilder, UnsentRequest
from kproto.clock import monotonic_ms
from kproto.consumer.offsets import leader_epoch_validation as lev
from kproto.consumer.offsets import offset_fetcher_utils as utils
from kproto.consumer.offsets import refresh_committed_offsets
from kproto.errors import KafkaError, KafkaTimeoutError, UnsupportedVersionError
from kproto.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kproto.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kproto.structs import IsolationLevel, TopicPartition

if TYPE_CHECKING:
    from kproto.consumer.subscription_state import SubscriptionState
    from kproto.net.metadata import ClusterMetadata

log = logging.getLogger("kproto.kip848")


class _PendingFetchCommitted(NamedTuple):
    """The OffsetFetch in flight, shared by the polls asking for the same partitions
    (Java's PendingFetchCommittedRequest)."""

    partitions: frozenset[TopicPartition]
    future: Future[Any]


class _Lookup:
    """One application lookup: what is left to ask, what is answered, and its future."""

    def __init__(self, remaining: dict[Any, Any], require_timestamp: bool, deadline_ms: int, timeout_ms: int) -> None:
        self.remaining = remaining
        self.require_timestamp = require_timestamp
        self.deadline_ms = deadline_ms
        self.timeout_ms = timeout_ms
        self.fetched: dict[Any, Any] = {}
        self.in_flight = 0
        self.next_send_ms = 0
        self.future: Future[Any] = Future()


class OffsetsRequestManager:
    def __init__(self, subscriptions: SubscriptionState, metadata: ClusterMetadata, commit_request_manager: Any = None,
                 *, default_api_timeout_ms: int = 60000,
                 isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, time_ms: Callable[[], int] = monotonic_ms,
                 on_positions_progress: Callable[[], None] = lambda: None) -> None:
        self.default_api_timeout_ms = default_api_timeout_ms
        # Called (on the background thread) when positions can move on: a reset or
        # validation answer applied, or the metadata a leaderless reset waited for. The
        # poll round that found positions missing fetched nothing; a poll loop waiting
        # for records (up to retry.backoff.ms, as Java's pollForFetches) then starts the
        # next round at once: the validation a reset needs, or the fetches.
        self._on_positions_progress = on_positions_progress
        self._isolation_level = isolation_level
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._lookups: list[_Lookup] = []
        self._time_ms = time_ms
        self.subscriptions = subscriptions
        self.metadata = metadata
        self.commit_request_manager = commit_request_manager
        # The OffsetFetch in flight and the partitions it asks for (no duplicates per poll).
        self._pending_committed: Optional[_PendingFetchCommitted] = None
        # Resets and validations queued by update_fetch_positions for the next poll.
        self._position_requests: list[UnsentRequest] = []
        self._cached_reset_error: Optional[BaseException] = None
        self._cached_validation_error: Optional[BaseException] = None

    def poll(self, now_ms: int) -> PollResult:
        requests, self._position_requests = self._position_requests, []
        wait = MAX_WAIT_MS
        for lookup in list(self._lookups):
            if lookup.future.done():
                self._lookups.remove(lookup)
            elif now_ms >= lookup.deadline_ms and not lookup.in_flight:
                self._finish_lookup(lookup, KafkaTimeoutError(
                    "Failed to get offsets by times in {} ms".format(lookup.timeout_ms)))
            elif not lookup.in_flight and now_ms >= lookup.next_send_ms:
                requests.extend(self._send_lookup(lookup))
            elif not lookup.in_flight:
                wait = min(wait, lookup.next_send_ms - now_ms)
        return PollResult(wait, requests)

    # --- ListOffsets lookups for the application -------------------------------------------

    def fetch_offsets_by_times(self, timestamps: Mapping[TopicPartition, int], require_timestamp: bool,
                               deadline_ms: int) -> Future[Any]:
        """``{tp: ListOffsetData}`` for every partition with an offset (others are left out)."""
        now = self._time_ms()
        lookup = _Lookup(dict(timestamps), require_timestamp, deadline_ms, max(0, deadline_ms - now))
        utils.ensure_topics(self.metadata, timestamps)
        if not timestamps:
            lookup.future.set_result({})
        else:
            self._lookups.append(lookup)
        return lookup.future

    def _send_lookup(self, lookup: "_Lookup") -> list[UnsentRequest]:
        by_node, no_leader = utils.group_list_offsets_requests(lookup.remaining, self.metadata)
        if no_leader:
            # A refresh that fails for good (an authentication failure) ends the lookup
            # now instead of at its deadline.
            self.metadata.request_update().add_errback(
                lambda exc: None if getattr(exc, "retriable", False) else self._finish_lookup(lookup, exc))
        if not by_node:
            lookup.next_send_ms = self._time_ms() + self.retry_backoff_ms
            return []
        requests = []
        for node_id, partitions in by_node.items():
            requested = set(partitions)
            requests.append(self._list_offsets_request(
                node_id, partitions, lookup.require_timestamp,
                functools.partial(self._on_lookup_response, lookup, requested)))
            lookup.in_flight += 1
        return requests

    def _list_offsets_request(self, node_id: int, partitions: dict[Any, Any], require_timestamp: bool,
                              on_done: Callable[[list[Any], Any, Optional[BaseException]], None]) -> UnsentRequest:
        """A ListOffsets to ``node_id`` built for the node's version; ``on_done(versions,
        response, error)`` gets the version it was sent with as ``versions[-1]``."""
        min_version = utils.list_offsets_min_version(self._isolation_level, require_timestamp)
        versions: list[int] = []

        def _build(max_version: int) -> tuple[Any, int]:
            if max_version < min_version:
                raise UnsupportedVersionError("ListOffsets v{}+ is needed, the broker has v{}".format(
                    min_version, max_version))
            versions.append(max_version)
            return utils.build_list_offsets_request(partitions, self._isolation_level, max_version,
                                                    self.request_timeout_ms), max_version

        unsent = UnsentRequest(RequestBuilder(ListOffsetsRequest, _build), node_id)
        unsent.when_complete(lambda response, error: on_done(versions, response, error))
        return unsent

    def _on_lookup_response(self, lookup: "_Lookup", requested: set[Any], versions: list[Any],
                            response: ListOffsetsResponse,
                            error: Optional[BaseException]) -> None:
        lookup.in_flight -= 1
        try:
            if error is not None:
                raise error
            result = utils.handle_list_offsets_response(response, versions[-1], requested)
        except KafkaError as exc:
            if not getattr(exc, "retriable", False):
                self._finish_lookup(lookup, exc)
                return
            self.metadata.request_update(reset_equivalent=False)
        else:
            lookup.fetched.update(result.fetched_offsets)
            for tp in list(result.fetched_offsets) + list(result.no_offset):
                lookup.remaining.pop(tp, None)
            if result.metadata_update_needed:
                self.metadata.request_update(reset_equivalent=False)
        if not lookup.remaining and not lookup.in_flight:
            self._finish_lookup(lookup, None)
        elif not lookup.in_flight:
            lookup.next_send_ms = self._time_ms() + self.retry_backoff_ms

    def _finish_lookup(self, lookup: "_Lookup", error: Optional[BaseException]) -> None:
        if lookup in self._lookups:
            self._lookups.remove(lookup)
        if lookup.future.done():
            return
        if error is not None:
            lookup.future.set_exception(error)
        else:
            lookup.future.set_result(lookup.fetched)

    def maximum_time_to_wait(self, now_ms: int) -> int:
        return MAX_WAIT_MS

    def update_fetch_positions(self, deadline_ms: int) -> Future[Any]:
        """Complete with True when every assigned partition has a position."""
        result: Future[Any] = Future()
        try:
            self._validate_positions_if_needed()
            if self.subscriptions.has_all_fetch_positions():
                result.set_result(True)
                return result
            initializing = frozenset(self.subscriptions.initializing_partitions())
            committed = self._fetch_committed(initializing, deadline_ms)
        except KafkaError as exc:
            result.set_exception(exc)
            return result

        def _after_committed(error: Optional[BaseException]) -> None:
            try:
                if error is not None and getattr(error, "retriable", False):
                    # Not fatal for poll(): positions stay missing, the next poll asks again.
                    log.debug("Fetching committed offsets failed, will retry: %s", error)
                    self._pending_committed = None
                    result.set_result(False)
                    return
                if error is not None:
                    raise error
                offsets = committed.result()
                if offsets:
                    refresh_committed_offsets(self.subscriptions, self.metadata, offsets)
                self.subscriptions.reset_initializing_positions()
                self._reset_positions_if_needed()
                result.set_result(self.subscriptions.has_all_fetch_positions())
            except BaseException as exc:  # surfaced from poll() on the application thread
                result.set_exception(exc)

        when_complete(committed, _after_committed)
        return result

    def _fetch_committed(self, partitions: frozenset[Any], deadline_ms: int) -> Future[Any]:
        if self.commit_request_manager is None or not partitions:
            return completed_future({})
        pending = self._pending_committed
        if pending is not None and not pending.future.done() and pending.partitions == partitions:
            return pending.future
        # Its own deadline: a poll(0) must not make the OffsetFetch expire at once; the
        # request is shared by the polls that follow until it completes.
        deadline_ms = max(deadline_ms, self._time_ms() + self.default_api_timeout_ms)
        future = self.commit_request_manager.fetch_offsets(set(partitions), deadline_ms)
        self._pending_committed = _PendingFetchCommitted(partitions, future)
        return future

    # --- resets (ListOffsets) ----------------------------------------------------------------

    def _reset_positions_if_needed(self) -> None:
        """Queue ListOffsets for partitions awaiting a reset; answers seek in callbacks."""
        error, self._cached_reset_error = self._cached_reset_error, None
        if error is not None:
            raise error
        now = self._time_ms()
        timestamps = utils.partitions_to_reset(self.subscriptions, now)
        if not timestamps:
            return
        by_node, no_leader = utils.group_list_offsets_requests(timestamps, self.metadata)
        if no_leader:
            utils.retry_after_metadata_update(self.subscriptions, self.metadata, no_leader, now, self.retry_backoff_ms,
                                              self.metadata.request_update, self._on_positions_progress)
        for node_id, partitions in by_node.items():
            requested = {tp: ts for tp, (ts, _epoch) in partitions.items()}
            # No second request for these until this one is answered or fails.
            self.subscriptions.set_next_allowed_retry(requested, now + self.request_timeout_ms)
            self._position_requests.append(self._list_offsets_request(
                node_id, partitions, False,
                functools.partial(self._on_reset_response, requested)))

    def _on_reset_response(self, requested: dict[Any, Any], versions: list[Any], response: ListOffsetsResponse,
                           error: Optional[BaseException]) -> None:
        try:
            if error is not None:
                raise error
            result = utils.handle_list_offsets_response(response, versions[-1], requested)
        except Exception as exc:
            self._cached_reset_error = utils.position_request_failed(
                self.subscriptions, requested, exc, self._time_ms() + self.retry_backoff_ms,
                functools.partial(self.metadata.request_update, reset_equivalent=False), self._cached_reset_error)
            return
        utils.apply_reset_result(self.subscriptions, self.metadata, requested, result, self._time_ms(),
                                 self.retry_backoff_ms)
        if result.metadata_update_needed:
            self.metadata.request_update(reset_equivalent=False)
        self._on_positions_progress()

    # --- validation (OffsetForLeaderEpoch) ---------------------------------------------------

    def _validate_positions_if_needed(self) -> None:
        """Queue OffsetForLeaderEpoch for positions to check after leader changes."""
        error, self._cached_validation_error = self._cached_validation_error, None
        if error is not None:
            raise error
        subs = self.subscriptions
        now = self._time_ms()
        positions = lev.positions_to_validate(subs, self.metadata, now)
        for tp, pos in positions.items():
            if not lev.needs_request(pos):
                subs.complete_validation(tp)  # no epoch to check against: trust it
        for node_id, node_positions in lev.group_validation_requests(positions).items():

            def _build(max_version: int, node_positions=node_positions) -> tuple[Any, int]:
                if max_version < lev.MIN_CONSUMER_VERSION:
                    raise UnsupportedVersionError("OffsetForLeaderEpoch v{}+ is needed, the broker has v{}".format(
                        lev.MIN_CONSUMER_VERSION, max_version))
                return lev.build_offset_for_leader_epoch_request(node_positions, max_version), max_version

            subs.set_next_allowed_retry(node_positions, now + self.request_timeout_ms)
            unsent = UnsentRequest(RequestBuilder(OffsetForLeaderEpochRequest, _build), node_id)
            unsent.when_complete(functools.partial(self._on_validation_response, node_positions))
            self._position_requests.append(unsent)

    def _on_validation_response(self, requested: dict[Any, Any], response: OffsetForLeaderEpochResponse,
                                error: Optional[BaseException]) -> None:
        subs = self.subscriptions
        if isinstance(error, UnsupportedVersionError):
            # The node cannot validate (no usable OffsetForLeaderEpoch): trust the positions.
            log.debug("Node cannot validate positions; trusting %s", utils.format_partitions(requested))
            for tp in requested:
                subs.complete_validation(tp)
            self._on_positions_progress()
            return
        try:
            if error is not None:
                raise error
            self._cached_validation_error = lev.on_validation_response(
                subs, response, requested, self._time_ms(), self.retry_backoff_ms,
                functools.partial(self.metadata.request_update, reset_equivalent=False),
                self._cached_validation_error)
        except Exception as exc:
            self._cached_validation_error = utils.position_request_failed(
                subs, requested, exc, self._time_ms() + self.retry_backoff_ms,
                functools.partial(self.metadata.request_update, reset_equivalent=False),
                self._cached_validation_error)
            return
        self._on_positions_progress()
