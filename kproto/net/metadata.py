"""ClusterMetadata: what the client knows of the cluster, and when it must ask again.

Owns the brokers, each partition's leader and leader epoch, topic ids (both directions),
the topics of interest (or "all topics" for pattern subscriptions) and the refresh
schedule: a refresh is due when one was requested (on demand, or on an error that means
the metadata is stale, or on a newer leader epoch seen elsewhere) or when the data is
older than ``metadata_max_age_ms``. It does no I/O: the network client asks ``ttl()``
when to send a Metadata request, builds it from ``topics_of_interest()`` and feeds the
answer to ``update()`` (Java's ``Metadata`` + ``MetadataCache``; names from kafka-python's
``ClusterMetadata``). Accessed under the network client's lock.

Leader epochs only move forward: a response that carries an older epoch for a partition
than one already known (a lagging broker answered) keeps the known leader and asks for
another refresh, as Java's ``Metadata.updateLatestMetadata`` does. The same rule guards
:meth:`ClusterMetadata.update_partition_leadership` (KIP-951): a leader named by a Fetch
answer replaces the known one only with a newer epoch.

Threads: ``update`` runs under the network client's lock, but fetch responses (which call
``update_partition_leadership``) are handled on whichever thread completes the future, so
the two writers also share this object's own ``_lock`` and publish new dicts whole (a
reader never sees one half-changed).
"""

from __future__ import annotations

import logging
import random
import threading
import types
import uuid
from typing import Any, Callable, Iterable, Mapping

from kproto import errors
from kproto.messages import MetadataRequest
from kproto.messages._error_fields import ERROR_FIELDS
from kproto.net.backoff import RETRY_BACKOFF_EXP_BASE, RETRY_BACKOFF_JITTER, ExponentialBackoff
from kproto.net.future import Future
from kproto.structs import BrokerMetadata, TopicPartition

log = logging.getLogger("kproto.net.metadata")

# A leader id of -1 means "no leader right now" (election in progress).
NO_LEADER = -1


class PartitionMetadata:
    """One partition as the last accepted Metadata response described it."""

    __slots__ = ("topic", "partition", "leader", "leader_epoch", "replicas", "isr",
                 "offline_replicas", "error_code")

    def __init__(self, topic: str, partition: int, leader: int, leader_epoch: int,
                 replicas: list[int], isr: list[int], offline_replicas: list[int],
                 error_code: int) -> None:
        self.topic = topic
        self.partition = partition
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        self.offline_replicas = offline_replicas
        self.error_code = error_code

    def __repr__(self) -> str:
        return "PartitionMetadata({}-{}, leader={}, epoch={})".format(
            self.topic, self.partition, self.leader, self.leader_epoch)


# Java gives the group coordinator the connection id Integer.MAX_VALUE - its broker id: a
# node id no broker has, so group traffic gets a connection of its own. A broker answers the
# requests of one connection in order, and a JoinGroup parked for a whole rebalance would
# otherwise hold up the fetches queued behind it (cooperative members keep fetching then).
_COORDINATOR_ID_BASE = 2**31 - 1


def coordinator_connection_id(broker_id: int) -> int:
    """The connection id for the group coordinator on broker ``broker_id`` (as Java)."""
    return _COORDINATOR_ID_BASE - broker_id


def coordinator_broker_id(connection_id: int) -> int:
    """The broker a coordinator connection id (``coordinator_connection_id``) points at."""
    return _COORDINATOR_ID_BASE - connection_id


class ClusterMetadata:
    """Brokers, partition leaders and epochs, topic ids, and the refresh schedule."""

    def __init__(self, *, metadata_max_age_ms: int = 300_000, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 1000, bootstrap_brokers: Iterable[BrokerMetadata] = (),
                 rng: random.Random | None = None) -> None:
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        # Java's Metadata.refreshBackoff; ``rng`` makes its jitter reproducible.
        self._refresh_backoff = ExponentialBackoff(retry_backoff_ms, RETRY_BACKOFF_EXP_BASE,
                                                   retry_backoff_max_ms, RETRY_BACKOFF_JITTER, rng)
        self._bootstrap = {b.node_id: b for b in bootstrap_brokers}
        self._brokers: dict[int, BrokerMetadata] = {}
        self._coordinators: dict[int, BrokerMetadata] = {}  # by coordinator connection id
        self._partitions: dict[str, dict[int, PartitionMetadata]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self.internal_topics: set[str] = set()
        self.unauthorized_topics: set[str] = set()
        self.invalid_topics: set[str] = set()
        self.unknown_topics: set[str] = set()
        self.cluster_id: str | None = None
        self.controller_id: int | None = None
        self._topics: set[str] = set()
        self._need_all_topics = False
        self._need_update = True
        # KIP-580 (Java's Metadata): the last answer or failure (lastRefreshMs), the last
        # answer (lastSuccessfulRefreshMs), failed requests in a row (attempts) and answers
        # in a row that taught nothing new (equivalentResponseCount). Each backoff is drawn
        # (jittered) once when its counter changes, so ttl() is stable between events.
        self._last_refresh_ms = -float("inf")
        self._last_successful_refresh_ms = -float("inf")
        self.attempts = 0
        self.equivalent_response_count = 0
        self._attempts_backoff_ms = 0
        self._equivalent_backoff_ms = 0
        # (request version, future): who waits for an update that answers their request.
        self._waiters: list[tuple[int, Future]] = []
        # Java's Metadata.requestVersion: bumped by every request for an update, so that a
        # response to a request sent before the latest need does not settle it.
        self.request_version = 0
        # Completes a waiter: at once by default; the network client defers it until its
        # lock is released (futures complete with no lock held, so callbacks may send()).
        self._settle: Callable[[Future, Any, BaseException | None], Any] = _settle_now
        self._listeners: list[Callable[[ClusterMetadata], Any]] = []
        self.update_count = 0
        # Serialises the writers (see the module docstring); never held across callbacks.
        self._lock = threading.RLock()

    # --- reads ------------------------------------------------------------------------

    def brokers(self) -> set[BrokerMetadata]:
        """Known brokers; the bootstrap servers until the first metadata arrives."""
        return set(self._brokers.values()) if self._brokers else set(self._bootstrap.values())

    def broker_metadata(self, node_id: Any) -> BrokerMetadata | None:
        return self._brokers.get(node_id) or self._bootstrap.get(node_id) or self._coordinators.get(node_id)

    def add_coordinator(self, broker_id: int, host: str, port: int) -> int:
        """Register a FindCoordinator answer; returns the node id to send group requests to.

        The address comes from the answer itself, so no metadata refresh is needed first.
        """
        node_id = coordinator_connection_id(broker_id)
        self._coordinators[node_id] = BrokerMetadata(node_id, host, port, None)
        return node_id

    def known_brokers(self) -> set[BrokerMetadata]:
        """Every node a connection may be open to: the brokers the metadata named and the
        ``bootstrap_servers`` (``"bootstrap-<i>"``)."""
        return set(self._brokers.values()) | set(self._bootstrap.values())

    def is_bootstrap(self, node_id: Any) -> bool:
        return node_id in self._bootstrap

    def broker_id_of(self, node_id: Any) -> int | None:
        """The broker id behind a connection id (a coordinator connection's broker), or
        None for a bootstrap server (its id is not known)."""
        if node_id in self._coordinators:
            return coordinator_broker_id(node_id)
        return node_id if isinstance(node_id, int) and node_id in self._brokers else None

    def on_bootstrap_servers(self) -> bool:
        """True until an answer named the brokers (and again after :meth:`rebootstrap`)."""
        return not self._brokers

    def rebootstrap(self) -> None:
        """Forget the brokers the metadata named and ask the ``bootstrap_servers`` again
        (Java's ``Metadata.rebootstrap``, KIP-899): :meth:`brokers` is the bootstrap list
        until the next answer. Partitions, leaders and topic ids stay until that answer
        replaces them (fetches to a leader that is gone fail and wait for it anyway)."""
        with self._lock:
            log.info("Rebootstrapping with %s", sorted("{}:{}".format(b.host, b.port) for b in self._bootstrap.values()))
            self._brokers = {}
        self.request_update_no_wait()

    def topics(self, exclude_internal_topics: bool = True) -> set[str]:
        names = set(self._partitions)
        return names - self.internal_topics if exclude_internal_topics else names

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        parts = self._partitions.get(topic)
        return set(parts) if parts is not None else None

    def available_partitions_for_topic(self, topic: str) -> set[int] | None:
        parts = self._partitions.get(topic)
        if parts is None:
            return None
        return {p for p, meta in parts.items() if meta.leader != NO_LEADER}

    def partition_metadata(self, tp: TopicPartition) -> PartitionMetadata | None:
        return self._partitions.get(tp.topic, {}).get(tp.partition)

    def leader_for_partition(self, tp: TopicPartition) -> int | None:
        """The leader's node id; -1 while it has no leader; None if the partition is unknown."""
        meta = self.partition_metadata(tp)
        return None if meta is None else meta.leader

    def leader_epoch_for_partition(self, tp: TopicPartition) -> int:
        meta = self.partition_metadata(tp)
        return -1 if meta is None else meta.leader_epoch

    def partitions_for_broker(self, node_id: int) -> set[TopicPartition]:
        return {TopicPartition(t, p) for t, parts in self._partitions.items()
                for p, meta in parts.items() if meta.leader == node_id}

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self._topic_ids.get(topic)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._topic_names.get(topic_id)

    def topic_ids(self) -> dict[str, uuid.UUID]:
        return dict(self._topic_ids)

    # --- what to ask for ----------------------------------------------------------------

    def set_topics(self, topics: Iterable[str]) -> Future:
        """Replace the topics of interest; asks for a refresh at once if that adds any."""
        topics = set(topics)
        if topics - self._topics or (topics and not self._topics):
            self._topics = topics
            return self.request_update_for_new_topics()
        self._topics = topics
        return Future().success(self)

    def add_topic(self, topic: str) -> Future:
        return self.set_topics(self._topics | {topic})

    def need_all_topic_metadata(self, value: bool = True) -> None:
        """Fetch every topic (pattern subscriptions) instead of the topics of interest."""
        if value and not self._need_all_topics:
            self._new_metadata_wanted()
            self.request_update_no_wait()
        self._need_all_topics = value

    def topics_of_interest(self) -> set[str] | None:
        """The topics to ask for; None means all topics."""
        return None if self._need_all_topics else set(self._topics)

    # --- the refresh schedule ------------------------------------------------------------

    def request_update(self, reset_equivalent: bool = True) -> Future:
        """Ask for a refresh soon; the future completes (with self) after the first update
        that answers a request sent after this call (an older one in flight does not).
        ``reset_equivalent``: see :meth:`request_update_no_wait`."""
        future = Future()
        self._waiters.append((self.request_update_no_wait(reset_equivalent), future))
        return future

    def request_update_no_wait(self, reset_equivalent: bool = True) -> int:
        """Ask for a refresh soon without a future to wait on (Java's ``requestUpdate``);
        returns the new request version.

        ``reset_equivalent=False`` when an operation is retried because its leader seemed
        stale (NOT_LEADER_OR_FOLLOWER, a disconnect, an invalid-metadata error): the
        backoff grown by answers that taught nothing new stays, so a broker that keeps
        naming the same stale leader is not asked again and again. True (the default, as
        Java advises when in doubt) when new metadata is wanted (a subscription change, a
        user's call): the next request goes out after ``retry_backoff_ms`` at most.
        """
        self._need_update = True
        if reset_equivalent:
            self.equivalent_response_count = 0
        self.request_version += 1
        return self.request_version

    def request_update_for_new_topics(self) -> Future:
        """Java's ``requestUpdateForNewTopics``: metadata for topics not asked for before is
        wanted now, so neither backoff delays it (a failure streak is still counted)."""
        self._new_metadata_wanted()
        return self.request_update()

    def _new_metadata_wanted(self) -> None:
        # Java sets lastRefreshMs to 0: both backoffs count from the last refresh.
        self._last_refresh_ms = -float("inf")
        self.equivalent_response_count = 0

    def need_update(self) -> bool:
        return self._need_update

    def time_to_allow_update(self, now_ms: float) -> float:
        """Milliseconds until a Metadata request may go out (Java's ``timeToAllowUpdate``):
        the larger of the backoff after failed requests in a row and the backoff after
        answers in a row that taught nothing new, both counted from the last refresh.
        Once the metadata is older than ``metadata_max_age_ms`` the second one no longer
        holds (the periodic refresh is due)."""
        for_attempts = self._last_refresh_ms + self._attempts_backoff_ms - now_ms
        if now_ms >= self._last_successful_refresh_ms + self.metadata_max_age_ms:
            self.equivalent_response_count = 0
        for_equivalent = self._last_refresh_ms - now_ms
        if self.equivalent_response_count > 0:
            for_equivalent += self._equivalent_backoff_ms
        return max(for_attempts, for_equivalent, 0.0)

    def ttl(self, now_ms: float) -> float:
        """Milliseconds until a Metadata request is due (0: now): Java's
        ``timeToNextUpdate``, at once when requested, else when the metadata is older than
        ``metadata_max_age_ms``, and never before :meth:`time_to_allow_update`."""
        if self._need_update:
            due = 0.0
        else:
            due = max(self._last_successful_refresh_ms + self.metadata_max_age_ms - now_ms, 0.0)
        return max(due, self.time_to_allow_update(now_ms))

    def record_failed_attempt(self, now_ms: float) -> None:
        """A refresh attempt failed (Java's ``failedUpdate``): the next waits
        ``retry_backoff_ms * 2**(attempts - 1)`` (jittered, at most ``retry_backoff_max_ms``).
        Whoever waits for the refresh keeps waiting (see :meth:`failed_update`)."""
        self._last_refresh_ms = now_ms
        self.attempts += 1
        self.equivalent_response_count = 0
        self._attempts_backoff_ms = self._refresh_backoff.backoff(self.attempts - 1)
        log.debug("metadata refresh attempt %d failed: next one in %d ms at the earliest", self.attempts,
                  self._attempts_backoff_ms)

    def failed_update(self, exception: BaseException, now_ms: float) -> None:
        """The Metadata request failed: fail whoever waits on it; the refresh is retried
        after the backoff (:meth:`record_failed_attempt`)."""
        self.record_failed_attempt(now_ms)
        waiters, self._waiters = self._waiters, []
        for _version, future in waiters:
            self._settle(future, None, exception)

    def update_last_seen_epoch_if_newer(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """A response elsewhere carried a leader epoch; a newer one than known means refresh
        (a retry for fresher leaders: the equivalent-answer backoff stays, as in Java)."""
        meta = self.partition_metadata(tp)
        if leader_epoch >= 0 and meta is not None and leader_epoch > meta.leader_epoch:
            log.debug("leader epoch of %s moved %d -> %d: refreshing metadata", tp,
                      meta.leader_epoch, leader_epoch)
            self.request_update_no_wait(reset_equivalent=False)
            return True
        return False

    def maybe_request_update_for_error(self, error: Any) -> bool:
        """Ask for a refresh if an error (class, instance or code) says metadata is stale
        (a retry for fresher leaders: the equivalent-answer backoff stays)."""
        if isinstance(error, int):
            error = errors.for_code(error)
        if getattr(error, "invalid_metadata", False):
            self.request_update_no_wait(reset_equivalent=False)
            return True
        return False

    def set_settle(self, settle: Callable[[Future, Any, BaseException | None], Any]) -> None:
        """Have ``settle(future, value, exception)`` complete the waiters of refreshes
        (the network client queues them and completes them after releasing its lock)."""
        self._settle = settle

    def add_listener(self, listener: Callable[[ClusterMetadata], Any]) -> None:
        """Call ``listener(self)`` after every accepted update."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[ClusterMetadata], Any]) -> None:
        self._listeners.remove(listener)

    # --- applying a response ---------------------------------------------------------------

    def update(self, response: Any, now_ms: float, *, request_version: int | None = None,
               asked_all: bool | None = None) -> None:
        """Apply a MetadataResponse (any version).

        ``request_version`` and ``asked_all`` describe the request it answers (the
        ``request_version`` and ``topics_of_interest() is None`` when it was sent); a
        response to an older request leaves newer needs (and their waiters) pending.
        Without them the response is taken to answer everything asked so far.
        """
        with self._lock:
            answered = self._apply_update(response, now_ms, request_version, asked_all)
        for future in answered:
            self._settle(future, self, None)
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception:
                log.exception("metadata listener %r failed", listener)

    def _apply_update(self, response: Any, now_ms: float, request_version: int | None,
                      asked_all: bool | None) -> list[Future]:
        """``update`` under the lock; returns the waiters it answered (settled outside)."""
        brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, getattr(b, "rack", None))
                   for b in response.brokers}
        if asked_all is None:
            asked_all = self._need_all_topics
        if request_version is None:
            request_version = self.request_version
        partitions: dict[str, dict[int, PartitionMetadata]] = {}
        topic_ids: dict[str, uuid.UUID] = {}
        internal, unauthorized, invalid, unknown = set(), set(), set(), set()
        stale_epoch = retry_soon = False
        # KIP-580: an answer counts as equivalent (no progress) unless some partition
        # below is new, has a newer leader epoch, none at all, or a new topic id.
        progress = False
        for topic in response.topics:
            name = topic.name
            tid = getattr(topic, "topic_id", None)
            if name is None and tid is not None:
                name = self._topic_names.get(tid)
            if name is None:
                continue
            if topic.error_code:
                err = errors.for_code(topic.error_code)
                if err is errors.TopicAuthorizationFailedError:
                    unauthorized.add(name)
                elif err is errors.InvalidTopicError:
                    invalid.add(name)
                elif err is errors.UnknownTopicOrPartitionError:
                    unknown.add(name)
                else:
                    # LEADER_NOT_AVAILABLE while a topic is being created, and friends.
                    retry_soon = retry_soon or err.retriable
                if err is not errors.LeaderNotAvailableError or not topic.partitions:
                    log.debug("metadata for topic %s: %s", name, err.__name__)
                    continue
            if tid is not None and tid.int != 0:
                topic_ids[name] = tid
            if getattr(topic, "is_internal", False):
                internal.add(name)
            known = self._partitions.get(name, {})
            # A re-created topic starts its epochs again (Java's updateLatestMetadata).
            new_topic_id = tid is not None and tid.int != 0 and tid != self._topic_ids.get(name)
            parts: dict[int, PartitionMetadata] = {}
            for p in topic.partitions:
                epoch = getattr(p, "leader_epoch", -1)
                old = known.get(p.partition_index)
                if old is not None and epoch >= 0 and old.leader_epoch > epoch and not new_topic_id:
                    # A lagging broker answered: keep the newer knowledge, ask again.
                    parts[p.partition_index] = old
                    stale_epoch = True
                    continue
                if epoch < 0 or old is None or old.leader_epoch < 0 or new_topic_id or epoch > old.leader_epoch:
                    progress = True
                parts[p.partition_index] = PartitionMetadata(
                    name, p.partition_index, p.leader_id, epoch, list(p.replica_nodes),
                    list(p.isr_nodes), list(getattr(p, "offline_replicas", None) or ()),
                    p.error_code)
                if p.error_code and errors.for_code(p.error_code).invalid_metadata:
                    retry_soon = True
            partitions[name] = parts
        if not asked_all:
            # Keep what we knew of topics this response did not cover (not asked this time).
            for name, parts in self._partitions.items():
                if name not in partitions and name not in unknown and name in self._topics:
                    partitions.setdefault(name, parts)
        self._brokers = brokers
        self._partitions = partitions
        self._topic_ids = {**{n: i for n, i in self._topic_ids.items() if n in partitions},
                           **topic_ids}
        self._topic_names = {i: n for n, i in self._topic_ids.items()}
        self.internal_topics = internal
        self.unauthorized_topics = unauthorized
        self.invalid_topics = invalid
        self.unknown_topics = unknown
        self.cluster_id = getattr(response, "cluster_id", None)
        controller = getattr(response, "controller_id", -1)
        self.controller_id = controller if controller is not None and controller >= 0 else None
        self._last_refresh_ms = self._last_successful_refresh_ms = now_ms
        self.attempts = 0
        self._attempts_backoff_ms = self._refresh_backoff.backoff(0)
        if progress:
            self.equivalent_response_count = 0
        else:
            self.equivalent_response_count += 1
            self._equivalent_backoff_ms = self._refresh_backoff.backoff(self.equivalent_response_count - 1)
        # Asking again for a lagging broker or a retriable error is Java's
        # requestUpdate(false): the count just updated keeps backing those refreshes off.
        self._need_update = stale_epoch or retry_soon or request_version < self.request_version
        self.update_count += 1
        log.debug("metadata updated: %d brokers, %d topics%s%s", len(brokers), len(partitions),
                  " (refresh again soon)" if self._need_update else "",
                  "" if progress else " (equivalent answer {} in a row)".format(self.equivalent_response_count))
        answered = [f for v, f in self._waiters if v <= request_version]
        self._waiters = [(v, f) for v, f in self._waiters if v > request_version]
        return answered

    def update_partition_leadership(self, partition_leaders: Mapping[TopicPartition, tuple[int, int]],
                                    node_endpoints: Iterable[BrokerMetadata] = ()) -> set[TopicPartition]:
        """Apply leaders a Fetch answer named (KIP-951; Java's ``updatePartitionLeadership``).

        ``partition_leaders`` maps a partition to ``(leader_id, leader_epoch)`` and
        ``node_endpoints`` are the brokers the answer described (Fetch v16+). A partition
        is updated only when both numbers are set (>= 0), the epoch is newer than the
        known one, the leader is a known broker or one of ``node_endpoints``, and the
        metadata knows the partition; its replicas and ISR stay as they were. When any
        partition is updated, ``node_endpoints`` join the known brokers (replacing an
        entry with the same id: the answer is newer). Returns the partitions updated.
        No refresh is requested here (the caller asks for one as before) and metadata
        listeners are not called: no topic appeared or went.
        """
        endpoints = {b.node_id: b for b in node_endpoints}
        with self._lock:
            nodes = {**self._brokers, **endpoints}
            changed: dict[str, dict[int, PartitionMetadata]] = {}
            updated: set[TopicPartition] = set()
            for tp, (leader_id, leader_epoch) in partition_leaders.items():
                if leader_id is None or leader_epoch is None or leader_id < 0 or leader_epoch < 0:
                    log.debug("%s: incomplete leader from fetch (%s, epoch %s); ignored", tp, leader_id, leader_epoch)
                    continue
                known = self.partition_metadata(tp)
                if known is None:
                    log.debug("%s: leader %s from fetch for a partition not in the metadata; ignored", tp, leader_id)
                    continue
                if known.leader_epoch >= 0 and leader_epoch <= known.leader_epoch:
                    log.debug("%s: leader %s epoch %d from fetch is not newer than epoch %d; ignored",
                              tp, leader_id, leader_epoch, known.leader_epoch)
                    continue
                if leader_id not in nodes:
                    log.debug("%s: leader %s from fetch is not a known broker; ignored", tp, leader_id)
                    continue
                parts = changed.get(tp.topic)
                if parts is None:
                    parts = changed[tp.topic] = dict(self._partitions[tp.topic])
                parts[tp.partition] = PartitionMetadata(
                    known.topic, known.partition, leader_id, leader_epoch, known.replicas, known.isr,
                    known.offline_replicas, known.error_code)
                updated.add(tp)
                log.debug("%s: leader %s (epoch %d) from a fetch answer, was %s (epoch %d)", tp, leader_id,
                          leader_epoch, known.leader, known.leader_epoch)
            if not changed:
                return set()
            # New dicts, published whole: readers on other threads see before or after.
            self._brokers = nodes
            self._partitions = {**self._partitions, **changed}
            return updated

    def __repr__(self) -> str:
        return "ClusterMetadata(brokers={}, topics={}, need_update={})".format(
            len(self._brokers), len(self._partitions), self._need_update)


def _settle_now(future: Future, value: Any, exception: BaseException | None) -> None:
    if exception is None:
        future.success(value)
    else:
        future.failure(exception)


# Field values the walk below never looks into.
_LEAF_TYPES = frozenset({int, bool, str, bytes, bytearray, memoryview, float, type(None), uuid.UUID})
# Per message class: (field name, its slot descriptor, or None to use getattr), only the
# fields that can hold an error code (see _field_slots).
_FIELD_SLOTS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _field_slots(cls: type) -> tuple[tuple[str, Any], ...]:
    """The fields of ``cls`` the walk below must look at: ``error_code`` and the structs
    (or arrays of them) that hold one somewhere below, from the generated schema facts. A
    Fetch partition is then one field, not its eleven (diverging epoch, leader, snapshot id
    and aborted transactions never hold an error code)."""
    slots = _FIELD_SLOTS.get(cls)
    if slots is None:
        wanted = ERROR_FIELDS.get(cls.__name__, ())
        slots = _FIELD_SLOTS[cls] = tuple(
            (name, vars(cls).get(name) if isinstance(vars(cls).get(name), types.MemberDescriptorType) else None)
            for name in cls._fields  # type: ignore[attr-defined]
            if name in wanted)
    return slots


def response_needs_metadata_update(response: Any, _depth: int = 0) -> bool:
    """Does any ``error_code`` in the response mean the metadata is stale?

    NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, FENCED/UNKNOWN_LEADER_EPOCH and the
    other ``invalid_metadata`` codes, at any depth (Fetch and ListOffsets report them per
    partition). Walks the decoded fields only; record bytes are never looked into. Fields
    the response did not carry are skipped (read through the slot, not ``getattr``, which
    would build their defaults: error codes 0) -- a 1,000-partition Fetch response was
    walked ~3x over, through defaults, on every response.
    """
    cls = type(response)
    if getattr(cls, "_fields", None) is None or _depth > 8:
        return False
    leaves = _LEAF_TYPES
    for name, slot in _field_slots(cls):
        try:
            value = getattr(response, name) if slot is None else slot.__get__(response, cls)
        except AttributeError:
            continue  # not carried: its default holds no error
        if name == "error_code":
            if value and errors.for_code(value).invalid_metadata:
                return True
        elif type(value) in leaves:
            continue
        elif isinstance(value, list):
            if not value or not hasattr(value[0], "_fields"):
                continue
            item_slots = _field_slots(type(value[0]))
            if len(item_slots) == 1 and item_slots[0][0] == "error_code" and item_slots[0][1] is not None:
                # Structs whose only error-bearing field is their own error code (a Fetch
                # response's partitions): their distinct codes in one pass, not a call each.
                try:
                    codes = set(map(item_slots[0][1].__get__, value))
                except AttributeError:  # one not carried: walk them one by one
                    pass
                else:
                    if any(code and errors.for_code(code).invalid_metadata for code in codes):
                        return True
                    continue
            if any(response_needs_metadata_update(item, _depth + 1) for item in value):
                return True
        elif hasattr(value, "_fields"):
            if response_needs_metadata_update(value, _depth + 1):
                return True
    return False


def build_metadata_request(topics: set[str] | None, version: int, allow_auto_create: bool) -> Any:
    """A MetadataRequest for these topics (None: all topics; empty: brokers only)."""
    topic_list: list[Any] | None
    if topics is None:
        topic_list = None if version >= 1 else []
    else:
        topic_list = [MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(topics)]
    fields: dict[str, Any] = {"topics": topic_list}
    if version >= 4:
        fields["allow_auto_topic_creation"] = allow_auto_create
    return MetadataRequest(**fields)
