"""The classic engine's offset lookups over a NetworkClient (Java's OffsetFetcher).

Owns the I/O half of ListOffsets and OffsetForLeaderEpoch for the thread that drives the
NetworkClient: blocking ``offsets_for_times`` / ``beginning_offsets`` / ``end_offsets``
(send per leader, poll until done or the timeout, retry with backoff and metadata
refreshes), and the asynchronous position maintenance the poll loop calls each round:
``validate_positions_if_needed`` and ``reset_positions_if_needed`` (fire requests, apply
answers in callbacks, surface a fatal error on the next call), and
``update_fetch_positions`` tying them together with committed offsets. The decisions are
the sans-IO modules' (offset_fetcher_utils, leader_epoch_validation); this module only
sends, waits and routes.

Threads: the sending methods and the response callbacks hold one RLock (callbacks may run on
the classic heartbeat thread when it polls the shared client; Java synchronizes them).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Protocol

from kproto import errors
from kproto.consumer.classic.metadata_wait import await_metadata_update
from kproto.consumer.offsets import leader_epoch_validation as lev
from kproto.consumer.offsets import offset_fetcher_utils as utils
from kproto.consumer.offsets.committed_offsets import refresh_committed_offsets
from kproto.consumer.subscription_state import FetchPosition
from kproto.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kproto.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kproto.structs import IsolationLevel, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

if TYPE_CHECKING:
    from kproto.consumer.subscription_state import SubscriptionState
    from kproto.net.future import Future
    from kproto.net.metadata import ClusterMetadata


class BlockingClient(Protocol):
    """What the OffsetFetcher uses of a ``NetworkClient`` (the classic engine hands it a view
    whose blocking waits raise ``WakeupException`` after ``wakeup()``)."""

    @property
    def cluster(self) -> ClusterMetadata: ...
    def ready(self, node_id: int) -> bool: ...
    def send(self, node_id: int, request: Any, *, version: Optional[int] = None) -> Future: ...
    def poll(self, timeout_ms: Optional[float] = None, future: Optional[Future] = None) -> object: ...
    def connection_delay(self, node_id: int) -> float: ...
    def broker_api_versions(self, node_id: int) -> dict[int, tuple[int, int]]: ...
    def request_metadata_update(self, reset_equivalent: bool = True) -> Future: ...


def _synchronized(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``method`` under the fetcher's lock (Java's ``synchronized``)."""
    @functools.wraps(method)
    def locked(self: "OffsetFetcher", *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)
    return locked


log = logging.getLogger("kproto.consumer.offsets")


class OffsetFetcher:
    """ListOffsets and OffsetForLeaderEpoch for one consumer, driven from its polling thread.

    ``client`` is a NetworkClient or a view of one (``BlockingClient``), ``metadata`` its ClusterMetadata,
    ``subscriptions`` the SubscriptionState. ``clock`` returns monotonic milliseconds.
    """

    def __init__(self, client: BlockingClient, subscriptions: SubscriptionState,
                 metadata: Optional[ClusterMetadata] = None, *,
                 isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, clock: Optional[Callable[[], float]] = None) -> None:
        self._client = client
        self._subscriptions = subscriptions
        self._metadata = metadata if metadata is not None else client.cluster
        self._isolation_level = isolation_level
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._clock = clock or (lambda: time.monotonic() * 1000.0)
        # A fatal error from an asynchronous reset/validation, raised on the next call
        # (Java's cachedResetPositionsException / cachedOffsetForLeaderException).
        self._cached_reset_error: Optional[BaseException] = None
        self._cached_validation_error: Optional[BaseException] = None
        # The classic heartbeat thread sometimes polls the shared client, so the response
        # callbacks may run on it while the application thread sends the next round.
        self._lock = threading.RLock()

    # --- blocking lookups -----------------------------------------------------------

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                          timeout_ms: float) -> dict[TopicPartition, Optional[OffsetAndTimestamp]]:
        """The earliest offset whose timestamp is >= each given one (None if there is none)."""
        utils.validate_timestamps(timestamps)
        fetched = self._fetch_offsets_by_times(timestamps, timeout_ms, require_timestamp=True)
        return utils.to_offsets_for_times(timestamps, fetched)

    def beginning_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: float) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return self._offsets_at(partitions, utils.EARLIEST_TIMESTAMP, timeout_ms)

    def end_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: float) -> dict[TopicPartition, int]:
        """The end offset of each partition (the LSO under read_committed, else the high watermark)."""
        return self._offsets_at(partitions, utils.LATEST_TIMESTAMP, timeout_ms)

    def _offsets_at(self, partitions: Iterable[TopicPartition], timestamp: int,
                    timeout_ms: float) -> dict[TopicPartition, int]:
        wanted = list(partitions)
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise errors.IllegalArgumentError("expected TopicPartition, got {!r}".format(tp))
        fetched = self._fetch_offsets_by_times({tp: timestamp for tp in wanted}, timeout_ms, require_timestamp=False)
        return utils.to_offsets(wanted, fetched)

    def _fetch_offsets_by_times(self, timestamps: Mapping[TopicPartition, int], timeout_ms: float,
                                require_timestamp: bool) -> dict[TopicPartition, utils.ListOffsetData]:
        """Ask the leaders until every partition is answered (or has no offset) or time is up."""
        if timeout_ms is None or timeout_ms < 0:
            raise errors.IllegalArgumentError("timeout_ms must be >= 0, not {!r}".format(timeout_ms))
        deadline = self._clock() + timeout_ms
        remaining = dict(timestamps)
        fetched: dict[TopicPartition, utils.ListOffsetData] = {}
        while remaining:
            utils.ensure_topics(self._metadata, remaining)
            pending, unsent, no_leader = self._send_list_offsets(remaining, require_timestamp)
            need_metadata = bool(no_leader)
            last_error: Optional[BaseException] = None
            for future, version, requested in pending:
                self._poll_until(future, deadline)
                if not future.is_done:
                    break
                if future.failed():
                    if not future.retriable():
                        raise future.exception
                    last_error = future.exception
                    need_metadata = need_metadata or getattr(future.exception, "invalid_metadata", False)
                    continue
                result = utils.handle_list_offsets_response(future.value, version, requested)
                fetched.update(result.fetched_offsets)
                for tp in list(result.fetched_offsets) + list(result.no_offset):
                    remaining.pop(tp, None)
                need_metadata = need_metadata or result.metadata_update_needed
            if not remaining:
                break
            if self._clock() >= deadline:
                raise errors.KafkaTimeoutError("failed to get offsets by times in {} ms{}".format(
                    timeout_ms, "" if last_error is None else " (last error: {})".format(last_error)))
            log.debug("ListOffsets: %d partitions left (%d waiting for a connection)", len(remaining), len(unsent))
            if unsent and last_error is None and not need_metadata and all(
                    self._client.connection_delay(node) == float("inf") for node in self._nodes_of(unsent)):
                # Only leaders still connecting: one network step (the connection's next
                # event), then send at once instead of waiting out the backoff.
                self._client.poll(timeout_ms=min(deadline - self._clock(), self._retry_backoff_ms))
            else:
                self._backoff(deadline, need_metadata)
        return fetched

    def _send_list_offsets(self, timestamps: Mapping[TopicPartition, int], require_timestamp: bool):
        """Send one ListOffsets per ready leader; returns (pending, not sent yet, leaderless)."""
        by_node, no_leader = utils.group_list_offsets_requests(timestamps, self._metadata)
        pending: list[Any] = []
        unsent: set[TopicPartition] = set()
        for node_id, partitions in by_node.items():
            version = self._version_for(node_id, ListOffsetsRequest,
                                        utils.list_offsets_min_version(self._isolation_level, require_timestamp))
            if version is None:
                unsent.update(partitions)
                continue
            request = utils.build_list_offsets_request(partitions, self._isolation_level, version,
                                                       self._request_timeout_ms)
            pending.append((self._client.send(node_id, request, version=version), version, set(partitions)))
        return pending, unsent, no_leader

    # --- asynchronous position maintenance (the poll loop) ------------------------------

    def update_fetch_positions(self, timeout_ms: float,
                               fetch_committed: Optional[Callable[[set[TopicPartition], float],
                                                                  Optional[Mapping[TopicPartition, Optional[OffsetAndMetadata]]]]] = None
                               ) -> bool:
        """Find a position for every assigned partition (Java's updateFetchPositions).

        Validate positions after leader changes; if some partitions still have no position,
        seed them from committed offsets (``fetch_committed(partitions, timeout_ms)``, the
        coordinator's OffsetFetch, None if it did not finish), move the rest to AWAIT_RESET
        per ``auto_offset_reset`` (``NoOffsetForPartitionError`` under ``none``) and start
        the ListOffsets resets. Returns True when every partition has a position.
        """
        self.validate_positions_if_needed()
        if self._subscriptions.has_all_fetch_positions():
            return True
        initializing = self._subscriptions.initializing_partitions()
        if fetch_committed is not None and initializing:
            offsets = fetch_committed(initializing, timeout_ms)
            if offsets is None:
                return False
            refresh_committed_offsets(self._subscriptions, self._metadata, offsets)
        self._subscriptions.reset_initializing_positions()
        self.reset_positions_if_needed()
        return self._subscriptions.has_all_fetch_positions()

    @_synchronized
    def reset_positions_if_needed(self) -> None:
        """Send ListOffsets for partitions awaiting a reset; answers seek in callbacks."""
        error, self._cached_reset_error = self._cached_reset_error, None
        if error is not None:
            raise error
        now = int(self._clock())
        timestamps = utils.partitions_to_reset(self._subscriptions, now)
        if not timestamps:
            return
        by_node, no_leader = utils.group_list_offsets_requests(timestamps, self._metadata)
        if no_leader:
            utils.retry_after_metadata_update(self._subscriptions, self._metadata, no_leader, now,
                                              self._retry_backoff_ms, self._client.request_metadata_update)
        for node_id, partitions in by_node.items():
            requested = {tp: ts for tp, (ts, _epoch) in partitions.items()}
            try:
                version = self._version_for(node_id, ListOffsetsRequest,
                                            utils.list_offsets_min_version(self._isolation_level, False))
            except errors.KafkaError as exc:
                self._on_reset_failure(requested, exc)
                continue
            if version is None:
                self._retry_when_connected(requested, node_id, now)
                continue
            request = utils.build_list_offsets_request(partitions, self._isolation_level, version,
                                                       self._request_timeout_ms)
            # No second request for these until this one is answered or times out.
            self._subscriptions.set_next_allowed_retry(requested, now + self._request_timeout_ms)
            future = self._client.send(node_id, request, version=version)
            future.add_callback(self._on_reset_response, version, requested)
            future.add_errback(self._on_reset_failure, requested)

    @_synchronized
    def _on_reset_response(self, version: int, requested: dict[TopicPartition, int],
                           response: ListOffsetsResponse) -> None:
        try:
            result = utils.handle_list_offsets_response(response, version, requested)
        except errors.KafkaError as exc:
            self._on_reset_failure(requested, exc)
            return
        utils.apply_reset_result(self._subscriptions, self._metadata, requested, result,
                                 int(self._clock()), self._retry_backoff_ms)
        if result.metadata_update_needed:
            self._client.request_metadata_update(reset_equivalent=False)

    @_synchronized
    def _on_reset_failure(self, requested: dict[TopicPartition, int], exc: BaseException) -> None:
        self._cached_reset_error = utils.position_request_failed(
            self._subscriptions, requested, exc, int(self._clock()) + self._retry_backoff_ms,
            functools.partial(self._client.request_metadata_update, reset_equivalent=False),
            self._cached_reset_error)

    @_synchronized
    def validate_positions_if_needed(self) -> None:
        """Check positions against their leader's epoch history after leader changes."""
        error, self._cached_validation_error = self._cached_validation_error, None
        if error is not None:
            raise error
        subs = self._subscriptions
        now = int(self._clock())
        positions = lev.positions_to_validate(subs, self._metadata, now)
        for tp, pos in positions.items():
            if not lev.needs_request(pos):
                subs.complete_validation(tp)  # no epoch to check against: trust it
        for node_id, node_positions in lev.group_validation_requests(positions).items():
            if not self._client.ready(node_id):
                self._retry_when_connected(node_positions, node_id, now)
                continue
            broker = self._client.broker_api_versions(node_id).get(OffsetForLeaderEpochRequest.api_key)
            if broker is None or broker[1] < lev.MIN_CONSUMER_VERSION:
                # Brokers before 2.3 (and servers without the API, like Tansu) cannot
                # validate: trust the position, as Java does.
                log.debug("Node %s cannot validate positions; trusting %s", node_id,
                          utils.format_partitions(node_positions))
                for tp in node_positions:
                    subs.complete_validation(tp)
                continue
            version = utils.choose_version(OffsetForLeaderEpochRequest, broker, lev.MIN_CONSUMER_VERSION)
            request = lev.build_offset_for_leader_epoch_request(node_positions, version)
            subs.set_next_allowed_retry(node_positions, now + self._request_timeout_ms)
            future = self._client.send(node_id, request, version=version)
            future.add_callback(self._on_validation_response, node_positions)
            future.add_errback(self._on_validation_failure, node_positions)

    @_synchronized
    def _on_validation_response(self, requested: dict[TopicPartition, FetchPosition],
                                response: OffsetForLeaderEpochResponse) -> None:
        try:
            self._cached_validation_error = lev.on_validation_response(
                self._subscriptions, response, requested, int(self._clock()), self._retry_backoff_ms,
                functools.partial(self._client.request_metadata_update, reset_equivalent=False),
                self._cached_validation_error)
        except errors.KafkaError as exc:
            self._on_validation_failure(requested, exc)

    @_synchronized
    def _on_validation_failure(self, requested: dict[TopicPartition, Any], exc: BaseException) -> None:
        self._cached_validation_error = utils.position_request_failed(
            self._subscriptions, requested, exc, int(self._clock()) + self._retry_backoff_ms,
            functools.partial(self._client.request_metadata_update, reset_equivalent=False),
            self._cached_validation_error)

    # --- helpers -----------------------------------------------------------------------

    def _nodes_of(self, partitions: Iterable[TopicPartition]) -> set[Any]:
        return {self._metadata.leader_for_partition(tp) for tp in partitions}

    def _retry_when_connected(self, partitions: Iterable[TopicPartition], node_id: Any, now: int) -> None:
        """The node is not ready. While it connects, the request waits for no backoff:
        the poll loop wakes on each step of the connection and tries again as soon as it is
        ready (Java's ConsumerNetworkClient queues it). A node in reconnect backoff gets the
        retry backoff."""
        if self._client.connection_delay(node_id) == float("inf"):
            return  # connecting (ready() started it): the next round sends
        self._subscriptions.request_failed(partitions, now + self._retry_backoff_ms)

    def _version_for(self, node_id: Any, request_cls: Any, min_version: int) -> Optional[int]:
        """The version to send to ``node_id``; None while it is still connecting.

        Raises ``UnsupportedVersionError`` when the broker lacks the API or is too old.
        """
        if not self._client.ready(node_id):
            return None
        broker = self._client.broker_api_versions(node_id).get(request_cls.api_key)
        if broker is None:
            raise errors.UnsupportedVersionError("node {} does not support {}".format(node_id, request_cls.__name__))
        return utils.choose_version(request_cls, broker, min_version)

    def _poll_until(self, future: Any, deadline: float) -> None:
        while not future.is_done:
            left = deadline - self._clock()
            if left <= 0:
                return
            self._client.poll(timeout_ms=left, future=future)

    def _backoff(self, deadline: float, need_metadata: bool) -> None:
        """Wait for a metadata refresh when leaders are unknown or moved (the metadata
        spaces its refreshes by the retry backoff), else wait out the retry backoff; as
        Java's fetchOffsetsByTimes: one or the other."""
        if need_metadata:
            # A refresh failing at once (NoBrokersAvailable) is asked again after the backoff.
            await_metadata_update(self._client, deadline, self._clock, self._retry_backoff_ms)
            return
        wait_until = min(deadline, self._clock() + self._retry_backoff_ms)
        while self._clock() < wait_until:
            self._client.poll(timeout_ms=wait_until - self._clock())

