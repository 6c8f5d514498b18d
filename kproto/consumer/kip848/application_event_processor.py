"""What each KIP-848 consumer application event does, on the background thread (the cases of
Java's ``ApplicationEventProcessor``).

Owns the handlers, registered by event type in the shell's table
(``kproto.consumer.background.application_event_processor``), and the AsyncPollEvent's
stages in the order of Java's ``ApplicationEventProcessor.process(AsyncPollEvent)``:
(1) reconciliation check with commits allowed, (2) auto-commit timer, membership poll hook
and the poll timer reset, (3) update fetch positions, then (4) fetch requests, each stage
marked on the event so the application thread knows when it may read the fetch buffer. A
completable event's future is completed here (or failed with the exception that stopped
it); the reaper fails it at its deadline otherwise.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Optional

from kproto.consumer.background.application_event_processor import ApplicationEventProcessor
from kproto.consumer.background.local_assignment import chain, when_complete
from kproto.consumer.kip848 import events as ev
from kproto.consumer.subscription_state import SubscriptionType
from kproto.errors import IllegalStateError

if TYPE_CHECKING:
    from kproto.consumer.subscription_state import SubscriptionState
    from kproto.net.metadata import ClusterMetadata

log = logging.getLogger("kproto.kip848")


class ConsumerApplicationEventProcessor(ApplicationEventProcessor):
    """The KIP-848 consumer's handler table; managers that the consumer does not have are None."""

    def __init__(self, subscriptions: SubscriptionState, metadata: ClusterMetadata, *, fetch_request_manager: Any,
                 offsets_request_manager: Any, coordinator_request_manager: Any = None,
                 commit_request_manager: Any = None, heartbeat_request_manager: Any = None,
                 membership_manager: Any = None) -> None:
        self.subscriptions = subscriptions
        self.metadata = metadata
        self.fetch = fetch_request_manager
        self.offsets = offsets_request_manager
        self.coordinator = coordinator_request_manager
        self.commit = commit_request_manager
        self.heartbeat = heartbeat_request_manager
        self.membership = membership_manager
        self._pattern_listener_added = False
        super().__init__({
            ev.AsyncPollEvent: self._process_async_poll_event,
            ev.CreateFetchRequestsEvent: self._process_create_fetch_requests_event,
            ev.ListOffsetsEvent: self._process_list_offsets_event,
            ev.TopicMetadataEvent: self._process_topic_metadata_event,
            ev.ListTopicsEvent: self._process_list_topics_event,
            ev.MetadataUpdateEvent: self._process_metadata_update_event,
            ev.CheckAndUpdatePositionsEvent: self._process_check_and_update_positions_event,
            ev.AsyncCommitEvent: self._process_async_commit_event,
            ev.SyncCommitEvent: self._process_sync_commit_event,
            ev.FetchCommittedOffsetsEvent: self._process_fetch_committed_offsets_event,
            ev.CommitOnCloseEvent: self._process_commit_on_close_event,
            ev.ResetOffsetEvent: self._process_reset_offset_event,
            ev.SeekUnvalidatedEvent: self._process_seek_unvalidated_event,
            ev.PausePartitionsEvent: self._process_pause_partitions_event,
            ev.ResumePartitionsEvent: self._process_resume_partitions_event,
            ev.AssignmentChangeEvent: self._process_assignment_change_event,
            ev.TopicSubscriptionChangeEvent: self._process_topic_subscription_change_event,
            ev.TopicRe2jPatternSubscriptionChangeEvent: self._process_re2j_pattern_subscription_change_event,
            ev.TopicPatternSubscriptionChangeEvent: self._process_topic_pattern_subscription_change_event,
            ev.UnsubscribeEvent: self._process_unsubscribe_event,
            ev.LeaveGroupOnCloseEvent: self._process_leave_group_on_close_event,
            ev.StopFindCoordinatorOnCloseEvent: self._process_stop_find_coordinator_on_close_event,
            ev.ConsumerRebalanceListenerCallbackCompletedEvent: self._process_listener_callback_completed_event,
        })

    # --- poll ----------------------------------------------------------------------------

    def _process_async_poll_event(self, event: ev.AsyncPollEvent) -> None:
        try:
            if self.membership is not None:
                self.membership.maybe_reconcile(can_commit=True)
            event.mark_reconciliation_check_complete()
            if self.commit is not None:
                self.commit.update_timer_and_maybe_commit(event.poll_time_ms)
            if self.membership is not None:
                self.membership.on_consumer_poll()
            if self.heartbeat is not None:
                self.heartbeat.reset_poll_timer(event.poll_time_ms)
            positions = self.offsets.update_fetch_positions(event.deadline_ms)
        except Exception as exc:
            event.complete_exceptionally(exc)
            return

        # The application waits on the event's validate-positions flag, not on a wakeup:
        # waking it here would make every completed event start the next one at once.
        def _after_positions(error: Optional[BaseException]) -> None:
            if error is not None:
                event.complete_exceptionally(error)
            else:
                event.had_all_fetch_positions = bool(positions.result())
                event.mark_validate_positions_complete()
                self.fetch.create_fetch_requests()
                event.complete_successfully()

        when_complete(positions, _after_positions)

    def _process_create_fetch_requests_event(self, event: ev.CreateFetchRequestsEvent) -> None:
        chain(self.fetch.create_fetch_requests(), event.future)

    def _process_list_offsets_event(self, event: ev.ListOffsetsEvent) -> None:
        chain(self.offsets.fetch_offsets_by_times(event.timestamps_to_search, event.require_timestamps,
                                                  event.deadline_ms), event.future)

    def _answer_after_metadata_update(self, event: Any, answer: Callable[[], Any]) -> None:
        """Complete ``event`` with ``answer()`` once an update answering a request made from
        now on has been applied, or with the refresh's failure. ``answer`` runs even when the
        event expired meanwhile (it may restore state, as ``topics()`` does)."""

        def _done(_: Any) -> None:
            value = answer()
            if not event.future.done():
                event.future.set_result(value)

        def _fail(error: BaseException) -> None:
            if not event.future.done():
                event.future.set_exception(error)

        self.metadata.request_update().add_callback(_done).add_errback(_fail)

    def _process_topic_metadata_event(self, event: ev.TopicMetadataEvent) -> None:
        """``partitions_for_topic`` of a topic the metadata does not cover yet."""
        topic = event.topic
        known = self.metadata.partitions_for_topic(topic)
        if known is not None:
            event.future.set_result(known)
            return
        # The topic may already be of interest with its metadata still missing: ask anyway.
        self.metadata.add_topic(topic)
        self._answer_after_metadata_update(event, lambda: self.metadata.partitions_for_topic(topic))

    def _process_list_topics_event(self, event: ev.ListTopicsEvent) -> None:
        """``topics()``: ask for every topic once, then go back to the topics of interest
        (unless a pattern subscription needs all of them anyway)."""
        self.metadata.need_all_topic_metadata(True)

        def _answer() -> Any:
            if not self.subscriptions.has_pattern_subscription():
                self.metadata.need_all_topic_metadata(False)
            return self.metadata.topics(event.exclude_internal_topics)

        self._answer_after_metadata_update(event, _answer)

    def _process_metadata_update_event(self, event: ev.MetadataUpdateEvent) -> None:
        if not event.refresh and self.metadata.update_count > 0:
            event.future.set_result(None)
            return
        self._answer_after_metadata_update(event, lambda: None)

    def _process_check_and_update_positions_event(self, event: ev.CheckAndUpdatePositionsEvent) -> None:
        chain(self.offsets.update_fetch_positions(event.deadline_ms), event.future)

    # --- commits and committed offsets ---------------------------------------------------

    def _commit_manager(self) -> Any:
        if self.commit is None:
            raise IllegalStateError("committing offsets needs a group_id")
        return self.commit

    def _commit_offsets(self, event: ev.CommitEvent) -> dict[Any, Any]:
        offsets = event.offsets if event.offsets is not None else self.subscriptions.all_consumed()
        if not event.offsets_ready.done():
            event.offsets_ready.set_result(offsets)
        return offsets

    def _process_async_commit_event(self, event: ev.AsyncCommitEvent) -> None:
        offsets = self._commit_offsets(event)
        chain(self._commit_manager().commit_async(offsets), event.future, lambda _: offsets)

    def _process_sync_commit_event(self, event: ev.SyncCommitEvent) -> None:
        offsets = self._commit_offsets(event)
        chain(self._commit_manager().commit_sync(offsets, event.deadline_ms), event.future, lambda _: offsets)

    def _process_fetch_committed_offsets_event(self, event: ev.FetchCommittedOffsetsEvent) -> None:
        chain(self._commit_manager().fetch_offsets(set(event.partitions), event.deadline_ms), event.future)

    def _process_commit_on_close_event(self, event: ev.CommitOnCloseEvent) -> None:
        if self.commit is not None:
            self.commit.signal_close()

    # --- positions -----------------------------------------------------------------------

    def _process_reset_offset_event(self, event: ev.ResetOffsetEvent) -> None:
        for tp in event.partitions:
            self.subscriptions.request_offset_reset(tp, event.offset_reset_strategy)
        event.future.set_result(None)

    def _process_seek_unvalidated_event(self, event: ev.SeekUnvalidatedEvent) -> None:
        from kproto.consumer.offsets.offset_fetcher_utils import current_leader
        from kproto.consumer.subscription_state import FetchPosition

        if not self.subscriptions.is_assigned(event.partition):
            raise IllegalStateError("No current assignment for partition {}".format(event.partition))
        position = FetchPosition(event.offset, event.offset_epoch, current_leader(self.metadata, event.partition))
        self.subscriptions.seek_unvalidated(event.partition, position)
        event.future.set_result(None)

    def _process_pause_partitions_event(self, event: ev.PausePartitionsEvent) -> None:
        for tp in event.partitions:
            self.subscriptions.pause(tp)
        event.future.set_result(None)

    def _process_resume_partitions_event(self, event: ev.ResumePartitionsEvent) -> None:
        for tp in event.partitions:
            self.subscriptions.resume(tp)
        event.future.set_result(None)

    # --- subscriptions ------------------------------------------------------------------

    def _process_assignment_change_event(self, event: ev.AssignmentChangeEvent) -> None:
        if self.commit is not None:
            # Commit what was consumed from the partitions being replaced (auto-commit only).
            self.commit.update_timer_and_maybe_commit(event.current_time_ms)
        self.subscriptions.assign_from_user(event.partitions)
        self.metadata.set_topics({tp.topic for tp in event.partitions})
        event.future.set_result(None)

    def _process_topic_subscription_change_event(self, event: ev.TopicSubscriptionChangeEvent) -> None:
        self._require_membership()
        self.subscriptions.subscribe(sorted(event.topics), event.listener)
        self.metadata.set_topics(event.topics)
        self.membership.on_subscription_updated()
        event.future.set_result(None)

    def _process_re2j_pattern_subscription_change_event(self, event: ev.TopicRe2jPatternSubscriptionChangeEvent) -> None:
        self._require_membership()
        self.subscriptions.subscribe_pattern(event.pattern, event.listener, broker_evaluated=True)
        # The broker picks the topics: the client needs metadata for all to resolve ids.
        self.metadata.need_all_topic_metadata(True)
        self.metadata.request_update()
        self.membership.on_subscription_updated()
        event.future.set_result(None)

    def _process_topic_pattern_subscription_change_event(self, event: ev.TopicPatternSubscriptionChangeEvent) -> None:
        """A compiled ``re.Pattern``: matched here against all topics, after every metadata update."""
        self._require_membership()
        self.subscriptions.subscribe_pattern(event.pattern, event.listener)
        self.metadata.need_all_topic_metadata(True)
        if not self._pattern_listener_added:
            self.metadata.add_listener(self._update_pattern_subscription)
            self._pattern_listener_added = True
        self._update_pattern_subscription(self.metadata)
        # Join once the pattern has been matched against a metadata update asked for now
        # (Java joins at once, with whatever the cached metadata matched: often nothing
        # on a fresh consumer, and a first heartbeat with no topic names and no regex
        # is refused by some brokers and makes librdkafka's mock abort).
        membership = self.membership
        self.metadata.request_update().add_both(lambda _result: membership.on_subscription_updated())
        event.future.set_result(None)

    def _update_pattern_subscription(self, metadata: ClusterMetadata) -> None:
        if self.subscriptions.subscription_type is not SubscriptionType.AUTO_PATTERN:
            return
        matched = {t for t in metadata.topics() if self.subscriptions.matches_subscribed_pattern(t)}
        if self.subscriptions.subscribe_from_pattern(matched):
            # The next heartbeat carries the new topic names (HeartbeatState sends changes).
            log.info("Pattern subscription now matches %s", sorted(matched))

    def _process_unsubscribe_event(self, event: ev.UnsubscribeEvent) -> None:
        if self.membership is not None:
            chain(self.membership.leave_group(), event.future)
        else:
            self.subscriptions.unsubscribe()
            event.future.set_result(None)

    def _process_leave_group_on_close_event(self, event: ev.LeaveGroupOnCloseEvent) -> None:
        if self.membership is None or event.membership_operation != "leave":
            event.future.set_result(None)
            return
        chain(self.membership.leave_group(), event.future)

    def _process_stop_find_coordinator_on_close_event(self, event: ev.StopFindCoordinatorOnCloseEvent) -> None:
        if self.coordinator is not None:
            self.coordinator.signal_close()

    def _process_listener_callback_completed_event(
            self, event: ev.ConsumerRebalanceListenerCallbackCompletedEvent) -> None:
        self._require_membership()
        self.membership.consumer_rebalance_listener_callback_completed(event)

    def _require_membership(self) -> None:
        if self.membership is None:
            raise IllegalStateError("subscribing needs a group_id (group management)")
