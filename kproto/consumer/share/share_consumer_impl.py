"""The share consumer's application side (Java's ``ShareConsumerImpl``).

Owns what the application thread does: it never touches the network. It keeps the records
handed out by ``poll`` and not yet acknowledged (``_delivered``: each with the node and
session generation that delivered it) and the acknowledgements made since the last call
(``_acks``), and hands those to the background thread inside the next event:

- ``poll`` first settles the previous batch: in implicit mode every record still
  unacknowledged is accepted; in explicit mode one left unacknowledged is an
  ``IllegalStateError`` (Java's), and nothing is sent. It then sends a ``ShareFetchEvent``
  (acknowledgements + "fetch more") and returns up to ``max_poll_records`` records from
  the ``ShareFetchBuffer``, waiting for data until its timeout;
- ``acknowledge`` is only legal in explicit mode, once per delivered record; anything else
  is an ``IllegalStateError`` and nothing is sent;
- a record that failed to deserialize reaches the application as the
  ``RecordDeserializationError`` a ``poll`` raises, and is ``RELEASE``d with the next
  acknowledgements; the acquired records of a corrupt batch, as a ``CorruptRecordError``
  listing them (``offsets``), are ``REJECT``ed; either unless, in explicit mode, the
  application acknowledges it by offset first (``acknowledge_offset``: Java's
  ``acknowledge(topic, partition, offset, type)`` over ``ShareInFlightBatchException.offsets()``);
  once those acknowledgements were taken (``poll``, ``commit``, ``close``) the offset can no
  longer be acknowledged. An error met after records of other partitions were collected is
  raised by the next ``poll``;
- RENEW (Java's renewing records): the record stays delivered; the renewal goes out in
  ShareAcknowledge with the next ``poll``/``commit``/``commit_async``, and the next ``poll``
  fetches nothing new but hands the renewed records out again once the broker answered
  (one whose renewal failed is dropped: the broker released it); they then need an
  acknowledgement like any delivered record;
- ``commit``/``commit_async`` send the acknowledgements at once in ShareAcknowledge;
  ``commit`` waits and returns ``{TopicIdPartition: None or the error}``;
- completed acknowledgements reach the acknowledgement commit callback here, on the
  application thread, from ``poll``, ``commit`` and ``close``;
- ``close`` sends the last acknowledgements with each share session's closing request
  (the broker releases everything acquired and not acknowledged), leaves the group and
  stops the background thread.

An acquired record is handed to the application at most once per acquisition: a fetch
leaves the buffer as it is consumed, and a fetch whose session ended is dropped by the
background thread before the application takes from it.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Callable, Mapping, Optional

from kproto.clock import monotonic_ms
from kproto.consumer.background.background_engine import BackgroundEngine
from kproto.consumer.background.consumer_network_thread import ConsumerNetworkThread, Resources
from kproto.consumer.background.events import BackgroundEventHandler, ErrorEvent, drain
from kproto.consumer.engine_config import EngineConfig
from kproto.consumer.engine_setup import engine_metrics
from kproto.consumer.share import events as ev
from kproto.consumer.share.acknowledgements import Acknowledgements, AcknowledgeType, acknowledge_type
from kproto.consumer.share.share_consumer_config import ShareConsumerConfig
from kproto.consumer.share.share_fetch_buffer import ShareFetchBuffer
from kproto.consumer.share.share_request_managers import build_share_resources
from kproto.errors import (CorruptRecordError, IllegalStateError, KafkaError, KafkaTimeoutError,
                           RecordDeserializationError)
from kproto.consumer.share.share_fetch_metrics_manager import ShareFetchMetricsManager
from kproto.metrics.consumer_metrics import KafkaConsumerMetrics, metrics_view, timed_poll
from kproto.structs import ShareConsumerRecord, TopicIdPartition, TopicPartition

log = logging.getLogger("kproto.share")

AckKey = tuple[int, int, TopicIdPartition]  # (node_id, generation, TopicIdPartition)
# How long one wait for data may block before poll() asks for a fetch again (a ShareFetch
# that came back empty wakes the wait; this bounds a lost wakeup).
MAX_WAIT_STEP_MS = 1000


class ShareConsumerImpl(BackgroundEngine[ShareFetchBuffer]):
    _log = log

    def __init__(self, config: Mapping[str, Any], share_config: ShareConsumerConfig,
                 time_ms: Callable[[], int] = monotonic_ms,
                 network_thread_class: type[ConsumerNetworkThread] = ConsumerNetworkThread) -> None:
        """``network_thread_class``: the event-loop shell (``kproto.aio``) passes one whose
        ``start()`` builds the resources inline and starts no thread."""
        self.settings = settings = EngineConfig.from_config(config)
        self._time_ms = time_ms
        assert settings.group_id, "share_consumer_config requires a group_id"
        self.group_id: str = settings.group_id
        self.explicit = share_config.share_acknowledgement_mode == "explicit"
        self.max_poll_records: int = settings.max_poll_records
        self.default_api_timeout_ms: int = settings.default_api_timeout_ms
        self.fetch_buffer = ShareFetchBuffer()
        self._metrics = engine_metrics(settings)
        self.fetch_metrics = self.consumer_metrics = None
        if self._metrics is not None:
            prefix = settings.metric_group_prefix
            self.fetch_metrics = ShareFetchMetricsManager(self._metrics, prefix)
            # Java's KafkaShareConsumerMetrics: the poll timing under consumer-share-metrics.
            self.consumer_metrics = KafkaConsumerMetrics(self._metrics, prefix + "-share")
        self._share_config = share_config
        self._network_thread_class = network_thread_class
        # (topic, partition, offset) -> (ack key, delivery_count) of records handed out and
        # not yet acknowledged.
        self._delivered: dict[tuple[str, int, int], tuple[AckKey, int]] = {}
        # Implicit mode needs no look-ups: what the last poll returned, per partition.
        self._implicit_batch: list[tuple[AckKey, list[int]]] = []
        self._acks: dict[AckKey, Acknowledgements] = {}
        # Records whose delivery failed (a RecordDeserializationError was raised for them, or a
        # CorruptRecordError listed them) and whose default acknowledgement (RELEASE, REJECT)
        # is still in _acks: (topic, partition, offset) -> ack key.
        self._failed: dict[tuple[str, int, int], AckKey] = {}
        # An error met while collecting after records were taken: the next poll raises it.
        self._deferred_error: Optional[tuple[AckKey, KafkaError]] = None
        # RENEW (Java's ShareInFlightBatch renewing/renewed records): records acknowledged
        # with RENEW and not sent yet, and those sent (each lot with the future of its answer,
        # {TopicIdPartition: error or None}); the next poll hands the renewed ones out again.
        self._renewing: dict[tuple[str, int, int], ShareConsumerRecord] = {}
        self._renewals: list[tuple[Future[Any], dict[tuple[str, int, int], ShareConsumerRecord]]] = []
        self._acquisition_lock_timeout_ms: Optional[int] = None  # of the records the last poll returned
        self._subscription: Optional[set[str]] = None
        self.acknowledgement_commit_callback: Optional[Callable[[dict[Any, Any], Optional[BaseException]], Any]] = None
        self.membership = self._start_network_thread(self._initialize_resources,
                                                     self._network_thread_class).membership_manager

    def _initialize_resources(self) -> Resources:
        handler = BackgroundEventHandler(self.background_event_queue, self.fetch_buffer.wakeup)
        return build_share_resources(self.settings, self._share_config, self.fetch_buffer, handler, self._time_ms,
                                     self._metrics, fetch_metrics=self.fetch_metrics)

    # --- plumbing -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")

    def _wait(self, future: Future[Any], deadline_ms: int, what: str) -> Any:
        """Wait for ``future`` until ``deadline_ms``; ``wakeup()`` fails the wait."""
        with self._wakeup_trigger.blocking_on(future):
            while True:
                remaining = deadline_ms - self._time_ms()
                try:
                    return future.result(timeout=max(0, min(remaining, 100)) / 1000.0)
                except FutureTimeoutError:
                    if remaining <= 0:
                        raise KafkaTimeoutError("{} did not complete in time".format(what)) from None

    def _process_background_events(self) -> None:
        """Run the acknowledgement commit callback; raise the first surfaced error."""
        first_error: Optional[BaseException] = None
        for event in drain(self.background_event_queue):
            if isinstance(event, ErrorEvent):
                first_error = first_error or event.error
            elif isinstance(event, ev.ShareAcknowledgementCommitCallbackEvent):
                first_error = first_error or self._invoke_callback(event.entries)
        if first_error is not None:
            raise first_error

    def _invoke_callback(self, entries: list[Any]) -> Optional[BaseException]:
        callback = self.acknowledgement_commit_callback
        if callback is None:
            return None
        by_error: dict[int, tuple[Optional[BaseException], dict[TopicIdPartition, set[int]]]] = {}
        for entry in entries:
            error = entry.acks.error
            group = by_error.setdefault(id(error), (error, {}))
            group[1].setdefault(entry.tip, set()).update(entry.acks.offsets())
        for error, offsets in by_error.values():
            try:
                callback(offsets, error)
            except Exception as exc:  # Java: the callback's exception is thrown from poll()/commit
                return exc
        return None

    def _take_acks(self) -> list[ev.AckEntry]:
        acks, self._acks = self._acks, {}
        self._failed.clear()  # their acknowledgements go now: no override any more
        return [ev.AckEntry(node, gen, tip, a) for (node, gen, tip), a in acks.items() if a]

    def _add_ack(self, key: AckKey, offset: int, type_: int) -> None:
        acks = self._acks.get(key)
        if acks is None:
            acks = self._acks[key] = Acknowledgements()
        acks.add(offset, type_)

    def _holds_records(self) -> bool:
        return bool(self._delivered or self._implicit_batch)

    def _unacknowledged(self) -> int:
        """Explicit mode: delivered records with no acknowledgement since they were handed out
        (a RENEW counts: the record comes back from a later poll)."""
        renewed = {k for _, lot in self._renewals for k in lot}
        return sum(1 for k in self._delivered if k not in self._renewing and k not in renewed)

    def _send_acks(self, entries: list[ev.AckEntry], *, wait_deadline: Optional[int] = None) -> Optional[Future[Any]]:
        """Send ``entries`` in ShareAcknowledge; with RENEWs among them (or ``wait_deadline``)
        as a sync event whose future gives ``{TopicIdPartition: error or None}``."""
        if not entries:
            return None
        if not self._renewing and wait_deadline is None:
            self.application_event_handler.add(ev.ShareAcknowledgeAsyncEvent(entries))
            return None
        event = ev.ShareAcknowledgeSyncEvent(entries, self._deadline(None) if wait_deadline is None else wait_deadline)
        self.application_event_handler.add(event)
        if self._renewing:
            self._renewals.append((event.future, self._renewing))
            self._renewing = {}
        return event.future

    def _accept_delivered(self) -> None:
        """Implicit mode: everything handed out and not acknowledged is accepted."""
        for (_, _, offset), (key, _) in self._delivered.items():
            self._add_ack(key, offset, AcknowledgeType.ACCEPT)
        self._delivered.clear()
        for key, offsets in self._implicit_batch:
            acks = self._acks.get(key)
            if acks is None:
                acks = self._acks[key] = Acknowledgements()
            acks.add_offsets(offsets, AcknowledgeType.ACCEPT)
        self._implicit_batch.clear()

    # --- subscription ---------------------------------------------------------------------------

    def subscribe(self, topics: list[str]) -> None:
        self._check_open()
        if not topics:
            self.unsubscribe()
            return
        self._subscription = set(topics)
        event = ev.ShareSubscriptionChangeEvent(topics, self._deadline(None))
        self.application_event_handler.add(event)
        self._wait(event.future, event.deadline_ms, "subscribe")

    def subscription(self) -> set[str]:
        return set(self._subscription or ())

    def unsubscribe(self) -> None:
        self._check_open()
        if self._subscription is None:
            return
        deadline = self._deadline(None)
        self._close_sessions_and_leave(deadline)
        self._subscription = None

    def _close_sessions_and_leave(self, deadline: int) -> None:
        if not self.explicit:
            self._accept_delivered()
        self._delivered.clear()  # explicit mode: the closing session releases them
        self._renewing.clear()
        self._renewals.clear()
        self._deferred_error = None  # its record is released with the sessions
        self.fetch_buffer.drain()  # not handed out: released with the sessions
        close = ev.ShareAcknowledgeOnCloseEvent(self._take_acks(), deadline)
        self.application_event_handler.add(close)
        leave = ev.ShareLeaveGroupEvent(deadline)
        try:
            self._wait(close.future, deadline, "closing the share sessions")
        except KafkaError as exc:
            log.warning("Closing the share sessions: %s", exc)
        finally:
            self.application_event_handler.add(leave)
        try:
            self._wait(leave.future, deadline, "leaving the share group")
        except KafkaError as exc:
            log.warning("Leaving the share group: %s", exc)
        self._run_callbacks_quietly()

    # --- poll -----------------------------------------------------------------------------------

    def poll(self, timeout_ms: int) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        return timed_poll(self.consumer_metrics, self._poll, timeout_ms)

    def _poll(self, timeout_ms: int) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        self._check_open()
        if not self._subscription:
            raise IllegalStateError("Consumer is not subscribed to any topics.")
        deadline = self._deadline(timeout_ms)
        self._wakeup_trigger.maybe_trigger_wakeup()
        if self.explicit:
            unacknowledged = self._unacknowledged()
            if unacknowledged:
                raise IllegalStateError(
                    "All records must be acknowledged before the next poll in explicit acknowledgement mode: "
                    "{} delivered record(s) were not".format(unacknowledged))
            if self._renewing or self._renewals:
                return self._poll_renewed(deadline)
        elif self._holds_records():
            self._accept_delivered()
        self._process_background_events()
        settles = self.fetch_buffer.next_round()
        self.application_event_handler.add(ev.ShareFetchEvent(self._take_acks(), settles=settles))
        while True:
            records = self._collect()
            if records:
                if self.fetch_metrics is not None:
                    self.fetch_metrics.record_records(sum(len(batch) for batch in records.values()))
                # No prefetch: the next ShareFetch goes out with this batch's acknowledgements
                # on the next poll, so no fetch is ever in flight while the application holds
                # records of that node (a broker may answer with what this member holds).
                return records
            self._wakeup_trigger.maybe_trigger_wakeup()
            remaining = deadline - self._time_ms()
            if remaining <= 0:
                return {}
            if self.fetch_buffer.await_not_empty(min(remaining, MAX_WAIT_STEP_MS) / 1000.0):
                continue
            self._process_background_events()
            # An empty answer woke us: ask again (with any gap acknowledgements).
            self.application_event_handler.add(ev.ShareFetchEvent(self._take_acks()))

    def _poll_renewed(self, deadline: int) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        """Records were renewed (Java's ``hasRenewals``): send the acknowledgements, fetch
        nothing new, and hand the renewed records out again once the broker answered; a record
        whose renewal failed is dropped (the broker releases it). Nothing before ``deadline``:
        ``{}``, and the next poll waits on."""
        self._process_background_events()
        self._send_acks(self._take_acks())
        out: dict[TopicPartition, list[ShareConsumerRecord]] = {}
        while self._renewals:
            future, lot = self._renewals[0]
            try:
                errors = self._wait(future, deadline, "renewing acquisition locks")
            except KafkaTimeoutError:
                break
            except KafkaError as exc:
                errors = exc
            self._renewals.pop(0)
            for where, record in sorted(lot.items()):
                found = self._delivered.get(where)
                if found is None:
                    continue
                error = errors if isinstance(errors, BaseException) else errors.get(found[0][2])
                if error is None:
                    out.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
                else:
                    del self._delivered[where]  # the lock was not renewed: no longer this member's
        self._process_background_events()
        return out

    def _collect(self) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        if self._deferred_error is not None:
            (key, error), self._deferred_error = self._deferred_error, None
            self._raise_fetch_error(key, error)
        out: dict[TopicPartition, list[ShareConsumerRecord]] = {}
        left = self.max_poll_records
        while left > 0:
            fetch = self.fetch_buffer.peek()
            if fetch is None:
                break
            key = (fetch.node_id, fetch.generation, fetch.partition)
            try:
                records = fetch.fetch_records(left)
            except KafkaError as exc:
                self._take_gaps(fetch, key)
                if out:
                    self._deferred_error = (key, exc)  # the error comes on the next poll
                    break
                self._raise_fetch_error(key, exc)
            if self.explicit:
                for record in records:
                    self._delivered[(record.topic, record.partition, record.offset)] = (key, record.delivery_count)
            elif records:
                self._implicit_batch.append((key, [r.offset for r in records]))
            if records:
                if fetch.acquisition_lock_timeout_ms is not None:
                    self._acquisition_lock_timeout_ms = fetch.acquisition_lock_timeout_ms
                self.fetch_buffer.mark_outstanding(fetch.node_id)
                out.setdefault(fetch.partition.topic_partition, []).extend(records)
                left -= len(records)
            if fetch.is_consumed:
                self._take_gaps(fetch, key)
                self.fetch_buffer.remove(fetch)
        return out

    def _raise_fetch_error(self, key: AckKey, error: KafkaError) -> None:
        """Raise ``error`` to the application; a record that failed to deserialize is
        RELEASEd by default, the acquired records of a corrupt batch (the
        ``CorruptRecordError``'s ``offsets``) REJECTed, and each may be acknowledged by
        offset until the acknowledgements are taken (Java's ``ShareCompletedFetch``/``ShareFetch``)."""
        if isinstance(error, RecordDeserializationError) and error.offset >= 0:
            self._fail(key, error.offset, AcknowledgeType.RELEASE)
        elif isinstance(error, CorruptRecordError):
            for offset in sorted(error.offsets):
                self._fail(key, offset, AcknowledgeType.REJECT)
        raise error

    def _fail(self, key: AckKey, offset: int, default: AcknowledgeType) -> None:
        """A record whose delivery failed: ``default`` goes out unless overridden by offset."""
        tip = key[2]
        self._failed[(tip.topic, tip.partition, offset)] = key
        self._add_ack(key, offset, default)

    def _take_gaps(self, fetch: Any, key: AckKey) -> None:
        for offset, type_ in fetch.take_gaps().items():
            self._add_ack(key, offset, type_)

    # --- acknowledgements -------------------------------------------------------------------

    def _explicit_acknowledgement(self, type_: Any) -> AcknowledgeType:
        """The checks both ``acknowledge`` forms make first: open, explicit mode, a known type."""
        self._check_open()
        if not self.explicit:
            raise IllegalStateError("If you acknowledge records, set share_acknowledgement_mode='explicit' "
                                    "(this consumer uses implicit acknowledgement)")
        return acknowledge_type(type_)

    def acknowledge(self, record: Any, type_: Any = AcknowledgeType.ACCEPT) -> None:
        kind = self._explicit_acknowledgement(type_)
        try:
            where = (record.topic, record.partition, record.offset)
            count = record.delivery_count
        except AttributeError:
            raise IllegalStateError("The record cannot be acknowledged: {!r} is not a record delivered by "
                                    "poll()".format(record)) from None
        found = self._delivered.get(where)
        if found is None or found[1] != count:
            raise IllegalStateError(
                "The record cannot be acknowledged: {}-{} offset {} is not a record this consumer delivered in the "
                "last poll and has not acknowledged yet".format(*where))
        if any(where in lot for _, lot in self._renewals):
            raise IllegalStateError(
                "The record cannot be acknowledged: {}-{} offset {} is being renewed; poll() hands it out again "
                "once the broker answered".format(*where))
        key = found[0]
        if kind is AcknowledgeType.RENEW:
            self._renewing[where] = record  # stays delivered: poll() hands it out again
        else:
            self._renewing.pop(where, None)
            del self._delivered[where]
        self._add_ack(key, record.offset, kind)

    def acknowledge_offset(self, topic: str, partition: int, offset: int, type_: Any) -> None:
        """Explicit mode: acknowledge a record whose delivery failed (a ``poll`` raised a
        ``RecordDeserializationError`` for it, or a ``CorruptRecordError`` listing it in
        ``offsets``) instead of its default (RELEASE, REJECT)."""
        kind = self._explicit_acknowledgement(type_)
        key = self._failed.get((topic, partition, offset))
        if key is None:
            raise IllegalStateError(
                "The record cannot be acknowledged: {}-{} offset {} is not a record whose delivery failed since the "
                "last poll/commit".format(topic, partition, offset))
        if kind is AcknowledgeType.RENEW:
            # Never handed out, so never handed out again either: a renewed lock would only
            # hold the record until it expires.
            raise IllegalStateError("The record cannot be renewed: {}-{} offset {} failed to be delivered".format(
                topic, partition, offset))
        self._add_ack(key, offset, kind)

    def commit(self, timeout_ms: Optional[int] = None) -> dict[TopicIdPartition, Optional[BaseException]]:
        self._check_open()
        deadline = self._deadline(timeout_ms)
        if not self.explicit:
            self._accept_delivered()
        future = self._send_acks(self._take_acks(), wait_deadline=deadline)
        result: dict[TopicIdPartition, Optional[BaseException]] = {}
        if future is not None:
            result = self._wait(future, deadline, "commit")
        self._process_background_events()
        return result

    def commit_async(self) -> None:
        self._check_open()
        if not self.explicit:
            self._accept_delivered()
        self._send_acks(self._take_acks())
        self._process_background_events()

    # --- the rest -------------------------------------------------------------------------------

    def acquisition_lock_timeout_ms(self) -> Optional[int]:
        self._check_open()
        return self._acquisition_lock_timeout_ms

    def metrics(self, raw: bool = False) -> Optional[dict[Any, Any]]:
        return metrics_view(self._metrics, raw)

    def wakeup(self) -> None:
        self._wakeup_trigger.wakeup()
        self.fetch_buffer.wakeup()

    def close(self, timeout_ms: Optional[int] = None) -> None:
        if self._closed:
            return
        self._closed = True
        deadline = self._close_deadline(timeout_ms)
        try:
            self._wakeup_trigger.disable_wakeups()
            if self._subscription is not None:
                self._close_sessions_and_leave(deadline)
            else:
                self._run_callbacks_quietly()
            self.application_event_handler.add(ev.StopFindCoordinatorOnCloseEvent())
        finally:
            self._release(deadline)
