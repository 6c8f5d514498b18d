"""Classic consumer groups on the event-loop shell: the classic protocol as a request manager.

Owns ``ClassicGroupManager`` (Java's ``ConsumerCoordinator`` with ``AbstractCoordinator``
and its heartbeat thread, rewritten as a background-shell request manager): JoinGroup /
SyncGroup rounds decided by ``GroupMembership``'s verdicts, the leader's assignment with
the configured assignors (``consumer_protocol`` subscriptions and assignments), Heartbeat
on ``Heartbeat``'s timers (a loop timer, not a thread: heartbeats go on while the
application awaits anything), LeaveGroup (dynamic members only, as Java's static members
never send one) and the poll timer (``max_poll_interval_ms``: the member leaves, and joins
again at the next ``getmany()``). Commits go through the KIP-848 engine's
``CommitRequestManager``, which carries the generation id as its epoch; rebalance
listener callbacks are requested as background events, exactly as the KIP-848 member
does, and the rebalance waits for their completion events.

``install_classic_group`` swaps it into the resources ``build_resources`` built, in place
of the KIP-848 heartbeat and membership managers. Everything runs on the loop's thread.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Optional

from kproto import errors
from kproto.consumer.background.consumer_network_thread import Resources
from kproto.consumer.background.events import BackgroundEventHandler, ErrorEvent
from kproto.consumer.background.local_assignment import completed_future
from kproto.consumer.background.request_manager import MAX_WAIT_MS, PollResult, RequestBuilder, UnsentRequest
from kproto.consumer.classic import group_requests
from kproto.consumer.classic.assignors.abstract import GroupMember, RebalanceProtocol
from kproto.consumer.classic.assignors.resolve import resolve_assignors, select_rebalance_protocol
from kproto.consumer.classic.consumer_protocol import (coerce_assignment, coerce_subscription, decode_assignment,
                                                       decode_subscription, encode_assignment, encode_subscription)
from kproto.consumer.classic.consumer_coordinator import metadata_snapshot
from kproto.consumer.classic.group_membership import Generation, GroupMembership, MemberState, Verdict
from kproto.consumer.classic.heartbeat import Heartbeat
from kproto.consumer.engine_config import EngineConfig
from kproto.consumer.kip848.events import (ConsumerRebalanceListenerCallbackCompletedEvent,
                                           ConsumerRebalanceListenerMethodName, request_listener_callback)
from kproto.structs import TopicPartition

log = logging.getLogger("kproto.aio")

Method = ConsumerRebalanceListenerMethodName
PROTOCOL_TYPE = "consumer"
# The coordinator holds a JoinGroup until every member joined (up to the rebalance timeout):
# its request timeout is that plus this margin (Java's joinGroupTimeoutMs).
JOIN_GROUP_TIMEOUT_MARGIN_MS = 5000


def _capped(request_cls: Any, max_version: int) -> int:
    return min(max_version, group_requests.MAX_VERSIONS.get(request_cls.api_key, max_version))


class ClassicGroupManager:
    """One classic group member on the background shell's loop; see the module docstring."""

    def __init__(self, settings: EngineConfig, subscriptions: Any, cluster: Any, coordinator_manager: Any,
                 commit_manager: Any, background_event_handler: BackgroundEventHandler,
                 request_metadata_update: Callable[[], Any], time_ms: Callable[[], int],
                 wakeup: Callable[[], None] = lambda: None) -> None:
        group = settings.group
        assert group.group_id, "a classic group member needs a group_id"
        self.group_id: str = group.group_id
        self.membership = GroupMembership(self.group_id, group.group_instance_id)
        self.membership.event_source = settings.client_id
        self.subscriptions = subscriptions
        self._cluster = cluster
        self._coordinator = coordinator_manager
        self._commit = commit_manager
        self._events = background_event_handler
        self._request_metadata_update = request_metadata_update
        self._time_ms = time_ms
        # A response callback's next step goes out in the next iteration: wake the loop.
        self._wakeup = wakeup
        self._assignors = resolve_assignors(settings.partition_assignment_strategy)
        self.rebalance_protocol = select_rebalance_protocol(self._assignors)
        self._rack_id = group.rack_id
        self._session_timeout_ms = group.session_timeout_ms
        self._rebalance_timeout_ms = group.rebalance_timeout_ms
        self._request_timeout_ms = group.request_timeout_ms
        self._retry_backoff_ms = group.retry_backoff_ms
        self.heartbeat = Heartbeat(session_timeout_ms=self._session_timeout_ms,
                                   heartbeat_interval_ms=group.heartbeat_interval_ms,
                                   max_poll_interval_ms=group.rebalance_timeout_ms,
                                   retry_backoff_ms=self._retry_backoff_ms, now_ms=time_ms())
        # A commit or listener callback the rebalance waits on before its next step.
        self._waiting: Optional[Future[Any]] = None
        self._in_flight: Optional[str] = None  # "join" or "sync"
        self._next_join_ms = 0
        self._needs_join_prepare = True
        self._metadata_deadline_ms: Optional[int] = None
        self._metadata_seen = 0  # the metadata's update count when the leader asked for one
        # Joined, SyncGroup not sent yet: the generation and, for the leader, the members.
        self._sync_round: Optional[tuple[Generation, Optional[list[Any]]]] = None
        self._joined_subscription: Optional[frozenset[str]] = None
        self._assignment_snapshot: Optional[dict[str, int]] = None
        self._poll_expired = False
        self._leave_future: Optional[Future[Any]] = None
        self._leave_to_send: Optional[tuple[Generation, str]] = None
        self._fatal: Optional[BaseException] = None

    # --- the request manager contract -------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        unsent: list[UnsentRequest] = []
        coordinator = self._coordinator.coordinator
        if self._leave_to_send is not None:
            generation, reason = self._leave_to_send
            self._leave_to_send = None
            if coordinator is not None:
                unsent.append(self._leave_request(coordinator.node_id, generation, reason))
        if self._fatal is not None or self._leave_future is not None:
            return PollResult(MAX_WAIT_MS, unsent)
        state = self.membership.state
        joined = state in (MemberState.COMPLETING_REBALANCE, MemberState.STABLE)
        if coordinator is not None and joined and self.heartbeat.session_timeout_expired(now_ms):
            # Java's heartbeat thread: no answer for a whole session; look the coordinator up again.
            self._coordinator.mark_coordinator_unknown("no heartbeat answer within session_timeout_ms", now_ms)
            self.heartbeat.reset_session_timeout(now_ms)
            coordinator = None
        active = self.subscriptions.has_auto_assigned_partitions()
        if active and state is not MemberState.UNJOINED and not self._poll_expired \
                and self.heartbeat.poll_timeout_expired(now_ms):
            log.warning("Group %s: the time between getmany() calls exceeded max_poll_interval_ms; leaving "
                        "the group (it joins again at the next getmany())", self.group_id)
            self._poll_expired = True
            self._leave_now(coordinator, "consumer poll timeout has expired", unsent)
            return PollResult(self.maximum_time_to_wait(now_ms), unsent)
        if coordinator is None:
            return PollResult(self._retry_backoff_ms if active else MAX_WAIT_MS, unsent)
        if joined and self.heartbeat.should_heartbeat(now_ms):
            unsent.append(self._heartbeat_request(coordinator.node_id, now_ms))
        if active and self._waiting is None and self._in_flight is None and now_ms >= self._next_join_ms \
                and not self._poll_expired:
            if self._sync_round is not None:
                self._try_sync(coordinator.node_id, now_ms, unsent)
            elif self._rejoin_needed_or_pending():
                if self._needs_join_prepare:
                    self._prepare_join(now_ms)
                if self._waiting is None and self._subscription_metadata_ready(now_ms):
                    unsent.append(self._join_request(coordinator.node_id, now_ms))
        return PollResult(self.maximum_time_to_wait(now_ms), unsent)

    def maximum_time_to_wait(self, now_ms: int) -> int:
        if self._fatal is not None or self._leave_future is not None:
            return MAX_WAIT_MS
        if not self.subscriptions.has_auto_assigned_partitions():
            return MAX_WAIT_MS
        wait = self.heartbeat.poll_time_remaining(now_ms)
        if self.membership.state in (MemberState.COMPLETING_REBALANCE, MemberState.STABLE):
            wait = min(wait, self.heartbeat.time_to_next_heartbeat(now_ms))
        if self._coordinator.coordinator is None:
            wait = min(wait, self._retry_backoff_ms)
        elif self._waiting is None and self._in_flight is None and not self._poll_expired and \
                (self._sync_round is not None or self._rejoin_needed_or_pending()):
            wait = min(wait, max(0, self._next_join_ms - now_ms), self._retry_backoff_ms)
        return int(wait)

    def poll_on_close(self, now_ms: int) -> PollResult:
        return self.poll(now_ms) if self._leave_to_send is not None else PollResult.EMPTY  # type: ignore[attr-defined]

    # --- what the application event processor calls (the KIP-848 member's interface) ---------

    def on_subscription_updated(self) -> None:
        if self._leave_future is not None and self._leave_future.done():
            self._leave_future = None  # subscribed again after unsubscribe(): join again

    def on_consumer_poll(self) -> None:
        pass

    def maybe_reconcile(self, can_commit: bool) -> None:
        pass

    def reset_poll_timer(self, poll_ms: int) -> None:
        """The application called ``getmany()``: the poll timer starts again (and a member
        that left on its expiry joins again)."""
        self.heartbeat.poll(poll_ms)
        self._poll_expired = False

    def consumer_rebalance_listener_callback_completed(
            self, event: ConsumerRebalanceListenerCallbackCompletedEvent) -> None:
        event.resume_waiter()

    def leave_group(self) -> Future[Any]:
        """unsubscribe()/stop(): commit (auto-commit), revoke through the listener (lost if
        the generation is gone), then LeaveGroup (dynamic members); completes once staged."""
        if self._leave_future is not None:
            return self._leave_future
        future: Future[Any] = Future()
        self._leave_future = future
        owned = self.subscriptions.assigned_partitions()
        generation = self.membership.generation

        def finish(_error: Optional[BaseException]) -> None:
            self.subscriptions.unsubscribe()
            if self.membership.state is not MemberState.UNJOINED or generation.has_member_id():
                self._leave_now(self._coordinator.coordinator, "the consumer unsubscribed or is closing", None)
            self._in_flight = None
            self._sync_round = None
            self._waiting = None
            if not future.done():
                future.set_result(None)

        if not owned:
            finish(None)
            return future
        self.subscriptions.mark_pending_revocation(owned)
        if self._generation_lost(generation):
            self._then(self._listener(Method.ON_PARTITIONS_LOST, owned), finish)
        else:
            self._then(self._commit_before_revocation(),
                       lambda _e: self._then(self._listener(Method.ON_PARTITIONS_REVOKED, owned), finish))
        return future

    # --- joining --------------------------------------------------------------------------

    def _rejoin_needed_or_pending(self) -> bool:
        if self.membership.rejoin_needed:
            return True
        if self._joined_subscription is not None and \
                frozenset(self.subscriptions.subscription()) != self._joined_subscription:
            self.membership.request_rejoin("the subscription changed")
            return True
        if self._assignment_snapshot is not None and self._assignment_snapshot != self._metadata_snapshot():
            self.membership.request_rejoin("the partitions of the subscribed topics changed")
            return True
        return False

    def _metadata_snapshot(self) -> dict[str, int]:
        return metadata_snapshot(self.subscriptions, self._cluster)

    def _subscription_metadata_ready(self, now_ms: int) -> bool:
        """Before joining, wait (up to a request timeout) for the subscribed topics' metadata,
        so the leader can assign them (Java's consumer waits in poll() likewise)."""
        missing = [t for t in self.subscriptions.subscription() if not self._cluster.partitions_for_topic(t)]
        if not missing and (not self.subscriptions.has_pattern_subscription() or self._cluster.update_count):
            self._metadata_deadline_ms = None
            return True
        if self._metadata_deadline_ms is None:
            self._metadata_deadline_ms = now_ms + self._request_timeout_ms
            self._request_metadata_update()
        if now_ms >= self._metadata_deadline_ms:
            self._metadata_deadline_ms = None
            return True  # join anyway: a topic that does not exist yet gets no partitions
        self._next_join_ms = now_ms + self._retry_backoff_ms
        return False

    @staticmethod
    def _generation_lost(generation: Generation) -> bool:
        return generation.generation_id < 0 or not generation.has_member_id()

    def _prepare_join(self, now_ms: int) -> None:
        """Java's onJoinPrepare: commit (auto-commit), then revoke (eager: everything;
        cooperative: partitions of topics no longer subscribed) or report them lost if the
        generation was reset; the JoinGroup waits for the callback."""
        self._needs_join_prepare = False
        owned = self.subscriptions.assigned_partitions()
        generation = self.membership.generation
        lost = self._generation_lost(generation)
        if lost:
            revoked = set(owned)
        elif self.rebalance_protocol is RebalanceProtocol.EAGER:
            revoked = set(owned)
        else:
            subscribed = self.subscriptions.subscription()
            revoked = {tp for tp in owned if tp.topic not in subscribed}
        self._assignment_snapshot = None

        def revoke(_error: Optional[BaseException]) -> None:
            if not revoked:
                self.subscriptions.reset_group_subscription()
                return
            self.subscriptions.mark_pending_revocation(revoked)

            def after(_e: Optional[BaseException]) -> None:
                self.subscriptions.assign_from_subscribed(
                    [tp for tp in self.subscriptions.assigned_partitions_list() if tp not in revoked])
                self.subscriptions.reset_group_subscription()

            method = Method.ON_PARTITIONS_LOST if lost else Method.ON_PARTITIONS_REVOKED
            self._then(self._listener(method, revoked), after)

        if lost or not owned:
            revoke(None)
        else:
            self._then(self._commit_before_revocation(), revoke)

    def _protocols(self) -> list[tuple[str, bytes]]:
        topics = sorted(self.subscriptions.subscription())
        self._joined_subscription = frozenset(topics)
        owned = sorted(self.subscriptions.assigned_partitions())
        protocols = []
        for assignor in self._assignors:
            sub = coerce_subscription(assignor.metadata(topics))
            sub.owned_partitions = list(owned)
            sub.generation_id = self.membership.generation.generation_id
            sub.rack_id = self._rack_id
            protocols.append((assignor.name, encode_subscription(sub)))
        return protocols

    def _join_request(self, node_id: int, now_ms: int) -> UnsentRequest:
        protocols = self._protocols()
        member_id = self.membership.generation.member_id
        reason = self.membership.rejoin_reason
        self.membership.on_join_sent()
        self._in_flight = "join"
        request_cls = group_requests.JoinGroupRequest

        def build(max_version: int) -> tuple[Any, int]:
            version = _capped(request_cls, max_version)
            return group_requests.build_join_group(
                version, self.group_id, member_id, self.membership.group_instance_id, self._session_timeout_ms,
                self._rebalance_timeout_ms, PROTOCOL_TYPE, protocols, reason), version

        unsent = UnsentRequest(RequestBuilder(request_cls, build), node_id)
        unsent.timeout_ms = max(self._request_timeout_ms, self._rebalance_timeout_ms + JOIN_GROUP_TIMEOUT_MARGIN_MS)
        return unsent.when_complete(lambda response, error: self._on_join_response(response, error))

    def _on_join_response(self, response: Any, error: Optional[BaseException]) -> None:
        self._in_flight = None
        if self._leave_future is not None or self._fatal is not None:
            return
        now = self._time_ms()
        if error is not None:
            self._transport_error(error, now)
            self.membership.state = MemberState.UNJOINED
            self._next_join_ms = now + self._retry_backoff_ms
            return
        verdict = self.membership.handle_join_response(response)
        if not verdict.ok:
            self._retry_or_fail(verdict, now)
            return
        self._sync_round = (self.membership.generation,
                            list(response.members) if self.membership.is_leader else None)
        self._wakeup()

    def _try_sync(self, node_id: int, now_ms: int, unsent: list[UnsentRequest]) -> None:
        """Send the SyncGroup: a follower's at once, empty; the leader's with the group's
        assignor's result once a metadata update asked for now arrived and every member's
        topics have metadata (each wait up to a request timeout). The leader assigns on
        fresh partition counts, as librdkafka's does (Java refreshes only for new topics);
        its SyncGroup then also comes after the followers', which librdkafka's mock cluster
        needs (it refuses a follower's SyncGroup that comes after the leader's)."""
        assert self._sync_round is not None
        generation, members = self._sync_round
        if members is None:
            self._sync_round = None
            unsent.append(self._sync_request(node_id, generation, {}))
            return
        group = []
        topics: set[str] = set()
        for member in members:
            sub = decode_subscription(bytes(member.metadata))
            sub.group_instance_id = member.group_instance_id
            group.append(GroupMember(member.member_id, member.group_instance_id, sub))
            topics.update(sub.topics)
        if self._metadata_deadline_ms is None:
            if self.subscriptions.group_subscribe(topics):
                interest = self._cluster.topics_of_interest()
                if interest is not None and not topics <= interest:
                    self._cluster.set_topics(interest | topics)
            self._metadata_deadline_ms = now_ms + self._request_timeout_ms
            self._metadata_seen = self._cluster.update_count
            self._request_metadata_update()
        fresh = self._cluster.update_count > self._metadata_seen and \
            all(self._cluster.partitions_for_topic(t) for t in topics)
        if not fresh and now_ms < self._metadata_deadline_ms:
            self._next_join_ms = now_ms + self._retry_backoff_ms
            return
        self._metadata_deadline_ms = None
        self._sync_round = None
        self._assignment_snapshot = self._metadata_snapshot()
        assignor = self._assignor(generation.protocol_name)
        log.info("Group %s: leader %s assigning %d members with %s", self.group_id, generation.member_id,
                 len(group), generation.protocol_name)
        result = assignor.assign(self._cluster, group)
        encoded = {m.member_id: encode_assignment(coerce_assignment(result.get(m.member_id, []))) for m in group}
        unsent.append(self._sync_request(node_id, generation, encoded))

    def _assignor(self, name: Optional[str]) -> Any:
        for assignor in self._assignors:
            if assignor.name == name:
                return assignor
        raise errors.IllegalStateError("the group chose protocol {!r}, which this consumer does not have "
                                       "(configured: {})".format(name, [a.name for a in self._assignors]))

    def _sync_request(self, node_id: int, generation: Generation, assignments: dict[str, bytes]) -> UnsentRequest:
        self._in_flight = "sync"
        request_cls = group_requests.SyncGroupRequest

        def build(max_version: int) -> tuple[Any, int]:
            version = _capped(request_cls, max_version)
            return group_requests.build_sync_group(
                version, self.group_id, generation.generation_id, generation.member_id,
                self.membership.group_instance_id, PROTOCOL_TYPE, generation.protocol_name, assignments), version

        unsent = UnsentRequest(RequestBuilder(request_cls, build), node_id)
        return unsent.when_complete(lambda response, error: self._on_sync_response(generation, response, error))

    def _on_sync_response(self, generation: Generation, response: Any, error: Optional[BaseException]) -> None:
        self._in_flight = None
        if self._leave_future is not None or self._fatal is not None:
            return
        now = self._time_ms()
        if error is not None:
            self._transport_error(error, now)
            self.membership.state = MemberState.UNJOINED
            self.membership.request_rejoin("SyncGroup failed: {}".format(error))
            self._next_join_ms = now + self._retry_backoff_ms
            return
        verdict = self.membership.handle_sync_response(response, generation)
        if not verdict.ok:
            self._retry_or_fail(verdict, now)
            return
        self.heartbeat.reset_session_timeout(now)
        self.heartbeat.fail_heartbeat(now - self._retry_backoff_ms)  # next heartbeat due now
        self._commit.on_member_epoch_updated(generation.generation_id, generation.member_id)
        self._on_join_complete(generation, bytes(response.assignment))

    def _on_join_complete(self, generation: Generation, assignment_bytes: bytes) -> None:
        """Java's onJoinComplete: apply the assignment; cooperative: revoke what moved away
        (then join again to hand it over); the assigned callback runs before the new
        partitions are fetched."""
        self._needs_join_prepare = True
        assignment = decode_assignment(assignment_bytes)
        assigned = list(dict.fromkeys(TopicPartition(*tp) for tp in assignment.partitions()))
        subscribed = self.subscriptions.subscription()
        stray = [tp for tp in assigned
                 if tp.topic not in subscribed and not self.subscriptions.matches_subscribed_pattern(tp.topic)]
        if stray:
            self.membership.request_rejoin("assigned partitions {} are not in the subscription".format(stray))
            return
        self._assignor(generation.protocol_name).on_assignment(assignment, generation.generation_id)
        owned = self.subscriptions.assigned_partitions()
        if self.rebalance_protocol is RebalanceProtocol.COOPERATIVE:
            added = [tp for tp in assigned if tp not in owned]
            revoked = owned - set(assigned)
        else:
            added, revoked = assigned, set()
        log.info("Group %s: generation %d assignment %s (added %s)", self.group_id, generation.generation_id,
                 sorted(assigned), sorted(added))

        def assign(_error: Optional[BaseException]) -> None:
            self.subscriptions.assign_from_subscribed_awaiting_callback(sorted(assigned), sorted(added))
            self._then(self._listener(Method.ON_PARTITIONS_ASSIGNED, added, always=True),
                       lambda _e: self.subscriptions.enable_partitions_awaiting_callback(added))

        if revoked:
            log.info("Group %s: revoking %s (moved to other members)", self.group_id, sorted(revoked))
            self.subscriptions.mark_pending_revocation(revoked)

            def after_revoke(_error: Optional[BaseException]) -> None:
                # The partitions can only go to their new owner in a second rebalance.
                self.membership.request_rejoin("partitions were revoked; rejoining to hand them over")
                assign(None)

            self._then(self._commit_before_revocation(),
                       lambda _e: self._then(self._listener(Method.ON_PARTITIONS_REVOKED, revoked), after_revoke))
        else:
            assign(None)

    # --- heartbeats and leaving -------------------------------------------------------------

    def _heartbeat_request(self, node_id: int, now_ms: int) -> UnsentRequest:
        generation = self.membership.generation
        self.heartbeat.sent_heartbeat(now_ms)
        request_cls = group_requests.HeartbeatRequest

        def build(max_version: int) -> tuple[Any, int]:
            version = _capped(request_cls, max_version)
            return group_requests.build_heartbeat(version, self.group_id, generation.generation_id,
                                                  generation.member_id, self.membership.group_instance_id), version

        unsent = UnsentRequest(RequestBuilder(request_cls, build), node_id)
        return unsent.when_complete(lambda response, error: self._on_heartbeat_response(generation, response, error))

    def _on_heartbeat_response(self, generation: Generation, response: Any, error: Optional[BaseException]) -> None:
        now = self._time_ms()
        if error is not None:
            self._transport_error(error, now)
            self.heartbeat.fail_heartbeat(now)
            return
        if self._leave_future is not None or self._fatal is not None:
            self.heartbeat.received_heartbeat(now)
            return
        verdict = self.membership.handle_heartbeat_response(response.error_code, generation)
        if verdict.ok or isinstance(verdict.error, errors.RebalanceInProgressError):
            self.heartbeat.received_heartbeat(now)  # the coordinator answered: the session lives
            return
        if verdict.fatal and verdict.error is not None:
            self._fail(verdict.error)
            return
        self.heartbeat.fail_heartbeat(now)
        if verdict.coordinator_unknown:
            self._coordinator.mark_coordinator_unknown(str(verdict.error), now)
        if self.membership.generation != generation:
            self._commit.on_member_epoch_updated(None, "")

    def _leave_now(self, coordinator: Any, reason: str, unsent: Optional[list[UnsentRequest]]) -> None:
        """Drop out of the generation; a dynamic member tells the coordinator (LeaveGroup)."""
        generation = self.membership.generation
        if not self.membership.is_static and generation.has_member_id():
            if unsent is not None and coordinator is not None:
                unsent.append(self._leave_request(coordinator.node_id, generation, reason))
            else:
                self._leave_to_send = (generation, reason)
        self.membership.on_leave(reason)
        self._commit.on_member_epoch_updated(None, "")
        self._joined_subscription = None
        self._assignment_snapshot = None
        self._needs_join_prepare = True

    def _leave_request(self, node_id: int, generation: Generation, reason: str) -> UnsentRequest:
        log.info("Group %s: member %s leaving (%s)", self.group_id, generation.member_id, reason)
        request_cls = group_requests.LeaveGroupRequest

        def build(max_version: int) -> tuple[Any, int]:
            version = _capped(request_cls, max_version)
            return group_requests.build_leave_group(version, self.group_id, generation.member_id, reason), version

        unsent = UnsentRequest(RequestBuilder(request_cls, build), node_id)
        return unsent.when_complete(lambda response, error: None)  # not awaited, as in Java

    # --- plumbing ---------------------------------------------------------------------------

    def _retry_or_fail(self, verdict: Verdict, now_ms: int) -> None:
        if verdict.fatal:
            assert verdict.error is not None
            self._fail(verdict.error)
            return
        if verdict.coordinator_unknown:
            self._coordinator.mark_coordinator_unknown(str(verdict.error), now_ms)
        if self.membership.generation.generation_id < 0:
            self._commit.on_member_epoch_updated(None, "")
        self.membership.rejoin_needed = True
        if verdict.backoff:
            self._next_join_ms = now_ms + self._retry_backoff_ms

    def _transport_error(self, error: BaseException, now_ms: int) -> None:
        self._coordinator.handle_coordinator_disconnect(error, now_ms)
        if isinstance(error, errors.KafkaError) and not error.retriable:
            log.warning("Group %s: request failed: %r", self.group_id, error)

    def _fail(self, error: BaseException) -> None:
        log.error("Group %s: %s", self.group_id, error)
        self._fatal = error
        self.membership.state = MemberState.UNJOINED
        self._events.add(ErrorEvent(error))

    def _commit_before_revocation(self) -> Future[Any]:
        """The consumed positions committed before partitions are given up (auto-commit)."""
        return self._commit.maybe_auto_commit_sync_before_rebalance(self._time_ms() + self._rebalance_timeout_ms)

    def _listener(self, method: ConsumerRebalanceListenerMethodName, partitions: Iterable[TopicPartition],
                  always: bool = False) -> Future[Any]:
        return request_listener_callback(self._events, self.subscriptions.rebalance_listener is not None,
                                         method, partitions, always)

    def _then(self, future: Future[Any], step: Callable[[Optional[BaseException]], None]) -> None:
        """Run ``step(error)`` when ``future`` completes; the rebalance waits until then."""
        self._waiting = future

        def done(f: Future[Any]) -> None:
            if self._waiting is f:
                self._waiting = None
            error = f.exception()
            if error is not None:
                log.warning("Group %s: %s", self.group_id, error)
            step(error)
            self._wakeup()

        future.add_done_callback(done)


def install_classic_group(resources: Resources, settings: EngineConfig, subscriptions: Any,
                          background_event_handler: BackgroundEventHandler, time_ms: Callable[[], int]
                          ) -> ClassicGroupManager:
    """Replace the KIP-848 heartbeat and membership managers ``build_resources`` made with a
    ``ClassicGroupManager`` (same place in the polling order, same processor hooks)."""
    processor = resources.application_event_processor
    commit = processor.commit
    coordinator = processor.coordinator
    client = resources.client
    manager = ClassicGroupManager(settings, subscriptions, client.cluster, coordinator, commit,
                                  background_event_handler, client.request_metadata_update, time_ms)
    commit.group_protocol = "classic"
    replaced = (processor.heartbeat, processor.membership)
    index = min(i for i, m in enumerate(resources.request_managers) if m in replaced)
    managers = [m for m in resources.request_managers if m not in replaced]
    managers.insert(index, manager)
    resources.request_managers = managers
    processor.heartbeat = manager
    processor.membership = manager
    resources.membership_manager = manager
    return manager


