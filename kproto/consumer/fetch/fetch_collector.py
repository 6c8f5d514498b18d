"""FetchCollector: turns buffered CompletedFetches into the records one poll() returns.

Java's ``FetchCollector``. It owns the rules that make positions trustworthy:

* at most ``max_poll_records`` records per collection, across partitions;
* a fetch is used only if its fetch offset equals the partition's current position
  (otherwise it is stale: a seek, reset or reassignment happened after it was sent);
* a position advances only after records were taken for the caller, to the offset after
  the last one (or past skipped control/aborted batches); an empty result leaves every
  position unchanged; ``update_positions=False`` (kafka-python's ``poll(update_offsets=
  False)``) leaves them all unchanged: the caller moves them (``seek``), and a fetch whose
  next offset then equals the position goes on from the buffer, else it is dropped as stale;
* data of a partition no longer assigned or fetchable is dropped; a paused partition's
  data stays buffered for a later poll; a fetch (data or partition error) for a partition
  without a valid position (unassigned, reset or awaiting validation since it was sent)
  is ignored, as Java's ``initialize``;
* answers without records, error or read replica (most partitions of a Fetch across many
  partitions) are taken a run at a time (``_collect_empty``), with each one's outcome what
  ``initialize`` and ``_fetch_records`` would give it;
* per-partition errors: OFFSET_OUT_OF_RANGE resets per ``auto_offset_reset`` (or raises
  with 'none'); leadership and unknown-topic errors ask for a metadata refresh; a first
  batch larger than the fetch size raises ``RecordTooLargeError`` telling the user to
  raise ``max_partition_fetch_bytes``; authorization and corruption errors raise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Optional

from kproto import errors
from kproto.consumer.fetch.completed_fetch import CompletedFetch
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.subscription_state import (EMPTY_FETCH_FETCHED, EMPTY_FETCH_PAUSED, EMPTY_FETCH_STALE,
                                                FetchPosition, SubscriptionState)
from kproto.errors import ErrorCode
from kproto.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

log = logging.getLogger("kproto.consumer.fetch")
_new_tuple = tuple.__new__

# Partition errors after which the collector refreshes metadata (and retries) instead of raising.
_REFRESH_METADATA = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID,
})


class Fetch:
    """What one collection produced: records per partition and the next offsets."""

    __slots__ = ("records", "position_advanced", "num_records", "next_offsets")

    def __init__(self) -> None:
        self.records: dict[TopicPartition, list[ConsumerRecord]] = {}
        self.position_advanced = False
        self.num_records = 0
        self.next_offsets: dict[TopicPartition, OffsetAndMetadata] = {}

    def add(self, tp: TopicPartition, records: list[ConsumerRecord], position_advanced: bool,
            next_offset: OffsetAndMetadata) -> None:
        if records:
            # The collector hands over lists it made for this Fetch: the first is kept as is.
            taken = self.records.get(tp)
            if taken is None:
                self.records[tp] = records
            else:
                taken.extend(records)
            self.num_records += len(records)
        self.position_advanced = self.position_advanced or position_advanced
        self.next_offsets[tp] = next_offset

    def is_empty(self) -> bool:
        return self.num_records == 0 and not self.position_advanced


class FetchCollector:
    """Collects records from a FetchBuffer under SubscriptionState's positions."""

    def __init__(self, subscriptions: SubscriptionState, fetch_config: FetchConfig,
                 request_metadata_update: Optional[Callable[[], object]] = None,
                 time_ms: Optional[Callable[[], float]] = None, metrics_manager: Any = None) -> None:
        self._subscriptions = subscriptions
        self._max_poll_records = fetch_config.max_poll_records
        self._max_partition_fetch_bytes = fetch_config.fetch_size
        self._request_metadata_update = request_metadata_update or (lambda: None)
        self._metadata_max_age_ms = fetch_config.metadata_max_age_ms
        self._time_ms = time_ms or (lambda: 0)
        #: A FetchMetricsManager (None: metrics disabled): lag and lead per collected batch.
        self.metrics_manager = metrics_manager
        self._collected: list[TopicPartition] = []

    def collect_fetch(self, fetch_buffer: FetchBuffer, max_records: Optional[int] = None,
                      update_positions: bool = True) -> Fetch:
        """Take up to ``max_records`` (default ``max_poll_records``) records from the buffer;
        with ``update_positions=False`` no position moves (see the module docstring)."""
        fetch = Fetch()
        paused: list[CompletedFetch] = []
        remaining = self._max_poll_records if max_records is None else max_records
        # The partitions whose lag and lead to record, once, when the collection ends.
        self._collected = []
        is_paused = self._subscriptions.is_paused
        try:
            # The collecting thread owns the next-in-line fetch (the fetching thread only
            # adds): read once, then kept here in step with every change made to it.
            next_in_line = fetch_buffer.next_in_line_fetch
            while True:
                if fetch_buffer.has_empty_answers():
                    # Most partitions of a Fetch across many partitions: no records, no
                    # error. All of them at once, before any data, so their partitions can
                    # be fetched again while the data is read.
                    self._collect_empty(fetch_buffer, fetch, paused)
                if remaining <= 0:
                    break
                if next_in_line is None or next_in_line.is_consumed:
                    completed = fetch_buffer.peek()
                    if completed is None:
                        break
                    if not completed.initialized:
                        try:
                            next_in_line = self.initialize(completed)
                        except Exception:
                            # Drop a fetch that failed with no data so it cannot fail every
                            # poll; keep it if records were already collected this round.
                            if fetch.is_empty() and completed.records_size == 0:
                                fetch_buffer.poll()
                            raise
                    else:
                        next_in_line = completed
                    fetch_buffer.poll_to_next_in_line(next_in_line)
                elif is_paused(next_in_line.partition):
                    log.debug("skipping fetched data of paused partition %s; keeping it for later", next_in_line.partition)
                    paused.append(next_in_line)
                    next_in_line = None
                    fetch_buffer.set_next_in_line_fetch(None)
                else:
                    remaining -= self._fetch_records(next_in_line, remaining, fetch, update_positions)
                    if not update_positions and not next_in_line.is_consumed:
                        # The rest waits (as paused data does) for a later poll, where it
                        # goes on if the caller moved the position to its next offset.
                        paused.append(next_in_line)
                        next_in_line = None
                        fetch_buffer.set_next_in_line_fetch(None)
        except errors.KafkaError:
            if fetch.is_empty():
                raise
        finally:
            fetch_buffer.add_all(paused, notify=False)
            if self._collected and self.metrics_manager is not None:
                self.metrics_manager.record_partitions_lag_and_lead(self._collected)
        return fetch

    def _fetch_records(self, completed: CompletedFetch, max_records: int, fetch: Fetch,
                       update_positions: bool = True) -> int:
        tp = completed.partition
        subs = self._subscriptions
        # Read once: the KIP-848 background thread may change the assignment meanwhile.
        position = subs.fetchable_position(tp)
        if position is None:
            log.debug("not returning fetched records for %s: no longer assigned or fetchable", tp)
        else:
            if completed.next_fetch_offset == position.offset:
                records = completed.fetch_records(max_records)
                advanced = False
                if update_positions and completed.next_fetch_offset > position.offset:
                    # Round-robin when records were returned: the next fetch puts other
                    # partitions first (records always advance the position).
                    # (NamedTuples built through tuple.__new__: their own __new__ is a
                    # Python call, paid per partition with records.)
                    subs.update_position(tp, _new_tuple(FetchPosition, (completed.next_fetch_offset,
                                                                        completed.last_epoch,
                                                                        position.current_leader)),
                                         move_to_end=bool(records))
                    advanced = True
                epoch = -1 if completed.last_epoch is None else completed.last_epoch
                next_offset = _new_tuple(OffsetAndMetadata, (completed.next_fetch_offset, "", epoch))
                fetch.add(tp, records, advanced, next_offset)
                self._collected.append(tp)
                return len(records)
            log.debug("ignoring fetched records for %s at offset %d: the position is %s", tp,
                      completed.next_fetch_offset, position)
        completed.drain()
        return 0

    def _collect_empty(self, fetch_buffer: FetchBuffer, fetch: Fetch, paused: list[CompletedFetch]) -> None:
        """``initialize`` then ``_fetch_records`` of the fresh answers without records, error
        or read replica the buffer holds (``peek_empty_answers``), with the same
        outcome for each, in order, in one call into SubscriptionState
        (``apply_empty_fetches``): its offsets are taken only if the position still is its
        fetch offset; then a paused partition's answer is kept for later, an unfetchable
        one's dropped, and a fetchable one's next offset (no records, so no epoch) and lag
        and lead are recorded as for any partition whose records were taken (none here).
        They leave the buffer only then, so until then their partitions count as buffered,
        as a fetch being read does. None takes from the records budget."""
        answers = fetch_buffer.peek_empty_answers()
        outcomes = self._subscriptions.apply_empty_fetches(answers)
        next_offsets = fetch.next_offsets
        collected = self._collected
        done = []
        for completed, outcome in zip(answers, outcomes):
            tp = completed.partition
            if outcome == EMPTY_FETCH_FETCHED:
                # Fetch.add with no records and no position moved leaves only this.
                next_offsets[tp] = _new_tuple(OffsetAndMetadata, (completed.next_fetch_offset, "", -1))
                collected.append(tp)
                done.append(completed)
            elif outcome == EMPTY_FETCH_PAUSED:
                completed.set_initialized()
                log.debug("skipping fetched data of paused partition %s; keeping it for later", tp)
                paused.append(completed)
            else:
                if outcome == EMPTY_FETCH_STALE:
                    log.debug("ignoring fetched data for %s at offset %d: no valid position there any more", tp,
                              completed.next_fetch_offset)
                else:
                    log.debug("not returning fetched records for %s: no longer fetchable", tp)
                done.append(completed)
        CompletedFetch.drain_all(done)
        fetch_buffer.drop_empty_answers(answers)

    # --- initialization -------------------------------------------------------------------

    def initialize(self, completed: CompletedFetch) -> Optional[CompletedFetch]:
        """Check a fresh fetch against the current position and apply its partition error.

        Returns the fetch to read from, or None (it is stale or carried an error).
        """
        tp = completed.partition
        try:
            position = self._subscriptions.valid_position_or_none(tp)
            if position is None:
                # As Java: unassigned, reset or awaiting validation since the fetch was
                # sent, so neither its data nor its error applies any more.
                log.debug("ignoring fetched data for %s: it no longer has a valid position", tp)
                completed.drain()
                return None
            if completed.error_code == ErrorCode.NONE:
                return self._initialize_success(completed, position)
            self._handle_error(completed)
            return None
        finally:
            if completed.error_code != ErrorCode.NONE:
                completed.drain()
                # As Java: a partition that failed goes to the back of the fetch order, so
                # partitions of one topic tend to stay together in the next request.
                self._subscriptions.move_partition_to_end(tp)

    def _initialize_success(self, completed: CompletedFetch, position: FetchPosition) -> Optional[CompletedFetch]:
        tp = completed.partition
        subs = self._subscriptions
        fetch_offset = completed.next_fetch_offset
        if position.offset != fetch_offset:
            log.debug("discarding stale fetch response for %s at offset %d (position %s)", tp, fetch_offset, position)
            completed.drain()
            return None
        if completed.records:
            try:
                has_batches = completed.has_batches()
            except errors.RecordTooLargeError as exc:
                raise errors.RecordTooLargeError(
                    "There are some messages at [Partition=Offset]: {{{}-{}={}}} whose size ({} bytes) is larger than "
                    "the fetch size {} and hence cannot be returned. Increase the fetch size on the client (using "
                    "max_partition_fetch_bytes)".format(tp.topic, tp.partition, fetch_offset,
                                                        getattr(exc, "batch_size", "?"),
                                                        self._max_partition_fetch_bytes)) from exc
            if not has_batches:
                raise errors.KafkaError("Failed to make progress reading messages at {}-{}={}. Received a non-empty "
                                        "fetch response from the server, but no complete records were found."
                                        .format(tp.topic, tp.partition, fetch_offset))
        subs.update_fetched_offsets(tp, completed.high_watermark, completed.log_start_offset,
                                    completed.last_stable_offset)
        if completed.preferred_read_replica >= 0:
            expiry = self._time_ms() + self._metadata_max_age_ms
            subs.update_preferred_read_replica(tp, completed.preferred_read_replica, expiry)
        completed.set_initialized()
        return completed

    def _handle_error(self, completed: CompletedFetch) -> None:
        tp = completed.partition
        code = completed.error_code
        subs = self._subscriptions
        if code in _REFRESH_METADATA:
            log.debug("error %s fetching %s; refreshing metadata", errors.for_code(code).__name__, tp)
            self._request_metadata_update()
            subs.clear_preferred_read_replica(tp)
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if subs.clear_preferred_read_replica(tp) is not None:
                log.debug("offset out of range on the read replica for %s; back to the leader", tp)
                return
            position = subs.position_or_none(tp)
            if position is None or position.offset != completed.next_fetch_offset:
                log.debug("discarding stale out-of-range response for %s", tp)
                return
            message = "Fetch position {} is out of range for partition {}-{}".format(position, tp.topic, tp.partition)
            if subs.has_default_offset_reset_policy():
                log.info("%s, resetting offset", message)
                subs.request_offset_reset_if_partition_assigned(tp)
            else:
                exc = errors.OffsetOutOfRangeError(message)
                exc.offset_out_of_range_partitions = {tp: completed.next_fetch_offset}  # type: ignore[attr-defined]
                raise exc
        elif code == ErrorCode.UNKNOWN_LEADER_EPOCH:
            log.debug("received unknown leader epoch fetching %s; retrying", tp)
        elif code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.warning("unknown server error fetching %s; retrying", tp)
        elif code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            raise errors.TopicAuthorizationFailedError("Not authorized to read from topic {}".format(tp.topic))
        elif code == ErrorCode.CORRUPT_MESSAGE:
            raise errors.CorruptRecordException("Encountered corrupt message when fetching offset {} for "
                                                "topic-partition {}-{}".format(completed.next_fetch_offset, *tp))
        else:
            raise errors.IllegalStateError("Unexpected error code {} ({}) while fetching from partition {}-{}".format(
                code, errors.for_code(code).__name__, *tp))
