"""AbstractFetch: which partitions to fetch from which node, and what to do with the answer.

Java's ``AbstractFetch``, shared by the classic engine's ``Fetcher`` and the KIP-848
engine's fetch request manager. Sans-IO: it builds ``FetchRequest`` messages and takes
decoded ``FetchResponse`` messages; sending them is the subclass's business.

It owns one ``FetchSessionHandler`` per node and the set of nodes with a fetch in flight.
``prepare_fetch_requests`` groups the fetchable partitions that have no buffered data by
their leader (or preferred read replica), and skips a node that has a request in flight
or that leads a partition with buffered data (fetching the others would drop the buffered
ones from the broker's session); a paused partition's buffered data does not count (it
waits for resume, and must not starve the node's other partitions: Java's KAFKA-17182).
A node that answered the last full request without a session (``FetchSessionHandler.
sessionless``: Tansu, librdkafka's mock, a Kafka whose session cache is full) has no
session to drop partitions from, so there kproto departs from Java: while its buffered
data is read, the node's other partitions are fetched, provided one of them is known to
be behind its high watermark (a request the broker would hold for ``fetch.max.wait.ms``
would keep the buffered partitions from being fetched again until it returns). A broker
that caps each answer (Tansu: ~5.4 MB of 1,000 partitions) then answers the rest while the
first part is read. Memory: that fetch goes only while less than ``fetch.max.bytes`` is
buffered, so the buffer holds at most that plus one answer (Java: one answer per node).
``handle_fetch_success`` advances the session and buffers one ``CompletedFetch`` per
partition; ``handle_fetch_failure`` resets the session so the next request is full.

Threads: in the classic engine the heartbeat thread sometimes drives the shared
NetworkClient, so ``handle_fetch_success``/``handle_fetch_failure`` may run on it while the
application thread prepares the next requests. As Java (whose methods here are
``synchronized``), every method that reads or changes the session handlers or the in-flight
set holds ``self.lock`` (an RLock: a send that fails at once runs its errback inline). Lock
order: this lock, then the FetchBuffer's or SubscriptionState's; neither calls back in here.

Leaders: a position carries the leader it was validated against; a position without one
(a user seek before metadata arrived) fetches from the metadata's current leader, or asks
for a metadata refresh when there is none. KIP-951 (Java 3.7+): a NOT_LEADER_OR_FOLLOWER
or FENCED_LEADER_EPOCH answer may name the partition's current leader (Fetch v12+) and
that broker's address (``node_endpoints``, v16+); ``handle_fetch_success`` hands those to
``metadata.update_partition_leadership`` and moves the positions of the partitions it
updated to the new leader (validating them, as after a metadata change), so the next
fetch goes there without waiting for the metadata refresh it still asks for.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from kproto import errors
from kproto.consumer.fetch.completed_fetch import CompletedFetch, CrcPrecheck, check_crcs_together
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.fetch.fetch_session_handler import (ZERO_UUID, FetchRequestData, FetchSessionHandler,
                                                         PartitionData)
from kproto.consumer.offsets.offset_fetcher_utils import current_leader
from kproto.consumer.subscription_state import SubscriptionState
from kproto.errors import ErrorCode
from kproto.messages.fetch import (FetchRequest, FetchRequest_FetchTopic, FetchRequest_ForgottenTopic, FetchResponse,
                                   FetchResponse_NodeEndpoint, FetchResponse_PartitionData)
from kproto.consumer.topic_partition_state import FetchPosition
from kproto.structs import BrokerMetadata, IsolationLevel, TopicPartition

if TYPE_CHECKING:
    from kproto.net.metadata import ClusterMetadata

log = logging.getLogger("kproto.consumer.fetch")

FETCH_API_KEY = 1
# Topic ids replace names from v13; without an id for every partition stay at v12.
LAST_VERSION_WITHOUT_TOPIC_IDS = 12
INVALID_LOG_START_OFFSET = -1
_new_tuple = tuple.__new__
# Partition errors whose answer may carry the new leader (KIP-951) and that call for a refresh.
_LEADER_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


class _ResponsePartitions(NamedTuple):
    """A fetch answer's partitions whose topic is known (each with its data, at the same
    index of ``data``), and every topic id it named (v13+)."""

    partitions: list[TopicPartition]
    data: list[FetchResponse_PartitionData]
    topic_ids: set[uuid.UUID]


class AbstractFetch:
    """Fetch request building and response handling; see the module docstring.

    ``metadata`` is the cluster metadata (``kproto.net.ClusterMetadata``). A fetch error that
    says it is stale asks it for a refresh with ``request_update_no_wait`` (nobody here waits
    on the answer, so no waiter is left behind until it comes).
    """

    def __init__(self, config: FetchConfig, subscriptions: SubscriptionState, metadata: ClusterMetadata,
                 fetch_buffer: FetchBuffer, time_ms: Callable[[], float], metrics_manager: Any = None) -> None:
        self.fetch_config = config
        self.subscriptions = subscriptions
        self.metadata = metadata
        self.fetch_buffer = fetch_buffer
        self._time_ms = time_ms
        self.session_handlers: dict[int, FetchSessionHandler] = {}
        self.nodes_with_pending_fetch_requests: set[int] = set()
        self.lock = threading.RLock()
        #: A FetchMetricsManager (None: metrics disabled) and, per node, when its fetch left.
        self.metrics_manager = metrics_manager
        self._fetch_sent: dict[int, float] = {}
        #: Where responses' CRC checks go when a shell checks them a slice at a time
        #: (kproto.aio); None: checked together on arrival (``check_crcs_together``).
        self.crc_precheck: Optional[CrcPrecheck] = None

    # --- hooks for the engine ------------------------------------------------------------

    def is_unavailable(self, node_id: int) -> bool:
        """Whether the node cannot take a request now (the engine's network client knows)."""
        return False

    # --- building requests ---------------------------------------------------------------

    def _leader(self, tp: TopicPartition, position_leader: Optional[int]) -> Optional[int]:
        if position_leader is not None and position_leader >= 0:
            return position_leader
        leader = self.metadata.leader_for_partition(tp)
        return leader if leader is not None and leader >= 0 else None

    def select_read_replica(self, tp: TopicPartition, leader: int, now_ms: float) -> int:
        """The preferred read replica (KIP-392) while its lease holds and the metadata
        knows it as an online replica of the partition (Java's ``nodeIfOnline``), else the
        leader. A replica the metadata does not know (stale metadata, a broker gone) is
        forgotten and the metadata refreshed, as Java: fetching from it would stall until
        the lease ran out, since a node without an address never becomes ready."""
        replica = self.subscriptions.preferred_read_replica(tp, now_ms)
        if replica is None or replica == leader:
            return leader
        if self._replica_online(tp, replica):
            return replica
        log.debug("not fetching %s from preferred read replica %s: not an online replica in the metadata; "
                  "using the leader %s", tp, replica, leader)
        self.subscriptions.clear_preferred_read_replica(tp)
        self.metadata.request_update_no_wait(reset_equivalent=False)
        return leader

    def _replica_online(self, tp: TopicPartition, node_id: int) -> bool:
        if self.metadata.broker_metadata(node_id) is None:
            return False
        # Java also wants the node in the partition's replica list; a leader only ever
        # names one of its replicas, so kproto checks only that it is not offline.
        partition = self.metadata.partition_metadata(tp)
        return partition is not None and node_id not in partition.offline_replicas

    def _buffered_nodes(self, buffered: Iterable[TopicPartition], now_ms: float,
                        enough: Optional[set[int]] = None) -> set[int]:
        """The nodes leading partitions with buffered data; the scan stops once it has found
        every node of ``enough`` (when given)."""
        nodes: set[int] = set()
        subs = self.subscriptions
        for tp in buffered:
            # As Java (KAFKA-17182): a paused partition's data stays buffered until resume,
            # so counting it would starve every other partition its node leads; data
            # without a valid position (unassigned, reset, awaiting validation) is stale.
            if subs.is_paused(tp) or not subs.has_valid_position(tp):
                continue
            position = subs.position_or_none(tp)
            if position is None:
                continue
            leader = self._leader(tp, position.current_leader.leader)
            if leader is not None:
                nodes.add(self.select_read_replica(tp, leader, now_ms))
                if enough is not None and enough <= nodes:
                    break
        return nodes

    def prepare_fetch_requests(self, now_ms: Optional[float] = None) -> dict[int, FetchRequestData]:
        """One FetchRequestData per node to fetch from now (advances each node's session)."""
        with self.lock:
            now_ms = self._time_ms() if now_ms is None else now_ms
            if self.metrics_manager is not None:
                self.metrics_manager.maybe_update_assignment()
            buffered_fetches = self.fetch_buffer.buffered_fetches()
            # A fetch can only go to a broker the metadata names (another node has no
            # address) with no fetch in flight. Once buffered data covers all of those,
            # nothing can be sent: return before the per-partition work, which every poll
            # would otherwise pay for every assigned partition (1,000 partitions: more than the
            # records cost). What that work might also do (ask for metadata for a partition
            # without a leader, drop an offline read replica) waits for the next round.
            open_nodes = {broker.node_id for broker in self.metadata.brokers()}
            open_nodes -= self.nodes_with_pending_fetch_requests
            buffered_nodes = self._buffered_nodes((cf.partition for cf in buffered_fetches), now_ms, open_nodes)
            handlers = self.session_handlers
            # Java's rule keeps an incremental session whole; a node that keeps no session
            # (sessionless: every request full) loses nothing when buffered partitions are
            # left out, so the rest may be fetched while that data is read (see the module
            # docstring).
            sessionless = {node for node in buffered_nodes & open_nodes
                           if (h := handlers.get(node)) is not None and h.sessionless}
            if sessionless and sum(cf.records_size for cf in buffered_fetches) >= self.fetch_config.max_bytes:
                sessionless = set()  # memory: see the module docstring
            if open_nodes <= buffered_nodes - sessionless:
                return {}
            buffered = {cf.partition for cf in buffered_fetches}
            # One lock for every partition's fetchability, position and read replica.
            unbuffered = self.subscriptions.fetchable_positions(buffered)
            if not unbuffered:
                return {}
            unavailable: dict[int, bool] = {}  # asked once per node, not per partition
            pending = self.nodes_with_pending_fetch_requests
            need_metadata = False
            to_send: list[tuple[int, TopicPartition, FetchPosition]] = []
            early: dict[int, list[tuple[TopicPartition, FetchPosition]]] = {}
            # Once per partition of every Fetch: locals, and the common case inline.
            for tp, position, replica in unbuffered:
                leader = position.current_leader.leader
                if leader is None or leader < 0:
                    leader = self._leader(tp, None)
                    if leader is None:
                        log.debug("no leader known for %s (position %s); requesting metadata", tp, position)
                        need_metadata = True
                        continue
                node = leader if replica is None else self.select_read_replica(tp, leader, now_ms)
                down = unavailable.get(node)
                if down is None:
                    down = unavailable[node] = self.is_unavailable(node)
                if down:
                    log.debug("skipping fetch for %s: node %s is unavailable", tp, node)
                elif node in pending:
                    log.debug("skipping fetch for %s: a request to node %s is in flight", tp, node)
                elif node not in buffered_nodes:
                    to_send.append((node, tp, position))
                elif node in sessionless:
                    early.setdefault(node, []).append((tp, position))
                else:
                    log.debug("skipping fetch for %s: node %s leads partitions with buffered data", tp, node)
            read_committed = self.fetch_config.isolation_level == IsolationLevel.READ_COMMITTED
            for node, partitions in early.items():
                # Only if some partition has data to answer with at once: a fetch the broker
                # holds for fetch.max.wait.ms would keep the node's buffered partitions, once
                # read, from being fetched again until it returns.
                if self.subscriptions.any_behind(partitions, read_committed):
                    to_send += [(node, tp, position) for tp, position in partitions]
                else:
                    log.debug("not fetching from node %s while it has buffered data: no other partition of it is "
                              "known to be behind", node)
            builders: dict[int, FetchSessionHandler.Builder] = {}
            topic_ids: dict[str, uuid.UUID] = {}  # looked up once per topic, not per partition
            fetch_size = self.fetch_config.fetch_size
            for node, tp, position in to_send:
                builder = builders.get(node)
                if builder is None:
                    handler = handlers.get(node)
                    if handler is None:
                        handler = FetchSessionHandler(node, self.fetch_config.enable_incremental_fetch_sessions)
                        handlers[node] = handler
                    builder = builders[node] = handler.new_builder()
                topic = tp.topic
                topic_id = topic_ids.get(topic)
                if topic_id is None:
                    topic_id = topic_ids[topic] = self.metadata.topic_id(topic) or ZERO_UUID
                epoch = position.current_leader.epoch
                # All six fields, through tuple.__new__: PartitionData's own __new__ is a Python call.
                builder.add(tp, _new_tuple(PartitionData, (topic_id, position.offset, INVALID_LOG_START_OFFSET,
                                                           fetch_size, -1 if epoch is None else epoch, -1)))
            if need_metadata:
                self.metadata.request_update_no_wait(reset_equivalent=False)
            return {node: builder.build() for node, builder in builders.items()}

    @staticmethod
    def request_version(data: FetchRequestData, max_version: int) -> int:
        """The version to send: the broker's highest, capped at 12 without topic ids."""
        return max_version if data.can_use_topic_ids else min(max_version, LAST_VERSION_WITHOUT_TOPIC_IDS)

    def create_fetch_request(self, data: FetchRequestData, version: int) -> FetchRequest:
        """The FetchRequest message for one node's FetchRequestData at ``version``."""
        config = self.fetch_config
        by_id = version >= 13
        topics: list[FetchRequest_FetchTopic] = []
        index: dict[Any, FetchRequest_FetchTopic] = {}
        for tp, part in data.to_send.items():
            # By the id's int: UUID.__hash__ is a Python call, paid per partition.
            key = part.topic_id.int if by_id else tp.topic
            topic = index.get(key)
            if topic is None:
                topic = index[key] = FetchRequest.FetchTopic(topic=tp.topic, topic_id=part.topic_id, partitions=[])
                topics.append(topic)
            topic.partitions.append(FetchRequest.FetchPartition(
                partition=tp.partition, current_leader_epoch=part.current_leader_epoch,
                fetch_offset=part.fetch_offset, last_fetched_epoch=part.last_fetched_epoch,
                log_start_offset=part.log_start_offset, partition_max_bytes=part.max_bytes))
        forgotten: list[FetchRequest_ForgottenTopic] = []
        findex: dict[Any, FetchRequest_ForgottenTopic] = {}
        for topic_id, tp in data.forgotten(version):
            forgotten_key = topic_id.int if by_id else tp.topic
            entry = findex.get(forgotten_key)
            if entry is None:
                entry = findex[forgotten_key] = FetchRequest.ForgottenTopic(topic=tp.topic, topic_id=topic_id,
                                                                           partitions=[])
                forgotten.append(entry)
            entry.partitions.append(tp.partition)
        return FetchRequest(replica_id=-1, max_wait_ms=config.max_wait_ms, min_bytes=config.min_bytes,
                            max_bytes=config.max_bytes, isolation_level=config.isolation_level,
                            session_id=data.metadata.session_id, session_epoch=data.metadata.epoch,
                            topics=topics, forgotten_topics_data=forgotten, rack_id=config.client_rack)

    def mark_pending(self, node_id: int) -> None:
        with self.lock:
            self.nodes_with_pending_fetch_requests.add(node_id)
            self._fetch_sent[node_id] = time.monotonic()

    # --- handling responses --------------------------------------------------------------

    def handle_fetch_success(self, node_id: int, data: FetchRequestData, response: FetchResponse,
                             version: int) -> None:
        """Advance the node's session and buffer one CompletedFetch per returned partition."""
        with self.lock:
            try:
                sent = self._fetch_sent.pop(node_id, None)
                metrics = self.metrics_manager
                if metrics is not None:
                    if sent is not None:
                        metrics.record_latency((time.monotonic() - sent) * 1000.0)
                    metrics.record_throttle_time(response.throttle_time_ms)
                handler = self.session_handlers.get(node_id)
                if handler is None:
                    log.error("fetch response from node %s with no fetch session handler", node_id)
                    return
                partitions = self._response_partitions(response, version, handler.session_topic_names)
                error_code = response.error_code
                ok = handler.handle_response(error_code, response.session_id,
                                             set(partitions.partitions), partitions.topic_ids, version,
                                             response.throttle_time_ms)
                if not ok:
                    if error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR:
                        self.metadata.request_update_no_wait(reset_equivalent=False)
                    return
                buffered = self.fetch_buffer.buffered_partitions()
                completed = []
                new_leaders: dict[TopicPartition, tuple[int, int]] = {}
                config = self.fetch_config
                isolation_level, check_crcs = config.isolation_level, config.check_crcs
                key_deserializer, value_deserializer = config.key_deserializer, config.value_deserializer
                session_partitions = data.session_partitions
                # Once per partition of every response: locals, and CompletedFetch's
                # arguments by position (keywords cost more than the rest of the call).
                for tp, part in zip(partitions.partitions, partitions.data):
                    request = session_partitions.get(tp)
                    if request is None:
                        raise errors.IllegalStateError("Response for missing {} request partition {}-{}".format(
                            "full" if data.metadata.is_full else "session", *tp))
                    moved = part.error_code in _LEADER_MOVED
                    if moved:
                        leader = part.current_leader  # v12+; older versions: the default, -1/-1
                        if leader.leader_id != -1 and leader.leader_epoch != -1:
                            new_leaders[tp] = (leader.leader_id, leader.leader_epoch)
                    if tp in buffered:
                        # Cannot happen while nodes with buffered data are skipped; the data
                        # will be fetched again since the position has not moved.
                        log.warning("dropping fetched data for %s: it is already buffered", tp)
                        continue
                    if moved:
                        self.metadata.request_update_no_wait(reset_equivalent=False)
                    completed.append(CompletedFetch(tp, part, request.fetch_offset, isolation_level, check_crcs,
                                                    key_deserializer, value_deserializer))
                if config.check_crcs and completed:
                    if self.crc_precheck is not None:
                        self.crc_precheck.add(completed)
                    else:
                        check_crcs_together(completed)
                if metrics is not None and completed:
                    # Java's FetchMetricsAggregator: the response's bytes and records are
                    # recorded once every partition of it has been consumed (drained).
                    aggregator = metrics.new_aggregator([c.partition for c in completed])
                    for c in completed:
                        c.metric_aggregator = aggregator
                self.fetch_buffer.add_all(completed)
                if new_leaders:
                    self._update_leadership(new_leaders, response.node_endpoints)
            finally:
                self.nodes_with_pending_fetch_requests.discard(node_id)

    def _update_leadership(self, new_leaders: dict[TopicPartition, tuple[int, int]],
                           endpoints: list[FetchResponse_NodeEndpoint]) -> None:
        """KIP-951: apply the leaders the answer named; positions follow the updated ones."""
        nodes = [BrokerMetadata(e.node_id, e.host, e.port, e.rack) for e in endpoints if e.node_id >= 0]
        for tp in self.metadata.update_partition_leadership(new_leaders, nodes):
            # The partition may have been unassigned while its fetch was in flight.
            if self.subscriptions.is_assigned(tp):
                log.debug("%s: leader moved to %s (from a fetch answer); the position will be validated",
                          tp, new_leaders[tp][0])
                self.subscriptions.maybe_validate_position_for_current_leader(tp, current_leader(self.metadata, tp))

    @staticmethod
    def _response_partitions(response: FetchResponse, version: int,
                             topic_names: dict[uuid.UUID, str]) -> _ResponsePartitions:
        named: list[TopicPartition] = []
        data: list[FetchResponse_PartitionData] = []
        ids: set[uuid.UUID] = set()
        for topic in response.responses:
            if version >= 13:
                ids.add(topic.topic_id)
                name = topic_names.get(topic.topic_id)
                if name is None:
                    continue  # unknown id: the session handler reports it
            else:
                name = topic.topic
            # tuple.__new__: a NamedTuple's own __new__ is a Python call, paid per partition.
            named += [_new_tuple(TopicPartition, (name, part.partition_index)) for part in topic.partitions]
            data += topic.partitions
        return _ResponsePartitions(named, data, ids)

    def handle_fetch_failure(self, node_id: int, data: FetchRequestData, error: BaseException) -> None:
        """The request failed as a whole: the next one to this node is full again."""
        with self.lock:
            try:
                self._fetch_sent.pop(node_id, None)
                handler = self.session_handlers.get(node_id)
                if handler is not None:
                    handler.handle_error(error)
                    for tp in list(handler.session_partitions):
                        self.subscriptions.clear_preferred_read_replica(tp)
                if isinstance(error, errors.KafkaError) and error.invalid_metadata:
                    self.metadata.request_update_no_wait(reset_equivalent=False)
            finally:
                self.nodes_with_pending_fetch_requests.discard(node_id)

    # --- closing ---------------------------------------------------------------------

    def prepare_close_fetch_session_requests(self) -> dict[int, FetchRequestData]:
        """For each node with an open session, the request that closes it (epoch -1)."""
        out = {}
        with self.lock:
            for node, handler in self.session_handlers.items():
                data = handler.close_request_data()
                if data is not None:
                    out[node] = data
        return out
