"""The member of a KIP-848-style group, whatever the group type (Java's ``AbstractMembershipManager``).

Owns what consumer groups and share groups have in common: the member id and epoch, the
``MemberState`` with its legal transitions enforced, the target assignment received in
heartbeat responses (by topic id, resolved through metadata), its reconciliation with the
partitions owned, joining, fencing, leaving and the stale member. What a group type adds
comes through the hooks: ``signal_reconciliation_started`` (a commit before giving
partitions up), ``signal_partitions_being_revoked`` / ``_assigned`` / ``_lost`` (futures
completed once, e.g., the rebalance listener ran on the application thread),
``auto_commit_enabled`` and ``leave_group_epoch``. The consumer group's member is
``kproto.consumer.kip848.consumer_membership_manager.ConsumerMembershipManager``.

Everything here runs on the background thread. The heartbeat request manager drives it
(``on_heartbeat_success`` / ``transition_to_fenced`` / ``transition_to_fatal`` /
``on_heartbeat_request_generated``); the AsyncPollEvent handler calls
``maybe_reconcile(can_commit=True)`` and ``on_consumer_poll``; the network loop calls
``poll`` which retries a reconciliation waiting for metadata.

Reconciliation order (Java's ``AbstractMembershipManager.maybeReconcile`` / ``revokeAndAssign``):

1. diff the resolvable part of the target assignment against the owned partitions (topic
   ids resolved through metadata; unknown ids trigger a metadata update and wait);
2. mark the revoked partitions pending revocation, so fetching from them stops;
3. ``signal_reconciliation_started``: the consumer auto-commits (when enabled) the consumed
   offsets, before anything is given up;
4. ``signal_partitions_being_revoked(revoked)`` (the consumer's ``on_partitions_revoked``);
5. take the new assignment (added partitions unfetchable until step 6 completes) and
   ``signal_partitions_assigned(added)`` (the consumer's ``on_partitions_assigned``);
6. ACKNOWLEDGING: the next heartbeat, sent at once, carries the new owned partitions.
"""

from __future__ import annotations

import logging
import uuid
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Mapping, Optional

from kproto import transition_log
from kproto.consumer.background.local_assignment import (
    LocalAssignment,
    by_topic_id,
    completed_future,
    generate_member_id,
    when_complete,
)
from kproto.consumer.background.member_state import MemberState, MemberStateListener, is_valid_transition
from kproto.consumer.background.request_manager import MAX_WAIT_MS, PollResult
from kproto.clock import monotonic_ms
from kproto.errors import IllegalStateError
from kproto.structs import TopicPartition

log = logging.getLogger("kproto.kip848")

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
METADATA_REQUEST_BACKOFF_MS = 100


class AbstractMembershipManager:
    """The member state machine and reconciliation; see the module docstring.

    ``topic_name_for_id(topic_id)`` resolves assignment topic ids from the cluster
    metadata (None if unknown) and ``request_metadata_update()`` asks for fresh metadata.
    """

    def __init__(self, group_id: str, subscriptions: Any, *,
                 topic_name_for_id: Callable[[uuid.UUID], Optional[str]],
                 request_metadata_update: Callable[[], object] = lambda: None,
                 member_id: Optional[str] = None, time_ms: Callable[[], int] = monotonic_ms) -> None:
        self.group_id = group_id
        self.subscriptions = subscriptions
        self._topic_name_for_id = topic_name_for_id
        self._request_metadata_update = request_metadata_update
        self._time_ms = time_ms

        self.member_id = member_id or generate_member_id()
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._state = MemberState.UNSUBSCRIBED
        self.current_assignment: LocalAssignment = LocalAssignment.NONE  # type: ignore[attr-defined]
        self.current_target_assignment: LocalAssignment = LocalAssignment.NONE  # type: ignore[attr-defined]
        # Names of the topics currently owned, so they resolve even if metadata drops them.
        self._assigned_topic_names: dict[uuid.UUID, str] = {}
        self._reconciliation_in_progress = False
        self._rejoined_while_reconciliation_in_progress = False
        self._next_metadata_request_ms = 0
        self._subscription_updated = False
        # Whether the current join's first heartbeat went out (should_heartbeat_now).
        self._join_heartbeat_sent = False
        self.is_poll_timer_expired = False
        self._leave_group_in_progress: Optional[Future[Any]] = None
        self._stale_member_assignment_release: Optional[Future[Any]] = None
        self._state_listeners: list[MemberStateListener] = []
        self._transition_listeners: list[Callable[[MemberState, MemberState], None]] = []

    # --- state ------------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        return self._state

    def transition_to(self, next_state: MemberState) -> None:
        """Enter ``next_state``; an illegal transition raises IllegalStateError."""
        if self._state is next_state:
            return
        if not is_valid_transition(self._state, next_state):
            raise IllegalStateError("Invalid state transition from {} to {}".format(
                self._state.name, next_state.name))
        previous, self._state = self._state, next_state
        log.info("Member %s with epoch %s transitioned from %s to %s.", self.member_id,
                 self.member_epoch, previous.name, next_state.name)
        transition_log.emit("member_state", source=self._event_source(), group=self.group_id,
                    member_id=self.member_id, epoch=self.member_epoch, previous=previous.name,
                    state=next_state.name)
        for listener in self._transition_listeners:
            listener(previous, next_state)

    def register_state_listener(self, listener: MemberStateListener) -> None:
        self._state_listeners.append(listener)

    def register_transition_listener(self, listener: Callable[[MemberState, MemberState], None]) -> None:
        """``listener(previous, new)`` on every state change (tests and metrics)."""
        self._transition_listeners.append(listener)

    def is_not_in_group(self) -> bool:
        return self._state in (MemberState.UNSUBSCRIBED, MemberState.FENCED, MemberState.FATAL,
                               MemberState.STALE)

    def should_skip_heartbeat(self) -> bool:
        return self.is_not_in_group()

    def should_heartbeat_now(self) -> bool:
        """ACKNOWLEDGING, LEAVING and a join not yet sent heartbeat without waiting for the interval.

        ACKNOWLEDGING and LEAVING end when their heartbeat is generated. JOINING does not:
        it lasts until an answer carries an assignment, and a coordinator may answer the
        join with an epoch and no assignment (librdkafka's mock does while the partitions
        are still owned by another member). Java's AbstractMembershipManager keeps
        heartbeating "now" in that state, one heartbeat per answer; here only the first
        heartbeat of a join is immediate, the next ones wait for the interval the answer
        gave (a failed one for the backoff).
        """
        if self._state is MemberState.JOINING:
            return not self._join_heartbeat_sent
        return self._state in (MemberState.ACKNOWLEDGING, MemberState.LEAVING)

    def is_leaving_group(self) -> bool:
        return self._state in (MemberState.PREPARE_LEAVING, MemberState.LEAVING)

    def leave_group_epoch(self) -> int:
        """The epoch a leave heartbeat carries (a static consumer member's differs)."""
        return LEAVE_GROUP_MEMBER_EPOCH

    def _event_source(self) -> Optional[str]:
        return getattr(self.subscriptions, "event_source", None)

    def _update_member_epoch(self, epoch: int) -> None:
        changed = epoch != self.member_epoch
        self.member_epoch = epoch
        if changed:
            transition_log.emit("member_epoch", source=self._event_source(), group=self.group_id,
                        member_id=self.member_id, epoch=epoch)
            for listener in self._state_listeners:
                listener.on_member_epoch_updated(epoch if epoch > 0 else None, self.member_id)

    def _notify_assignment_change(self, partitions: set[TopicPartition]) -> None:
        for listener in self._state_listeners:
            listener.on_group_assignment_updated(set(partitions))

    # --- subscription and poll ----------------------------------------------------------

    def on_subscription_updated(self) -> None:
        """A subscribe() happened; the member joins on the next application poll."""
        self._subscription_updated = True

    def on_consumer_poll(self) -> None:
        """Called for every application poll (the AsyncPollEvent)."""
        if self._subscription_updated and self._state is MemberState.UNSUBSCRIBED:
            self._subscription_updated = False
            self.transition_to_joining()
        else:
            self._subscription_updated = False

    def poll(self, now_ms: int) -> PollResult:
        """A reconciliation that only adds partitions may run from the background loop."""
        if self._state is MemberState.RECONCILING:
            self.maybe_reconcile(can_commit=False)
        return PollResult.EMPTY  # type: ignore[attr-defined]

    def maximum_time_to_wait(self, now_ms: int) -> int:
        return MAX_WAIT_MS

    # --- joining, fencing, fatal --------------------------------------------------------

    def transition_to_joining(self) -> None:
        """(Re)join as a member with epoch 0 and no pending target assignment."""
        if self._state is MemberState.FATAL:
            log.warning("No action taken to join the group with the updated subscription because "
                        "the member is in FATAL state")
            return
        if self._reconciliation_in_progress:
            self._rejoined_while_reconciliation_in_progress = True
        self._update_member_epoch(JOIN_GROUP_MEMBER_EPOCH)
        self.transition_to(MemberState.JOINING)
        self._join_heartbeat_sent = False
        self._clear_pending_assignments_and_local_names_cache()

    def transition_to_fenced(self) -> None:
        """UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: partitions are lost, then rejoin."""
        if self._state in (MemberState.PREPARE_LEAVING, MemberState.LEAVING):
            log.info("Member %s with epoch %s got fenced while leaving the group; it will not "
                     "send the leave request or rejoin.", self.member_id, self.member_epoch)
            if self._state is MemberState.PREPARE_LEAVING:
                # Through LEAVING, as Java: the leave epoch, and listeners told the epoch is gone.
                self.transition_to_sending_leave_group(due_to_expired_poll_timer=False)
            self.transition_to(MemberState.UNSUBSCRIBED)
            self._maybe_complete_leave_in_progress()
            return
        if self._state is MemberState.UNSUBSCRIBED:
            log.debug("Member %s got fenced but has already left the group; ignoring", self.member_id)
            return
        self.transition_to(MemberState.FENCED)
        self._update_member_epoch(JOIN_GROUP_MEMBER_EPOCH)
        log.info("Member %s got fenced; releasing its assignment (on_partitions_lost) and rejoining.",
                 self.member_id)

        def _after_lost(error: Optional[BaseException]) -> None:
            if error is not None:
                log.error("on_partitions_lost failed while the member was fenced: %s", error)
            self._clear_assignment()
            if self._state is MemberState.FENCED:
                self.transition_to_joining()
            else:
                log.debug("Member %s is %s after releasing its fenced assignment; not rejoining",
                          self.member_id, self._state.name)

        when_complete(self.signal_partitions_lost(self.subscriptions.assigned_partitions()), _after_lost)

    def transition_to_fatal(self) -> None:
        """An unrecoverable error: no more heartbeats; owned partitions are lost."""
        previous = self._state
        self.transition_to(MemberState.FATAL)
        log.error("Member %s with epoch %s transitioned to FATAL state", self.member_id, self.member_epoch)
        self._update_member_epoch(LEAVE_GROUP_MEMBER_EPOCH)
        if previous is MemberState.UNSUBSCRIBED:
            return
        if previous in (MemberState.PREPARE_LEAVING, MemberState.LEAVING):
            # The leave already released (or is releasing) the partitions: no lost callback.
            self._maybe_complete_leave_in_progress()
            return

        def _after_lost(error: Optional[BaseException]) -> None:
            if error is not None:
                log.error("on_partitions_lost failed after a fatal error: %s", error)
            self._clear_assignment()

        when_complete(self.signal_partitions_lost(self.subscriptions.assigned_partitions()), _after_lost)

    # --- leaving ------------------------------------------------------------------------

    def leave_group(self) -> Future[Any]:
        """unsubscribe()/close(): revoke via the listener, then send the leave heartbeat.

        The future completes once the leave heartbeat has been generated (the broker's
        answer is not awaited, as in Java).
        """
        if self.is_not_in_group():
            if self._state in (MemberState.FENCED, MemberState.STALE):
                self._clear_assignment()
                self.transition_to(MemberState.UNSUBSCRIBED)
            self.subscriptions.unsubscribe()
            self._notify_assignment_change(set())
            return completed_future()
        if self.is_leaving_group() and self._leave_group_in_progress is not None:
            return self._leave_group_in_progress
        self.transition_to(MemberState.PREPARE_LEAVING)
        leave_result: Future[Any] = Future()
        self._leave_group_in_progress = leave_result

        def _after_release(error: Optional[BaseException]) -> None:
            if error is not None:
                log.error("The rebalance callback failed while leaving the group: %s", error)
            # Whatever the callback did, the subscription is cleared and the leave is sent.
            self.subscriptions.unsubscribe()
            self._clear_assignment()
            if self._state is MemberState.PREPARE_LEAVING:
                self.transition_to_sending_leave_group(due_to_expired_poll_timer=False)

        when_complete(self._release_assignment_to_leave(), _after_release)
        return leave_result

    def _release_assignment_to_leave(self) -> Future[Any]:
        dropped = self.subscriptions.assigned_partitions()
        if not dropped:
            return completed_future()
        if self.member_epoch > 0:
            self.subscriptions.mark_pending_revocation(dropped)
            return self.signal_partitions_being_revoked(dropped)
        return self.signal_partitions_lost(dropped)

    def transition_to_sending_leave_group(self, due_to_expired_poll_timer: bool) -> None:
        """Set the leave epoch (-1, or -2 for a static member) and enter LEAVING."""
        if self._state is MemberState.FATAL:
            log.warning("Member %s is FATAL; no leave heartbeat will be sent", self.member_id)
            return
        if self._state is MemberState.UNSUBSCRIBED:
            log.debug("Member %s is not in the group; no leave heartbeat needed", self.member_id)
            return
        if due_to_expired_poll_timer:
            self.is_poll_timer_expired = True
            # A stale member releases nothing before leaving: its partitions are lost after
            # the leave heartbeat went out (transition_to_stale).
            self.transition_to(MemberState.PREPARE_LEAVING)
        self._finalize_leaving()
        self._update_member_epoch(self.leave_group_epoch())
        self.transition_to(MemberState.LEAVING)

    def _finalize_leaving(self) -> None:
        self._clear_pending_assignments_and_local_names_cache()

    def on_heartbeat_request_generated(self) -> None:
        """A heartbeat was built: ACKNOWLEDGING and LEAVING move on, a join was sent."""
        if self._state is MemberState.JOINING:
            self._join_heartbeat_sent = True
        elif self._state is MemberState.ACKNOWLEDGING:
            if self.target_assignment_reconciled():
                self.transition_to(MemberState.STABLE)
            else:
                log.debug("Member %s acknowledged; a newer target assignment is ready to reconcile",
                          self.member_id)
                self.transition_to(MemberState.RECONCILING)
        elif self._state is MemberState.LEAVING:
            if self.is_poll_timer_expired:
                self.transition_to_stale()
            else:
                self.transition_to_unsubscribed()

    def on_heartbeat_request_skipped(self) -> None:
        if self._state is MemberState.LEAVING:
            # No coordinator to send the leave to: the member has left as far as it can tell.
            log.debug("Heartbeat to leave the group skipped; member %s is out of the group", self.member_id)
            self.transition_to_unsubscribed()

    def on_heartbeat_failure(self, retriable: bool) -> None:
        if self._state is MemberState.UNSUBSCRIBED:
            self._maybe_complete_leave_in_progress()

    def transition_to_unsubscribed(self) -> None:
        self.transition_to(MemberState.UNSUBSCRIBED)
        self._maybe_complete_leave_in_progress()

    def _maybe_complete_leave_in_progress(self) -> bool:
        future, self._leave_group_in_progress = self._leave_group_in_progress, None
        if future is None:
            return False
        if not future.done():
            future.set_result(None)
        return True

    def transition_to_stale(self) -> None:
        """The leave for an expired poll timer went out: lose the partitions, wait for poll."""
        self.transition_to(MemberState.STALE)
        release: Future[Any] = Future()
        self._stale_member_assignment_release = release

        def _after_lost(error: Optional[BaseException]) -> None:
            if error is not None:
                log.error("on_partitions_lost failed for a stale member: %s", error)
            self._clear_assignment()
            log.debug("Member %s released its assignment and stays STALE until the next poll()",
                      self.member_id)
            release.set_result(None)

        when_complete(self.signal_partitions_lost(self.subscriptions.assigned_partitions()), _after_lost)

    def maybe_rejoin_stale_member(self) -> None:
        """The application polled again after the poll timer expired: rejoin (once released)."""
        self.is_poll_timer_expired = False
        if self._state is MemberState.STALE and self._stale_member_assignment_release is not None:
            log.debug("Expired poll timer was reset; stale member %s rejoins once its assignment "
                      "is released", self.member_id)

            def _rejoin(error: Optional[BaseException]) -> None:
                if self._state is MemberState.STALE:
                    self.transition_to_joining()

            when_complete(self._stale_member_assignment_release, _rejoin)

    # --- heartbeat responses --------------------------------------------------------------

    def on_heartbeat_success(self, response: Any) -> None:
        """A ConsumerGroupHeartbeatResponse without error: new epoch, maybe a new target."""
        if response.error_code:
            raise IllegalStateError("a heartbeat response with error code {} is not a success".format(
                response.error_code))
        if self._state is MemberState.LEAVING:
            log.debug("Ignoring heartbeat response: member %s is leaving", self.member_id)
            return
        if self._state is MemberState.UNSUBSCRIBED and self._maybe_complete_leave_in_progress():
            return
        if self.is_not_in_group():
            log.debug("Ignoring heartbeat response: member %s is %s", self.member_id, self._state.name)
            return
        if response.member_epoch < 0:
            # The answer to a leave heartbeat, arriving after the member rejoined (unsubscribe()
            # returns once the leave is sent; a subscribe() right after it sends the join when
            # that answer comes). Taken as the member's, epoch -1 would make every later
            # heartbeat a leave: the member would never rejoin.
            log.debug("Ignoring heartbeat response with epoch %d: member %s is %s at epoch %d",
                      response.member_epoch, self.member_id, self._state.name, self.member_epoch)
            self._maybe_complete_leave_in_progress()
            return
        if response.member_id and response.member_id != self.member_id:
            self.member_id = response.member_id
        self._update_member_epoch(response.member_epoch)
        assignment = response.assignment
        if assignment is None:
            return
        if not self._state.can_handle_new_assignment():
            log.debug("Ignoring new assignment: member %s is %s", self.member_id, self._state.name)
            return
        new_assignment: dict[uuid.UUID, set[int]] = {}
        for topic_partitions in assignment.topic_partitions:
            new_assignment.setdefault(topic_partitions.topic_id, set()).update(topic_partitions.partitions)
        self.process_assignment_received(new_assignment)

    def process_assignment_received(self, assignment: Mapping[uuid.UUID, Iterable[int]]) -> None:
        updated = self.current_target_assignment.update_with(assignment)
        if updated is not None:
            log.debug("Member %s received target assignment %s", self.member_id, updated)
            self.current_target_assignment = updated
        if not self.target_assignment_reconciled():
            # Reconciliation may still have to wait for metadata to resolve topic ids.
            self.transition_to(MemberState.RECONCILING)
        elif self._state in (MemberState.RECONCILING, MemberState.JOINING):
            # Nothing to reconcile (e.g. an empty assignment on join, or unresolved
            # partitions the broker has taken away again).
            self.transition_to(MemberState.STABLE)

    def target_assignment_reconciled(self) -> bool:
        return self.current_assignment == self.current_target_assignment

    # --- reconciliation -------------------------------------------------------------------

    def maybe_reconcile(self, can_commit: bool) -> None:
        """Start reconciling the target assignment if possible (see the module docstring).

        ``can_commit`` is True only from the application's poll (the AsyncPollEvent): a
        reconciliation that revokes partitions waits for it, because the application may be
        returning records of a partition about to be revoked.
        """
        if self.target_assignment_reconciled() or self._reconciliation_in_progress:
            return
        if self._state is not MemberState.RECONCILING:
            return
        assigned_by_id = self._find_resolvable_assignment_and_trigger_metadata_update()
        resolved = LocalAssignment(self.current_target_assignment.local_epoch, by_topic_id(assigned_by_id))
        if resolved == self.current_assignment:
            # This partial assignment was acknowledged already; the rest waits for metadata
            # (acknowledging it again would send a heartbeat per loop iteration).
            return
        if not self.current_assignment.is_none() and resolved.partitions == self.current_assignment.partitions:
            log.debug("The resolvable part of the target assignment equals the current assignment; "
                      "acknowledging it while the rest waits for metadata")
            self.current_assignment = resolved
            self.transition_to(MemberState.ACKNOWLEDGING)
            return

        owned = set(self.subscriptions.assigned_partitions())
        assigned = {tp for _, tp in assigned_by_id}
        added = assigned - owned
        revoked = owned - assigned
        if not can_commit and (revoked or self.auto_commit_enabled()):
            # Java's canCommit: the auto-commit below would commit offsets of records the
            # application may still be processing, so it waits for poll() too.
            log.debug("Delaying the reconciliation (revoking %s) until the next poll()", sorted(revoked))
            return

        self._reconciliation_in_progress = True
        self._rejoined_while_reconciliation_in_progress = False
        log.info("Reconciling: assigned %s, added %s, revoked %s", sorted(assigned), sorted(added),
                 sorted(revoked))
        if transition_log.enabled():
            transition_log.emit("reconcile", step="start", source=self._event_source(),
                        group=self.group_id, member_id=self.member_id, epoch=self.member_epoch,
                        assigned=_names(assigned), added=_names(added), revoked=_names(revoked))
        # Stop fetching (and drop in-flight fetch data for) partitions about to be given up.
        self.subscriptions.mark_pending_revocation(revoked)
        commit_result = self.signal_reconciliation_started()

        def _after_commit(error: Optional[BaseException]) -> None:
            if error is not None:
                # Retriable errors were retried until the deadline: carry on regardless.
                log.error("Auto-commit before reconciliation failed: %s", error)
            if not self._maybe_abort_reconciliation():
                self._revoke_and_assign(resolved, assigned_by_id, revoked, added)

        when_complete(commit_result, _after_commit)

    def _revoke_and_assign(self, resolved: LocalAssignment, assigned_by_id: set[tuple[uuid.UUID, TopicPartition]],
                           revoked: set[TopicPartition], added: set[TopicPartition]) -> None:
        if revoked:
            log.info("Revoking previously assigned partitions %s", sorted(revoked))
            transition_log.emit("reconcile", step="revoke", source=self._event_source(),
                        group=self.group_id, member_id=self.member_id, epoch=self.member_epoch,
                        revoked=_names(revoked))
            still_owned = revoked & set(self.subscriptions.assigned_partitions())
            revocation = self.signal_partitions_being_revoked(still_owned) if still_owned else completed_future()
        else:
            revocation = completed_future()

        def _after_revocation(error: Optional[BaseException]) -> None:
            if error is not None:
                self._fail_reconciliation("on_partitions_revoked", error)
                return
            if self._maybe_abort_reconciliation():
                return
            try:
                assign_result = self._assign_partitions(assigned_by_id, added)
            except Exception as exc:
                # e.g. the subscription changed under the assignment: retried on the next
                # reconciliation (the target is still not reconciled).
                log.error("Could not apply the assignment %s: %s", sorted(tp for _, tp in assigned_by_id), exc)
                self._reconciliation_in_progress = False
                return

            def _after_assign(assign_error: Optional[BaseException]) -> None:
                if assign_error is not None:
                    self._fail_reconciliation("on_partitions_assigned", assign_error)
                    return
                self._reconciliation_in_progress = False
                if not self._maybe_abort_reconciliation():
                    self.current_assignment = resolved
                    if transition_log.enabled():
                        transition_log.emit("reconcile", step="done", source=self._event_source(),
                                    group=self.group_id, member_id=self.member_id, epoch=self.member_epoch,
                                    owned=_names(self.subscriptions.assigned_partitions()))
                    self.transition_to(MemberState.ACKNOWLEDGING)

            when_complete(assign_result, _after_assign)

        when_complete(revocation, _after_revocation)

    def _assign_partitions(self, assigned_by_id: set[tuple[uuid.UUID, TopicPartition]],
                           added: set[TopicPartition]) -> Future[Any]:
        assigned = {tp for _, tp in assigned_by_id}
        # Added partitions stay unfetchable (no positions either) until the callback ran.
        self.subscriptions.assign_from_subscribed_awaiting_callback(sorted(assigned), sorted(added))
        self._assigned_topic_names = {topic_id: tp.topic for topic_id, tp in assigned_by_id}
        self._notify_assignment_change(assigned)
        result = self.signal_partitions_assigned(added)

        def _enable(error: Optional[BaseException]) -> None:
            if error is None:
                self.subscriptions.enable_partitions_awaiting_callback(added)
            elif added:
                log.warning("Partitions %s stay unfetchable after on_partitions_assigned failed; "
                            "they are retried on the next reconciliation", sorted(added))

        when_complete(result, _enable)
        return result

    def _fail_reconciliation(self, callback: str, error: BaseException) -> None:
        # Java: a failed callback fails the reconciliation; no ack, the member stays
        # RECONCILING and the next poll() tries again (or the broker fences it).
        log.error("Reconciliation failed: %s raised %s; not acknowledging", callback, error)
        self._reconciliation_in_progress = False
        self._rejoined_while_reconciliation_in_progress = False

    def _maybe_abort_reconciliation(self) -> bool:
        abort = self._state is not MemberState.RECONCILING or self._rejoined_while_reconciliation_in_progress
        if abort:
            log.info("Interrupting a reconciliation that is no longer relevant: member is %s",
                     self._state.name)
            self._reconciliation_in_progress = False
            self._rejoined_while_reconciliation_in_progress = False
        return abort

    def _find_resolvable_assignment_and_trigger_metadata_update(self) -> set[tuple[uuid.UUID, TopicPartition]]:
        ready: set[tuple[uuid.UUID, TopicPartition]] = set()
        unresolved = []
        for topic_id, partitions in self.current_target_assignment.partitions.items():
            name = self._assigned_topic_names.get(topic_id) or self._topic_name_for_id(topic_id)
            if name is None:
                unresolved.append(topic_id)
                continue
            ready.update((topic_id, TopicPartition(name, p)) for p in partitions)
        if unresolved:
            now = self._time_ms()
            # Called on every loop pass while waiting: ask at most once per backoff.
            if now >= self._next_metadata_request_ms:
                log.debug("Topic ids %s of the target assignment are not in metadata yet; requesting "
                          "a metadata update", unresolved)
                self._request_metadata_update()
                self._next_metadata_request_ms = now + METADATA_REQUEST_BACKOFF_MS
        return ready

    def is_reconciliation_in_progress(self) -> bool:
        return self._reconciliation_in_progress

    def _clear_assignment(self) -> None:
        if self.subscriptions.has_auto_assigned_partitions():
            self.subscriptions.assign_from_subscribed([])
            self._notify_assignment_change(set())
        self.current_assignment = LocalAssignment.NONE  # type: ignore[attr-defined]
        self._clear_pending_assignments_and_local_names_cache()

    def _clear_pending_assignments_and_local_names_cache(self) -> None:
        self.current_target_assignment = LocalAssignment.NONE  # type: ignore[attr-defined]
        self._assigned_topic_names = {}

    # --- what a group type adds (Java's abstract methods) ------------------------------------

    def auto_commit_enabled(self) -> bool:
        """Whether reconciling commits first, so it waits for the application's poll()."""
        return False

    def signal_reconciliation_started(self) -> Future[Any]:
        """Before anything is given up (the consumer's auto-commit); completes when done."""
        return completed_future()

    def signal_partitions_being_revoked(self, partitions: set[TopicPartition]) -> Future[Any]:
        """Partitions about to be revoked; the reconciliation goes on when this completes
        (failed: the reconciliation fails and is retried)."""
        return completed_future()

    def signal_partitions_assigned(self, partitions: set[TopicPartition]) -> Future[Any]:
        """Partitions newly assigned (called even for none); they become fetchable once this
        completes without error."""
        return completed_future()

    def signal_partitions_lost(self, partitions: Iterable[TopicPartition]) -> Future[Any]:
        """Partitions lost without a chance to commit (fenced, fatal, stale)."""
        return completed_future()


def _names(partitions: Any) -> list[str]:
    """``topic-p`` texts for kproto.events (the trace timeline's notation)."""
    return sorted("{}-{}".format(tp[0], tp[1]) for tp in partitions)
