"""The classic consumer group's coordinator (Java's ``ConsumerCoordinator``).

Owns the consumer side of the classic protocol on top of ``AbstractCoordinator``: the
JoinGroup protocols (one per configured assignor, ConsumerProtocol subscription v3 with the
owned partitions, generation and rack), the leader's assignment (decode every member's
subscription, run the group's chosen assignor, encode each result), applying an assignment
(eager: everything was revoked before joining; cooperative: only the partitions that moved
are revoked, then a second rebalance hands them out), the rebalance listener callbacks
(run here, on the application thread, inside ``poll()``), auto-commit (on its interval,
before any revocation and on close), commits with the current generation and member id,
and the subscription triggers for a rejoin (a changed topic list, a new topic matching the
pattern, a partition-count change seen by the leader).

The interface ``ClassicKafkaConsumer`` calls (its ``ClassicCoordinator`` protocol):
``poll(timeout_ms, wait_for_join_group)``, ``time_to_next_poll(now_ms)``,
``fetch_committed_offsets``, ``commit_offsets_sync``, ``commit_offsets_async``,
``maybe_auto_commit_offsets_async(now_ms)``, ``on_subscribe()``, ``maybe_leave_group(reason)``,
``group_metadata()``, ``close(timeout_ms, autocommit)``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from kproto import errors, structs
from kproto.consumer.classic.group_offsets import GroupOffsets
from kproto.consumer.classic.metadata_wait import await_metadata_update
from kproto.consumer.engine_config import EngineConfig
from kproto.consumer.offsets.commit import AutoCommitState, CommitResult
from kproto.consumer.rebalance_listener_invoker import ConsumerRebalanceListenerInvoker, maybe_wrap_as_kafka_error
from kproto.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

from .abstract_coordinator import AbstractCoordinator
from .assignors.abstract import GroupMember, RebalanceProtocol
from .assignors.resolve import resolve_assignors, select_rebalance_protocol
from .consumer_protocol import (
    coerce_assignment,
    coerce_subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from .group_membership import Generation, MemberState

if TYPE_CHECKING:
    from kproto.consumer.subscription_state import SubscriptionState
    from kproto.net.client import NetworkClient

log = logging.getLogger("kproto.consumer.classic")

PROTOCOL_TYPE = "consumer"



def metadata_snapshot(subscriptions: Any, cluster: Any) -> dict[str, int]:
    """Topic -> partition count of the subscribed topics the cluster metadata knows (Java's
    ConsumerCoordinator.MetadataSnapshot): a change of it after a join means rejoin."""
    snapshot = {}
    for topic in subscriptions.metadata_topics():
        partitions = cluster.partitions_for_topic(topic)
        if partitions:
            snapshot[topic] = len(partitions)
    return snapshot

class _CommitIdentity:
    """What a commit carries, read afresh for every attempt (GroupOffsets' ``Membership``)."""

    def __init__(self, coordinator: "ConsumerCoordinator") -> None:
        self._coordinator = coordinator

    @property
    def generation_id_or_member_epoch(self) -> int:
        return self._coordinator.generation().generation_id

    @property
    def member_id(self) -> str:
        return self._coordinator.generation().member_id

    @property
    def group_instance_id(self) -> Optional[str]:
        return self._coordinator.membership.group_instance_id


class ConsumerCoordinator(AbstractCoordinator):
    """See the module docstring. Built as ``ConsumerCoordinator(client, subscriptions, settings)``."""

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState, settings: EngineConfig, *,
                 clock: Optional[Callable[[], float]] = None) -> None:
        group = settings.group
        super().__init__(client, group.group_id or "", group_instance_id=group.group_instance_id,
                         session_timeout_ms=group.session_timeout_ms,
                         rebalance_timeout_ms=group.rebalance_timeout_ms,
                         heartbeat_interval_ms=group.heartbeat_interval_ms,
                         retry_backoff_ms=group.retry_backoff_ms,
                         retry_backoff_max_ms=group.retry_backoff_max_ms,
                         request_timeout_ms=group.request_timeout_ms, clock=clock)
        self.membership.event_source = settings.client_id
        self._subscriptions = subscriptions
        self._listener_invoker = ConsumerRebalanceListenerInvoker(
            subscriptions, self._clock, lambda method, ms: self._record("record_listener", method, ms))
        self._cluster = client.cluster
        self._assignors = resolve_assignors(settings.partition_assignment_strategy)
        self.rebalance_protocol = select_rebalance_protocol(self._assignors)
        self._rack_id = group.rack_id
        self._exclude_internal_topics = settings.exclude_internal_topics
        self._require_stable = group.require_stable
        self._default_commit_callback = settings.default_offset_commit_callback
        self._auto_commit: Optional[AutoCommitState] = None
        if group.enable_auto_commit:
            self._auto_commit = AutoCommitState(group.auto_commit_interval_ms, int(self._clock()),
                                                group.retry_backoff_ms)
        self._offsets = GroupOffsets(client, self.group_id, self, retry_backoff_ms=group.retry_backoff_ms,
                                     clock=self._clock)
        self._identity = _CommitIdentity(self)
        self._joined_subscription: Optional[frozenset[str]] = None
        # The leader's view of partition counts when it assigned; a change means rejoin.
        self._assignment_snapshot: Optional[dict[str, int]] = None

    # --- the poll loop ---------------------------------------------------------------------

    def poll(self, timeout_ms: float, wait_for_join_group: bool = True) -> bool:
        """Java's ConsumerCoordinator.poll: rediscover, (re)join, run callbacks, auto-commit.

        When partitions are already assigned and ``wait_for_join_group`` is False, nothing
        here blocks: a lookup or join in progress advances on later calls while fetching
        continues. Returns False when the group work did not finish in time.
        """
        now = self._clock()
        deadline = now + max(0.0, timeout_ms)
        if self._subscriptions.has_auto_assigned_partitions():
            self.poll_heartbeat(now)
            self._update_pattern_subscription()
            keep_fetching = not wait_for_join_group and self._subscriptions.num_assigned_partitions() > 0
            block = 0.0 if keep_fetching else max(0.0, deadline - now)
            if self.coordinator_unknown() and self.ensure_coordinator_ready(block) is None:
                return False
            if self.rejoin_needed_or_pending():
                if self._join is None:
                    self._await_subscription_metadata(self._clock() + block)
                if not self.ensure_active_group(max(0.0, min(deadline, self._clock() + block) - self._clock())):
                    return False
        self.maybe_auto_commit_offsets_async(self._clock())
        return True

    def time_to_next_poll(self, now_ms: float) -> float:
        """Ms until ``poll`` has work: the next auto-commit or heartbeat, or soon while joining."""
        wait = self.time_to_next_heartbeat(now_ms)
        if self._auto_commit is not None and self._subscriptions.num_assigned_partitions():
            wait = min(wait, self._auto_commit.remaining_ms(int(now_ms)))
        if self._join is not None or self.discovery.find_future is not None:
            wait = min(wait, self.retry_backoff_ms)
        return wait

    def on_subscribe(self) -> None:
        """After ``subscribe()``: match a pattern against the metadata we already have."""
        self._update_pattern_subscription()

    def _update_pattern_subscription(self) -> None:
        if not self._subscriptions.has_pattern_subscription() or self._cluster.update_count == 0:
            return
        matched = {t for t in self._cluster.topics(self._exclude_internal_topics)
                   if self._subscriptions.matches_subscribed_pattern(t)}
        if self._subscriptions.subscribe_from_pattern(matched):
            log.info("Group %s: pattern subscription now matches %s", self.group_id, sorted(matched))

    def _metadata_snapshot(self) -> dict[str, int]:
        return metadata_snapshot(self._subscriptions, self._cluster)

    def _await_subscription_metadata(self, deadline: float) -> None:
        """Before joining, wait (until ``deadline``) for metadata of every subscribed topic."""
        missing = {t for t in self._subscriptions.subscription() if not self._cluster.partitions_for_topic(t)}
        if not missing and (not self._subscriptions.has_pattern_subscription() or self._cluster.update_count):
            return
        await_metadata_update(self._client, deadline, self._clock, self.retry_backoff_ms, self._app_poll)
        self._update_pattern_subscription()

    def rejoin_needed_or_pending(self) -> bool:
        if not self._subscriptions.has_auto_assigned_partitions():
            return False
        if super().rejoin_needed_or_pending():
            return True
        if self._joined_subscription is not None and frozenset(self._subscriptions.subscription()) != \
                self._joined_subscription:
            self.request_rejoin("the subscription changed from {} to {}".format(
                sorted(self._joined_subscription), sorted(self._subscriptions.subscription())))
            return True
        if self._assignment_snapshot is not None and self._assignment_snapshot != self._metadata_snapshot():
            self.request_rejoin("the partitions of the subscribed topics changed")
            return True
        return False

    # --- the protocol -------------------------------------------------------------------------

    def protocol_type(self) -> str:
        return PROTOCOL_TYPE

    def metadata(self) -> list[tuple[str, bytes]]:
        topics = sorted(self._subscriptions.subscription())
        self._joined_subscription = frozenset(topics)
        owned = sorted(self._subscriptions.assigned_partitions())
        generation_id = self.membership.generation.generation_id
        protocols = []
        for assignor in self._assignors:
            sub = coerce_subscription(assignor.metadata(topics))
            sub.owned_partitions = list(owned)
            sub.generation_id = generation_id
            sub.rack_id = self._rack_id
            protocols.append((assignor.name, encode_subscription(sub)))
        return protocols

    def _assignor(self, name: Optional[str]) -> Any:
        for assignor in self._assignors:
            if assignor.name == name:
                return assignor
        raise errors.IllegalStateError("the group chose protocol {!r}, which this consumer does not have "
                                       "(configured: {})".format(name, [a.name for a in self._assignors]))

    def perform_assignment(self, leader_id: str, protocol: Optional[str], members: list[Any],
                           skip_assignment: bool) -> dict[str, bytes]:
        assignor = self._assignor(protocol)
        group = []
        topics: set[str] = set()
        for member in members:
            sub = decode_subscription(bytes(member.metadata))
            sub.group_instance_id = member.group_instance_id
            group.append(GroupMember(member.member_id, member.group_instance_id, sub))
            topics.update(sub.topics)
        # The leader needs metadata of every member's topics, not only its own.
        missing = any(not self._cluster.partitions_for_topic(t) for t in topics)
        if self._subscriptions.group_subscribe(topics) or missing:
            interest = self._cluster.topics_of_interest()  # None: all topics already
            if interest is not None:
                # Added to what the consumer tracks (its own lookups stay).
                self._cluster.set_topics(interest | topics)
            if missing:
                # Java waits for fresh metadata here; kproto waits only when a topic is
                # unknown (the assignment needs its partitions): this may run on the
                # heartbeat thread (JoinGroup callback), and a count that changes later
                # is caught by the snapshot below (rejoin). Plain client polls.
                await_metadata_update(self._client, self._clock() + self.request_timeout_ms, self._clock,
                                      self.retry_backoff_ms)
            else:
                self._client.request_metadata_update()
        self._assignment_snapshot = self._metadata_snapshot()
        if skip_assignment:
            # KIP-814: a static leader rejoining keeps the group's assignment; send none.
            return {}
        log.info("Group %s: leader %s assigning %d members with %s", self.group_id, leader_id, len(group), protocol)
        result = assignor.assign(self._cluster, group)
        encoded = {}
        for member in group:
            assignment = coerce_assignment(result.get(member.member_id, []))
            encoded[member.member_id] = encode_assignment(assignment)
        return encoded

    def on_join_prepare(self, generation: Generation) -> None:
        """Before a (re)join: auto-commit, then revoke (eager: all; cooperative: unsubscribed
        topics only) or, if the generation was lost, report the partitions lost."""
        owned = self._subscriptions.assigned_partitions()
        lost = generation.generation_id < 0 or not generation.has_member_id()
        failure = None
        if not lost and owned:
            self._auto_commit_sync_before_revocation(owned)
        if lost:
            if owned:
                log.info("Group %s: giving up %s as lost (generation was reset)", self.group_id, sorted(owned))
                self._subscriptions.mark_pending_revocation(owned)
                failure = self._listener_invoker.invoke_partitions_lost(owned)
                self._subscriptions.assign_from_subscribed([])
        elif self.rebalance_protocol is RebalanceProtocol.EAGER:
            self._subscriptions.mark_pending_revocation(owned)
            failure = self._listener_invoker.invoke_partitions_revoked(owned)
            self._subscriptions.assign_from_subscribed([])
        else:
            subscribed = self._subscriptions.subscription()
            revoked = {tp for tp in owned if tp.topic not in subscribed}
            if revoked:
                self._subscriptions.mark_pending_revocation(revoked)
                failure = self._listener_invoker.invoke_partitions_revoked(revoked)
                self._subscriptions.assign_from_subscribed([tp for tp in self._subscriptions.assigned_partitions_list()
                                                            if tp not in revoked])
        self._assignment_snapshot = None
        self._subscriptions.reset_group_subscription()
        if failure is not None:
            raise maybe_wrap_as_kafka_error(failure)

    def on_join_complete(self, generation: Generation, assignment_bytes: bytes) -> None:
        assignment = decode_assignment(assignment_bytes)
        assigned = list(dict.fromkeys(TopicPartition(*tp) for tp in assignment.partitions()))
        subscribed = self._subscriptions.subscription()
        stray = [tp for tp in assigned
                 if tp.topic not in subscribed and not self._subscriptions.matches_subscribed_pattern(tp.topic)]
        if stray:
            # Assigned against a subscription we no longer have: join again with the new one.
            self.request_rejoin("assigned partitions {} are not in the subscription".format(stray))
            return
        self._assignor(generation.protocol_name).on_assignment(assignment, generation.generation_id)
        if self._auto_commit is not None:
            self._auto_commit.reset(int(self._clock()))
        owned = self._subscriptions.assigned_partitions()
        failure = None
        if self.rebalance_protocol is RebalanceProtocol.COOPERATIVE:
            added = [tp for tp in assigned if tp not in owned]
            revoked = owned - set(assigned)
            if revoked:
                log.info("Group %s: revoking %s (moved to other members)", self.group_id, sorted(revoked))
                self._subscriptions.mark_pending_revocation(revoked)
                self._auto_commit_sync_before_revocation(revoked)
                failure = self._listener_invoker.invoke_partitions_revoked(revoked)
                # The partitions can only go to their new owner in a second rebalance.
                self.request_rejoin("partitions were revoked; rejoining to hand them over")
        else:
            added = assigned
        self._subscriptions.assign_from_subscribed(assigned)
        log.info("Group %s: generation %d assignment %s (added %s)", self.group_id, generation.generation_id,
                 sorted(assigned), sorted(added))
        assigned_failure = self._listener_invoker.invoke_partitions_assigned(added)
        failure = failure or assigned_failure  # the first one is raised, as Java's firstException
        if failure is not None:
            raise maybe_wrap_as_kafka_error(failure)

    # --- commits ----------------------------------------------------------------------------------

    def _membership_for_commit(self) -> Optional[_CommitIdentity]:
        """The identity commits carry: the generation when stable, none under assign()."""
        if not self._subscriptions.has_auto_assigned_partitions():
            return None
        if self.member_state() is not MemberState.STABLE:
            if self.rejoin_needed_or_pending():
                raise errors.RebalanceInProgressError(
                    "offset commit cannot be completed since group {!r} is rebalancing; poll() to complete the "
                    "rebalance, then commit again".format(self.group_id))
            raise errors.CommitFailedError("offset commit cannot be completed: this consumer is not an active "
                                           "member of group {!r}".format(self.group_id))
        return self._identity

    def _commit_result_handler(self) -> Callable[[CommitResult], None]:
        """``_on_commit_result``, also recording commit-latency for every answer: timed from
        the call (GroupOffsets does the sending), then from the previous answer for a retry."""
        if self.sensors is None:
            return self._on_commit_result
        since = [self._clock()]

        def on_result(result: CommitResult) -> None:
            now = self._clock()
            self._record("record_commit", now - since[0])
            since[0] = now
            self._on_commit_result(result)

        return on_result

    def _on_commit_result(self, result: CommitResult) -> None:
        if result.reset_generation:
            with self._lock:
                self.membership.reset_generation("OffsetCommit: {}".format(result.error))
        elif result.request_rejoin:
            self.request_rejoin("OffsetCommit: {}".format(result.error))

    def commit_offsets_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float) -> None:
        """Commit and wait; retriable errors are retried until ``timeout_ms``."""
        if not offsets:
            return
        self._offsets.commit_offsets_sync(offsets, timeout_ms, self._membership_for_commit(),
                                          on_result=self._commit_result_handler())

    def commit_offsets_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                             callback: Optional[Callable[[Any, Any], Any]] = None) -> Any:
        """Send a commit; ``callback(offsets, offsets_or_exception)`` runs from a later poll."""
        offsets = dict(offsets)

        def done(sent: Any, error: Optional[BaseException]) -> None:
            if callback is not None:
                callback(sent, error if error is not None else sent)

        try:
            membership = self._membership_for_commit()
        except errors.KafkaError as exc:
            done(offsets, exc)
            return None
        if not offsets:
            done(offsets, None)
            return None
        if self.coordinator_unknown():
            self.lookup_coordinator()
        return self._offsets.commit_offsets_async(offsets, done, membership,
                                                  on_result=self._commit_result_handler())

    def maybe_auto_commit_offsets_async(self, now_ms: float) -> None:
        """Commit the consumed positions when the auto-commit interval has passed."""
        state = self._auto_commit
        if state is None or not state.can_send_auto_commit(int(now_ms)):
            return
        offsets = self._subscriptions.all_consumed()
        if not offsets:
            state.reset(int(now_ms))
            return
        state.on_sent(int(now_ms))

        def completed(sent: Any, result: Any) -> None:
            error = result if isinstance(result, BaseException) else None
            state.on_completed(int(self._clock()), error)
            if error is not None:
                log.info("Group %s: auto-commit of %s failed: %s", self.group_id, sent, error)
            if self._default_commit_callback is not None:
                self._default_commit_callback(sent, result)

        self.commit_offsets_async(offsets, completed)

    def _auto_commit_sync_before_revocation(self, partitions: Any) -> None:
        """Best effort: commit the positions of partitions about to be given up."""
        if self._auto_commit is None:
            return
        offsets = {tp: om for tp, om in self._subscriptions.all_consumed().items() if tp in partitions}
        if not offsets:
            return
        try:
            self.commit_offsets_sync(offsets, min(self.rebalance_timeout_ms, self.request_timeout_ms))
        except errors.KafkaError as exc:
            log.warning("Group %s: auto-commit before revocation failed: %s", self.group_id, exc)

    def fetch_committed_offsets(self, partitions: Any, timeout_ms: float
                                ) -> Optional[dict[TopicPartition, Optional[OffsetAndMetadata]]]:
        """OffsetFetch for the group; None when it did not finish in time."""
        try:
            return self._offsets.fetch_committed_offsets(partitions, timeout_ms, require_stable=self._require_stable)
        except errors.KafkaTimeoutError:
            return None

    # --- leaving and closing -------------------------------------------------------------------

    def on_leave_prepare(self, commit: bool = True) -> None:
        """Before leaving (unsubscribe/close): auto-commit (if on and ``commit``), then revoke
        through the listener (or report the partitions lost if the generation is gone)."""
        if not self._subscriptions.has_auto_assigned_partitions():
            return
        owned = self._subscriptions.assigned_partitions()
        if not owned:
            return
        generation = self.generation()
        self._subscriptions.mark_pending_revocation(owned)
        if generation.generation_id < 0 or not generation.has_member_id():
            failure = self._listener_invoker.invoke_partitions_lost(owned)
        else:
            if commit:
                self._auto_commit_sync_before_revocation(owned)
            failure = self._listener_invoker.invoke_partitions_revoked(owned)
        self._subscriptions.assign_from_subscribed([])
        if failure is not None:
            raise maybe_wrap_as_kafka_error(failure)

    def maybe_leave_group(self, reason: str) -> Any:
        """Unsubscribe: revoke through the listener, then LeaveGroup (dynamic members only)."""
        try:
            self.on_leave_prepare()
        finally:
            future = self.leave_group(reason)
            self._joined_subscription = None
            self._assignment_snapshot = None
            if future is not None:
                # Java's pollNoWakeup: write the LeaveGroup out now; nobody may poll again soon
                # (an unsubscribed consumer's poll() refuses), and the answer is not awaited.
                self._client.poll(timeout_ms=0)
        return future

    def close(self, timeout_ms: float, autocommit: bool = True) -> None:
        """Final auto-commit (if on and ``autocommit``), revoke, leave, stop the heartbeat thread."""
        deadline = self._clock() + max(0.0, timeout_ms)
        try:
            if self._subscriptions.has_auto_assigned_partitions():
                self.on_leave_prepare(commit=autocommit)  # commits, then on_partitions_revoked
            elif autocommit and self._auto_commit is not None:
                offsets = self._subscriptions.all_consumed()  # assign(): commit outside the group
                if offsets:
                    self.commit_offsets_sync(offsets, max(0.0, deadline - self._clock()))
        except errors.KafkaError as exc:
            log.warning("Group %s: closing: %s", self.group_id, exc)
        finally:
            self._listener_invoker.close()
            self.close_coordinator(max(0.0, deadline - self._clock()))

    def group_metadata(self) -> ConsumerGroupMetadata:
        generation = self.generation()
        state = self.membership.state
        return ConsumerGroupMetadata(
            self.group_id, generation.generation_id, generation.member_id, self.membership.group_instance_id,
            structs.STABLE if state is MemberState.STABLE
            else structs.UNJOINED if state is MemberState.UNJOINED else structs.REBALANCING)
