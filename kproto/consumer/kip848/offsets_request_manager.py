"""Positions for the KIP-848 engine (Java's ``OffsetsRequestManager.updateFetchPositions``).

Owns the "find a position for every assigned partition" routine run for each application
poll on the background thread: validate positions after leader changes
(OffsetForLeaderEpoch), seed missing positions from committed offsets (an OffsetFetch
through the commit request manager, one at a time), move the rest to AWAIT_RESET per
``auto_offset_reset`` and send the ListOffsets resets. ``update_fetch_positions`` returns
a future that completes once committed offsets were applied and resets were sent (not
answered), as in Java; a fatal error (NoOffsetForPartitionError, truncation, ...) fails
it and surfaces from the application's poll().

The ListOffsets / OffsetForLeaderEpoch requests are sent through the shared
``OffsetFetcher``'s non-blocking methods on the background thread (their callbacks run in
the network step), not as UnsentRequests.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any, Callable, Optional

from kproto.consumer.kip848.local_assignment import completed_future, when_complete
from kproto.consumer.kip848.request_manager import MAX_WAIT_MS, PollResult
from kproto.consumer.kip848.timer import monotonic_ms
from kproto.consumer.offsets import OffsetFetcher, refresh_committed_offsets
from kproto.errors import KafkaError

log = logging.getLogger("kproto.kip848")


class OffsetsRequestManager:
    def __init__(self, subscriptions: Any, metadata: Any, offset_fetcher: OffsetFetcher,
                 commit_request_manager: Any = None, *, default_api_timeout_ms: int = 60000,
                 time_ms: Callable[[], int] = monotonic_ms) -> None:
        self.default_api_timeout_ms = default_api_timeout_ms
        self._time_ms = time_ms
        self.subscriptions = subscriptions
        self.metadata = metadata
        self.offset_fetcher = offset_fetcher
        self.commit_request_manager = commit_request_manager
        # The OffsetFetch in flight and the partitions it asks for (no duplicates per poll).
        self._pending_committed: Optional[tuple[frozenset, Future]] = None

    def poll(self, now_ms: int) -> PollResult:
        return PollResult.EMPTY  # type: ignore[attr-defined]

    def maximum_time_to_wait(self, now_ms: int) -> int:
        return MAX_WAIT_MS

    def update_fetch_positions(self, deadline_ms: int) -> Future:
        """Complete with True when every assigned partition has a position."""
        result: Future = Future()
        try:
            self.offset_fetcher.validate_positions_if_needed()
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
                self.offset_fetcher.reset_positions_if_needed()
                result.set_result(self.subscriptions.has_all_fetch_positions())
            except BaseException as exc:  # surfaced from poll() on the application thread
                result.set_exception(exc)

        when_complete(committed, _after_committed)
        return result

    def _fetch_committed(self, partitions: frozenset, deadline_ms: int) -> Future:
        if self.commit_request_manager is None or not partitions:
            return completed_future({})
        pending = self._pending_committed
        if pending is not None and not pending[1].done() and pending[0] == partitions:
            return pending[1]
        # Its own deadline: a poll(0) must not make the OffsetFetch expire at once; the
        # request is shared by the polls that follow until it completes.
        deadline_ms = max(deadline_ms, self._time_ms() + self.default_api_timeout_ms)
        future = self.commit_request_manager.fetch_offsets(set(partitions), deadline_ms)
        self._pending_committed = (partitions, future)
        return future
