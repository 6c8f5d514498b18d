"""Group membership over the network for the classic protocol (Java's ``AbstractCoordinator``).

Owns the JoinGroup -> SyncGroup exchange, Heartbeat and LeaveGroup requests, the heartbeat
thread's work (``heartbeat_step``) and the application thread's blocking waits (for the
coordinator: ``ensure_coordinator_ready``; for a join: ``join_group_if_needed``). The state
itself (member state, generation, rejoin flag, answer verdicts) is the sans-IO
``GroupMembership``; the timers are the sans-IO ``Heartbeat``; the known coordinator and the
FindCoordinator lookup are ``CoordinatorDiscovery`` (``coordinator_discovery``), whose calls
this class passes on under their Java names. Subclasses (``ConsumerCoordinator``) supply the
protocol: its type and per-protocol metadata, the leader's assignment, and what happens
before and after a join.

Threading: JoinGroup/SyncGroup and the subclass hooks run on the application thread (inside
``ensure_active_group``); Heartbeat, FindCoordinator and the poll-timeout LeaveGroup may also
be sent from the heartbeat thread. ``_lock`` (re-entrant, shared with ``CoordinatorDiscovery``)
guards the membership state, the timers and the known coordinator; it is never held across
``client.poll`` (response callbacks take it, and they may run on either thread), nor while
user callbacks run.

A join in progress is kept in ``_join`` (the in-flight request's future), so a ``poll()``
with a short timeout resumes it on the next call instead of starting over.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

from kproto import errors
from kproto.messages import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest
from kproto.messages.heartbeat import HeartbeatResponse
from kproto.messages.join_group import JoinGroupResponse
from kproto.messages.sync_group import SyncGroupResponse
from kproto.net.future import Future
from kproto.clock import monotonic_ms

from .coordinator_discovery import CoordinatorDiscovery
from .group_requests import (
    build_heartbeat,
    build_join_group,
    build_leave_group,
    build_sync_group,
    choose_version,
)
from .group_membership import Generation, GroupMembership, MemberState, Verdict
from .heartbeat import Heartbeat

if TYPE_CHECKING:
    from kproto.net.client import NetworkClient

log = logging.getLogger("kproto.consumer.classic")

# How often the heartbeat thread drives the network while a join round is out.
_JOIN_POLL_INTERVAL_MS = 10.0
# Java gives JoinGroup the rebalance timeout plus this much, since the broker holds it that long.
_JOIN_GROUP_TIMEOUT_MARGIN_MS = 5000


class _JoinRoundFailed(Exception):
    """A join round ended with an error answer; ``verdict`` says what to do next."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(str(verdict.error))
        self.verdict = verdict


class AbstractCoordinator:
    """Membership of one classic group; see the module docstring."""

    def __init__(self, client: NetworkClient, group_id: str, *, group_instance_id: Optional[str] = None,
                 session_timeout_ms: int = 45000, rebalance_timeout_ms: int = 300000,
                 heartbeat_interval_ms: int = 3000, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 1000, request_timeout_ms: int = 30000,
                 clock: Optional[Callable[[], float]] = None) -> None:
        self._client = client
        self.group_id = group_id
        self._clock = clock or monotonic_ms
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._lock = threading.RLock()
        self.membership = GroupMembership(group_id, group_instance_id)
        self.heartbeat = Heartbeat(session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                                   max_poll_interval_ms=rebalance_timeout_ms, retry_backoff_ms=retry_backoff_ms,
                                   now_ms=self._clock())
        self.discovery = CoordinatorDiscovery(
            client, group_id, lock=self._lock, clock=self._clock, retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms, on_fatal_error=self._set_fatal_error,
            # Found (again): the session timer restarts, there was no one to heartbeat to.
            on_discovered=lambda: self.heartbeat.reset_session_timeout(self._clock()))
        self._join: Any = None  # the Future of the join round in progress
        self._next_join_ms = 0.0  # no JoinGroup before (retry_backoff_ms after the last one)
        self._need_join_prepare = True
        self._heartbeat_thread: Any = None
        self._heartbeat_future: Any = None
        self._leave_future: Any = None
        self._outstanding_since: Optional[float] = None  # heartbeat thread: request out since
        # A fatal error seen in a callback or on the heartbeat thread, raised on the application thread.
        self._fatal_error: Optional[BaseException] = None
        self._closing = False
        #: Set by the consumer (its ``maybe_trigger_wakeup``): called around every blocking
        #: wait on the application thread, so ``wakeup()`` interrupts a long join.
        self.check_wakeup: Optional[Callable[[], None]] = None
        #: The consumer-coordinator-metrics (``kproto.metrics.consumer_metrics.CoordinatorMetrics``;
        #: None: metrics disabled), recorded from the response callbacks on either thread.
        self.sensors: Any = None
        self._sent_ms: dict[str, float] = {}  # request kind -> when it left (latencies)

    def _set_fatal_error(self, exc: BaseException) -> None:
        with self._lock:
            self._fatal_error = exc

    def _record(self, method: str, *args: Any) -> None:
        """``self.sensors.<method>(*args)`` when metrics are on."""
        if self.sensors is not None:
            getattr(self.sensors, method)(*args)

    def _latency(self, kind: str, ok: bool) -> tuple[Any, ...]:
        """``(ms since the request of this kind left,)`` for an ok answer, else ()."""
        now = self._clock()
        return (now - self._sent_ms.get(kind, now),) if ok else ()

    # --- hooks for the subclass ------------------------------------------------------------

    def protocol_type(self) -> str:
        raise NotImplementedError

    def metadata(self) -> list[tuple[str, bytes]]:
        """(protocol name, metadata bytes) for each supported protocol, preferred first."""
        raise NotImplementedError

    def on_join_prepare(self, generation: Generation) -> None:
        """Before (re)joining; ``generation`` is the one being left (NO_GENERATION if lost)."""

    def perform_assignment(self, leader_id: str, protocol: Optional[str], members: list[Any],
                           skip_assignment: bool) -> dict[str, bytes]:
        """Leader only: member id -> assignment bytes."""
        raise NotImplementedError

    def on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        """After SyncGroup gave this member its assignment."""

    # --- coordinator discovery (``CoordinatorDiscovery``) -----------------------------------

    @property
    def coordinator_id(self) -> Optional[Any]:
        """The coordinator's connection (node) id; None while it is unknown."""
        return self.discovery.coordinator_id

    def coordinator_unknown(self) -> bool:
        """No coordinator, or its connection failed (then it is forgotten and looked up again)."""
        return self.discovery.coordinator_unknown()

    def mark_coordinator_unknown(self, reason: str, *, cause: Optional[BaseException] = None) -> None:
        """Forget the coordinator and close its connection, unless ``cause`` says the
        connection is gone already (a connection error or request timeout, as Java's
        ``markCoordinatorUnknown(isDisconnected=true)`` after a DisconnectException)."""
        disconnected = isinstance(cause, (errors.KafkaConnectionError, errors.RequestTimeoutError))
        self.discovery.mark_coordinator_unknown(reason, disconnected=disconnected)

    def lookup_coordinator(self) -> Optional[Any]:
        """Send FindCoordinator unless one is in flight or we are backing off; its Future or None."""
        return self.discovery.lookup_coordinator()

    def ensure_coordinator_ready(self, timeout_ms: float) -> Optional[Any]:
        """The coordinator's node id once known and connected, or None if time ran out.

        With ``timeout_ms`` 0 this only starts a lookup (the network client's next poll
        completes it), so the caller never blocks.
        """
        deadline = self._clock() + max(0.0, timeout_ms)
        while True:
            self._raise_fatal_error()
            if not self.coordinator_unknown():
                node = self.coordinator_id
                if node is not None and self._client.ready(node):
                    return node
                future = None
            else:
                future = self.lookup_coordinator()
            remaining = deadline - self._clock()
            if remaining <= 0:
                return None
            wait = min(remaining, self.retry_backoff_ms) if future is None else remaining
            self._app_poll(wait, future)

    # --- joining ---------------------------------------------------------------------------------

    def rejoin_needed_or_pending(self) -> bool:
        with self._lock:
            return self.membership.rejoin_needed or self._join is not None

    def request_rejoin(self, reason: str) -> None:
        with self._lock:
            self.membership.request_rejoin(reason)

    def ensure_active_group(self, timeout_ms: float) -> bool:
        """Coordinator, heartbeat thread, and a completed join; False if time ran out."""
        deadline = self._clock() + max(0.0, timeout_ms)
        if self.ensure_coordinator_ready(timeout_ms) is None:
            return False
        self._start_heartbeat_thread_if_needed()
        return self.join_group_if_needed(deadline)

    def join_group_if_needed(self, deadline: float) -> bool:
        """Java's joinGroupIfNeeded: join rounds until joined or the deadline.

        A round (JoinGroup, then at once SyncGroup, in the network callbacks as in Java, so
        a member busy between polls still syncs in time) is one Future in ``_join``; its
        outcome is handled here, on the application thread, where the subclass hooks run.
        """
        while self.rejoin_needed_or_pending():
            if self.ensure_coordinator_ready(max(0.0, deadline - self._clock())) is None:
                return False
            if self._need_join_prepare and self._join is None:
                with self._lock:
                    generation = self.membership.generation
                # Cleared first: a callback that raises must not run twice for one rebalance.
                self._need_join_prepare = False
                self.on_join_prepare(generation)
            if self._join is None:
                if not self._wait_for_join_floor(deadline):
                    return False
                self._send_join_group()
            round_future = self._join
            if round_future is None:
                continue
            while not round_future.is_done and self._clock() < deadline:
                self._app_poll(max(0.0, deadline - self._clock()), round_future)
            if not round_future.is_done:
                return False
            self._join = None
            if round_future.succeeded():
                generation, assignment = round_future.value
                log.info("Group %s: synced generation %d", self.group_id, generation.generation_id)
                # Set before the callbacks: an exception in them must not rerun
                # on_join_prepare's bookkeeping for a rebalance that already finished.
                self._need_join_prepare = True
                self.on_join_complete(generation, assignment)
                continue
            exc = round_future.exception
            with self._lock:
                if self.membership.state is not MemberState.STABLE:
                    self.membership.state = MemberState.UNJOINED
            if isinstance(exc, _JoinRoundFailed):
                if isinstance(exc.verdict.error, errors.MemberIdRequiredError):
                    # KIP-394's second step: the join with the id just handed out goes at once.
                    self._next_join_ms = 0.0
                self._apply_verdict(exc.verdict, deadline)
            elif getattr(exc, "retriable", False):
                log.info("Group %s: join round failed (%s); rediscovering the coordinator", self.group_id, exc)
                self.mark_coordinator_unknown(str(exc), cause=exc)
                self._backoff(deadline)
            else:
                assert exc is not None
                raise exc
        return True

    def _send_join_group(self) -> None:
        node = self.coordinator_id
        version = self._version(JoinGroupRequest, node)
        if version is None:
            self._client.ready(node)  # connecting: the loop waits in ensure_coordinator_ready
            return
        with self._lock:
            member_id = self.membership.generation.member_id
            request = build_join_group(
                version, self.group_id, member_id, self.membership.group_instance_id, self.session_timeout_ms,
                self.rebalance_timeout_ms, self.protocol_type(), self.metadata(), self.membership.rejoin_reason)
            self.membership.on_join_sent()
            self._sent_ms["join"] = self._clock()
            self._next_join_ms = self._sent_ms["join"] + self.retry_backoff_ms
        self._record("rebalance_started")
        log.info("Group %s: (re)joining (member %r, reason: %s)", self.group_id, member_id,
                 self.membership.rejoin_reason)
        round_future = Future()
        round_future.add_both(self._wake_application)
        self._join = round_future
        future = self._client.send(node, request, version=version,
                                   timeout_ms=max(self.request_timeout_ms,
                                                  self.rebalance_timeout_ms + _JOIN_GROUP_TIMEOUT_MARGIN_MS))
        future.add_callback(self._on_join_response, round_future)
        future.add_errback(round_future.failure)

    def _wake_application(self, _value: Any) -> None:
        # The heartbeat thread may complete a round: the application thread's select must
        # not sleep through it.
        self._client.wakeup()

    def _on_join_response(self, round_future: Any, response: JoinGroupResponse) -> None:
        with self._lock:
            verdict = self.membership.handle_join_response(response)
            if not isinstance(verdict.error, errors.MemberIdRequiredError):  # a step, not a failure (Java)
                self._record("record_join" if verdict.ok else "rebalance_failed", *self._latency("join", verdict.ok))
            generation = self.membership.generation
            is_leader = self.membership.is_leader
            if verdict.ok:
                # The heartbeat thread resumes now (COMPLETING_REBALANCE): fresh timers.
                self.heartbeat.reset_timeouts(self._clock())
        if not verdict.ok:
            if not isinstance(verdict.error, errors.MemberIdRequiredError):
                # The floor also counts from the error answer (as a backoff after a
                # response does): the coordinator then sees the joins at least
                # retry_backoff_ms apart however late it read the failed one.
                self._next_join_ms = max(self._next_join_ms, self._clock() + self.retry_backoff_ms)
            round_future.failure(_JoinRoundFailed(verdict))
            return
        try:
            if is_leader:
                assignments = self.perform_assignment(response.leader, response.protocol_name, response.members,
                                                      response.skip_assignment)
            else:
                assignments = {}
            sync = self._send_sync_group(generation, response.protocol_name, assignments)
        except BaseException as exc:  # noqa: BLE001 - raised on the application thread
            with self._lock:
                self.membership.state = MemberState.UNJOINED
                self.membership.request_rejoin("the assignment failed")
            round_future.failure(exc)
            return
        if sync is None:
            round_future.failure(_JoinRoundFailed(Verdict(
                errors.KafkaConnectionError("lost the coordinator between JoinGroup and SyncGroup"),
                retry=True, backoff=True, coordinator_unknown=True)))
            return
        sync.add_callback(self._on_sync_response, round_future, generation)
        sync.add_errback(round_future.failure)

    def _send_sync_group(self, generation: Generation, protocol_name: Optional[str],
                         assignments: dict[str, bytes]) -> Optional[Any]:
        node = self.coordinator_id
        version = self._version(SyncGroupRequest, node)
        if version is None:
            return None
        request = build_sync_group(version, self.group_id, generation.generation_id, generation.member_id,
                                   self.membership.group_instance_id, self.protocol_type(), protocol_name,
                                   assignments)
        self._sent_ms["sync"] = self._clock()
        log.debug("Group %s: SyncGroup generation %d (%d assignments)", self.group_id, generation.generation_id,
                  len(assignments))
        return self._client.send(node, request, version=version)

    def _on_sync_response(self, round_future: Any, generation: Generation, response: SyncGroupResponse) -> None:
        with self._lock:
            verdict = self.membership.handle_sync_response(response, generation)
            if verdict.ok:
                self.heartbeat.reset_timeouts(self._clock())
            self._record("record_sync" if verdict.ok else "rebalance_failed", *self._latency("sync", verdict.ok))
        if verdict.ok:
            self._record("rebalance_ended")
        if verdict.ok:
            round_future.success((generation, bytes(response.assignment)))
        else:
            round_future.failure(_JoinRoundFailed(verdict))

    def _apply_verdict(self, verdict: Verdict, deadline: float) -> None:
        if verdict.fatal:
            assert verdict.error is not None
            raise verdict.error
        log.info("Group %s: join attempt ended with %s; retrying", self.group_id, verdict.error)
        if verdict.coordinator_unknown:
            self.mark_coordinator_unknown(str(verdict.error))
        if verdict.backoff:
            self._backoff(deadline)

    def _app_poll(self, timeout_ms: float, future: Any = None) -> None:
        """One blocking network step on the application thread, honouring ``wakeup()``."""
        check = self.check_wakeup
        if check is None:
            self._client.poll(timeout_ms=timeout_ms, future=future)
            return
        check()
        if future is None:
            self._client.poll(timeout_ms=timeout_ms)
        else:
            # client.poll(timeout, future) selects until the future is done, so a wakeup
            # would end only one select: wait one step at a time instead.
            deadline = self._clock() + timeout_ms
            while not future.is_done:
                left = deadline - self._clock()
                if left <= 0:
                    break
                self._client.poll(timeout_ms=left)
                check()
        check()

    def _wait_for_join_floor(self, deadline: float) -> bool:
        """Wait until ``retry_backoff_ms`` after the last JoinGroup (and after its error
        answer, if it failed); False if the deadline came first. Java rejoins at once after UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS and
        ILLEGAL_GENERATION: a coordinator answering one of them to every join would get a
        JoinGroup per round trip."""
        until = min(deadline, self._next_join_ms)
        while self._clock() < until:
            self._app_poll(until - self._clock())
        return self._clock() >= self._next_join_ms

    def _backoff(self, deadline: float) -> None:
        until = min(deadline, self._clock() + self.retry_backoff_ms)
        while self._clock() < until:
            self._app_poll(until - self._clock())

    def _version(self, request_cls: Any, node: Any) -> Optional[int]:
        """The highest version both sides support, capped (``group_requests.MAX_VERSIONS``); None while the
        coordinator is not connected (its versions are not known yet)."""
        if node is None or not self._client.is_ready(node):
            return None
        supported = self._client.broker_api_versions(node).get(request_cls.api_key)
        if supported is None:
            raise errors.UnsupportedVersionError("coordinator {} does not support {}".format(node, request_cls.__name__))
        return choose_version(request_cls, supported, node)

    # --- heartbeats -----------------------------------------------------------------------------

    def poll_heartbeat(self, now_ms: float) -> None:
        """The application polled: restart the poll timer; raise a heartbeat-thread failure."""
        self._raise_fatal_error()
        with self._lock:
            self.heartbeat.poll(now_ms)

    def time_to_next_heartbeat(self, now_ms: float) -> float:
        with self._lock:
            if self.membership.state.has_not_joined_group():
                return float("inf")
            return self.heartbeat.time_to_next_heartbeat(now_ms)

    def _raise_fatal_error(self) -> None:
        with self._lock:
            error, self._fatal_error = self._fatal_error, None
        if error is not None:
            raise error

    def on_heartbeat_thread_failure(self, exc: BaseException) -> None:
        with self._lock:
            self._fatal_error = exc
            self._heartbeat_thread = None  # a later poll starts a new one

    def _start_heartbeat_thread_if_needed(self) -> None:
        with self._lock:
            if self._heartbeat_thread is None and not self._closing:
                from .heartbeat_thread import HeartbeatThread

                self._heartbeat_thread = HeartbeatThread(self)
                self._heartbeat_thread.start()

    def heartbeat_step(self) -> float:
        """One pass of the heartbeat thread (Java's HeartbeatThread.run body); ms to sleep."""
        now = self._clock()
        idle = float(self.retry_backoff_ms)
        with self._lock:
            if self._closing or self._fatal_error is not None:
                return idle
            if self.membership.state.has_not_joined_group():
                joining = self._join is not None and not self._join.is_done
            else:
                joining = None
        if joining is not None:
            if joining:
                # Unlike Java, drive a join round's I/O too: a member busy between polls
                # then still sends its SyncGroup as soon as JoinGroup answers (in the
                # callbacks), before the leader's completes the round.
                self._client.poll(timeout_ms=0)
                return min(idle, _JOIN_POLL_INTERVAL_MS)
            return idle
        left = None
        if self.coordinator_unknown():
            self.lookup_coordinator()
            wait = idle
        else:
            with self._lock:
                if self.heartbeat.session_timeout_expired(now):
                    # No answer for a whole session: the coordinator is presumed gone.
                    self.mark_coordinator_unknown("session timed out without a successful heartbeat")
                    self.heartbeat.reset_session_timeout(now)
                    wait = 0.0
                elif self.heartbeat.poll_timeout_expired(now):
                    log.warning(
                        "Group %s: consumer poll timeout has expired: the time between poll() calls exceeded "
                        "max_poll_interval_ms (%d ms); leaving the group. Make poll() calls more often, process "
                        "fewer records per poll (max_poll_records) or raise max_poll_interval_ms.",
                        self.group_id, self.heartbeat.max_poll_interval_ms)
                    left = self.leave_group("consumer poll timeout has expired")
                    wait = idle
                elif not self.heartbeat.should_heartbeat(now):
                    wait = min(idle, max(1.0, self.heartbeat.time_to_next_heartbeat(now)))
                elif self._version(HeartbeatRequest, self.coordinator_id) is None:
                    self._client.ready(self.coordinator_id)  # reconnecting
                    wait = idle
                else:
                    self.heartbeat.sent_heartbeat(now)
                    self._send_heartbeat()
                    wait = idle
        if left is not None:
            # Java's pollNoWakeup in maybeLeaveGroup: send() only queues the LeaveGroup, the
            # member now counts as not joined (so the steps above skip the I/O below), and
            # the application that overran max_poll_interval_ms may not poll for a while.
            self._client.poll(timeout_ms=0)
        if self._leave_future is not None and self._leave_future.is_done:
            self._leave_future = None
        if self._heartbeat_future is None and self.discovery.find_future is None and self._leave_future is None:
            self._outstanding_since = None
        elif self._outstanding_since is None:
            # The application thread usually polls (and so sends and receives this) soon;
            # only if it does not do we drive the client's I/O from here, because whatever
            # else completes in our poll (fetches, ...) then runs its callbacks here.
            self._outstanding_since = now
        elif now - self._outstanding_since >= self.retry_backoff_ms:
            self._client.poll(timeout_ms=0)
        return wait

    def _send_heartbeat(self) -> None:
        node = self.coordinator_id
        generation = self.membership.generation
        version = self._version(HeartbeatRequest, node)
        assert version is not None  # checked by the caller under the lock
        request = build_heartbeat(version, self.group_id, generation.generation_id, generation.member_id,
                                  self.membership.group_instance_id)
        self._sent_ms["heartbeat"] = self._clock()
        self._record("heartbeat_sent")
        future = self._client.send(node, request, version=version)
        self._heartbeat_future = future
        future.add_callback(self._on_heartbeat_response, generation)
        future.add_errback(self._on_heartbeat_failure)

    def _on_heartbeat_response(self, generation: Generation, response: HeartbeatResponse) -> None:
        now = self._clock()
        self._record("record_heartbeat", *self._latency("heartbeat", True))
        with self._lock:
            self._heartbeat_future = None
            verdict = self.membership.handle_heartbeat_response(response.error_code, generation)
            if verdict.ok or isinstance(verdict.error, errors.RebalanceInProgressError):
                self.heartbeat.received_heartbeat(now)
            else:
                self.heartbeat.fail_heartbeat(now)
            if verdict.fatal:
                self._fatal_error = verdict.error
        if verdict.coordinator_unknown:
            self.mark_coordinator_unknown(str(verdict.error))
        if verdict.error is not None:
            log.info("Group %s: Heartbeat answered %s", self.group_id, verdict.error)
            self._client.wakeup()  # the application thread has a rejoin (or an error) to handle

    def _on_heartbeat_failure(self, exc: BaseException) -> None:
        with self._lock:
            self._heartbeat_future = None
            self.heartbeat.fail_heartbeat(self._clock())
        if getattr(exc, "retriable", False):
            self.mark_coordinator_unknown(str(exc), cause=exc)

    # --- leaving -----------------------------------------------------------------------------

    def leave_group(self, reason: str) -> Optional[Any]:
        """LeaveGroup (dynamic members that joined), then forget the generation.

        Static members never send it: the coordinator keeps their assignment for a restart
        within the session timeout. Returns the request's Future or None.
        """
        with self._lock:
            generation = self.membership.generation
            send = (not self.membership.is_static and self.coordinator_id is not None
                    and self.membership.state is not MemberState.UNJOINED and generation.has_member_id())
            future = None
            version: Optional[int] = None
            node = self.coordinator_id
            if send:
                version = self._version(LeaveGroupRequest, node)
            if send and version is not None:
                request = build_leave_group(version, self.group_id, generation.member_id, reason)
                log.info("Group %s: member %s leaving the group (%s)", self.group_id, generation.member_id, reason)
                future = self._client.send(node, request, version=version)
                self._leave_future = future
            self.membership.on_leave(reason)
            self._join = None
        return future

    def close_coordinator(self, timeout_ms: float, leave: bool = True) -> None:
        """Stop the heartbeat thread, leave the group (if ``leave``) and wait for the answer."""
        deadline = self._clock() + max(0.0, timeout_ms)
        with self._lock:
            self._closing = True
            thread, self._heartbeat_thread = self._heartbeat_thread, None
        if thread is not None:
            thread.close()
        if not leave:
            return
        future = self.leave_group("the consumer is being closed")
        while future is not None and not future.is_done and self._clock() < deadline:
            self._client.poll(timeout_ms=deadline - self._clock(), future=future)
        if future is not None and future.failed():
            log.info("Group %s: LeaveGroup failed: %s", self.group_id, future.exception)

    # --- introspection ----------------------------------------------------------------------------

    @property
    def coordinator_broker_id(self) -> Optional[int]:
        """The broker the known coordinator runs on (None while it is unknown)."""
        return self.discovery.coordinator_broker_id

    def generation(self) -> Generation:
        with self._lock:
            return self.membership.generation

    def member_state(self) -> MemberState:
        with self._lock:
            return self.membership.state
