"""Incremental fetch sessions (KIP-227): one FetchSessionHandler per broker node.

Owns the client side of a fetch session with one node: the session id and epoch the next
request carries (``FetchMetadata``), the partitions the broker holds in the session and
their last sent fetch parameters, and the topic-id to name map used to read v13+
responses. Java's ``FetchSessionHandler`` in snake_case.

The epoch protocol: a request with session id 0 and epoch 0 asks for a new session (a
full request listing every partition); the broker answers with a session id, after which
requests carry that id with epochs 1, 2, ... and list only partitions that were added or
whose fetch parameters changed, plus the partitions to forget. Epoch -1 means no session
(a "legacy" full request every time) or, with an id, closes the session. Any error, or a
response that does not match the session, makes the next request a full one.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import NamedTuple, Optional

from kproto.errors import ErrorCode
from kproto.structs import TopicPartition

log = logging.getLogger("kproto.consumer.fetch")

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
ZERO_UUID = uuid.UUID(int=0)
_INT32_MAX = 2**31 - 1


def next_epoch(prev_epoch: int) -> int:
    if prev_epoch < 0:
        return FINAL_EPOCH  # a sessionless chain stays sessionless
    return 1 if prev_epoch == _INT32_MAX else prev_epoch + 1


class FetchMetadata(NamedTuple):
    """The (session id, epoch) pair a fetch request carries."""

    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def next_close_existing(self) -> "FetchMetadata":
        """Close this session and open a new one with a full request."""
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    def next_incremental(self) -> "FetchMetadata":
        return FetchMetadata(self.session_id, next_epoch(self.epoch))

    def final_epoch(self) -> "FetchMetadata":
        return FetchMetadata(self.session_id, FINAL_EPOCH)

    @staticmethod
    def new_incremental(session_id: int) -> "FetchMetadata":
        return FetchMetadata(session_id, next_epoch(INITIAL_EPOCH))


INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)


class PartitionData(NamedTuple):
    """What is asked of one partition (Java's ``FetchRequest.PartitionData``)."""

    topic_id: uuid.UUID
    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


class TopicIdPartition(NamedTuple):
    topic_id: uuid.UUID
    topic_partition: TopicPartition


@dataclasses.dataclass(frozen=True)
class FetchRequestData:
    """One request's worth of session changes, built by ``FetchSessionHandler.Builder``.

    ``to_send`` lists the partitions the request names (all of them when full);
    ``to_forget`` and ``to_replace`` are removed partitions and partitions whose topic id
    changed (forgotten too from v13, when ids identify topics). ``session_partitions`` is
    everything the session fetches after this request.
    """

    to_send: dict[TopicPartition, PartitionData]
    to_forget: list[TopicIdPartition]
    to_replace: list[TopicIdPartition]
    session_partitions: dict[TopicPartition, PartitionData]
    metadata: FetchMetadata
    can_use_topic_ids: bool

    def forgotten(self, version: int) -> list[TopicIdPartition]:
        return self.to_forget + (self.to_replace if version >= 13 else [])


class FetchSessionHandler:
    """The fetch session with one node; see the module docstring."""

    def __init__(self, node_id: int, incremental: bool = True) -> None:
        self.node_id = node_id
        self._incremental = incremental
        self.next_metadata = INITIAL if incremental else LEGACY
        self.session_partitions: dict[TopicPartition, PartitionData] = {}
        self.session_topic_names: dict[uuid.UUID, str] = {}
        #: The node answered the last full request without opening a session (session id
        #: 0: a broker without sessions, a full session cache, or incremental sessions
        #: off), so the next request is full too and names only what it asks for.
        self.sessionless = False

    @property
    def session_id(self) -> int:
        return self.next_metadata.session_id

    def new_builder(self) -> "FetchSessionHandler.Builder":
        return FetchSessionHandler.Builder(self)

    class Builder:
        """Collects this round's partitions, then ``build()`` diffs them against the session."""

        def __init__(self, handler: "FetchSessionHandler") -> None:
            self._handler = handler
            self._next: dict[TopicPartition, PartitionData] = {}
            self._topic_names: dict[uuid.UUID, str] = {}
            self._partitions_without_topic_ids = 0
            self._last_topic_id: Optional[uuid.UUID] = None  # the last one add() recorded

        def add(self, tp: TopicPartition, data: PartitionData) -> None:
            self._next[tp] = data
            # UUIDs compared by their ints: UUID.__eq__ and __hash__ are Python calls, paid
            # per partition; the partitions of a topic come in a row with the same id object.
            topic_id = data.topic_id
            if not topic_id.int:
                self._partitions_without_topic_ids += 1
            elif topic_id is not self._last_topic_id:
                self._topic_names.setdefault(topic_id, tp.topic)
                self._last_topic_id = topic_id

        def build(self) -> FetchRequestData:
            handler = self._handler
            can_use_topic_ids = self._partitions_without_topic_ids == 0
            metadata = handler.next_metadata
            if metadata.is_full:
                handler.session_partitions = dict(self._next)
                handler.session_topic_names = self._topic_names if can_use_topic_ids else {}
                return FetchRequestData(dict(self._next), [], [], dict(handler.session_partitions), metadata,
                                        can_use_topic_ids)
            nxt = self._next
            added: list[TopicIdPartition] = []
            removed: list[TopicIdPartition] = []
            altered: list[TopicIdPartition] = []
            replaced: list[TopicIdPartition] = []
            session = handler.session_partitions
            for tp, prev in list(session.items()):
                data = nxt.pop(tp, None)
                if data is None:
                    del session[tp]
                    removed.append(TopicIdPartition(prev.topic_id, tp))
                    # A removed partition without an id can only be forgotten by name.
                    if not prev.topic_id.int:
                        can_use_topic_ids = False
                elif prev.topic_id.int != data.topic_id.int and prev.topic_id.int and data.topic_id.int:
                    # Recreated topic: send it again under the new id, forget the old id.
                    nxt[tp] = data
                    session[tp] = data
                    replaced.append(TopicIdPartition(prev.topic_id, tp))
                elif prev != data:
                    # Re-added at the end of `nxt` so the unseen (new) partitions come first.
                    nxt[tp] = data
                    session[tp] = data
                    altered.append(TopicIdPartition(data.topic_id, tp))
            for tp, data in nxt.items():
                if tp in session:
                    break  # the rest were moved to the end above: all already in the session
                session[tp] = data
                added.append(TopicIdPartition(data.topic_id, tp))
            handler.session_topic_names = self._topic_names if can_use_topic_ids else {}
            log.debug("fetch session %s to node %s: added %s, altered %s, removed %s, replaced %s",
                      metadata, handler.node_id, added, altered, removed, replaced)
            return FetchRequestData(dict(nxt), removed, replaced, dict(session), metadata, can_use_topic_ids)

    # --- responses --------------------------------------------------------------------

    def handle_response(self, error_code: int, session_id: int, response_partitions: set[TopicPartition],
                        response_topic_ids: set[uuid.UUID], version: int, throttle_time_ms: int = 0) -> bool:
        """Advance the session from a response's top-level fields; False if its data is unusable.

        ``response_partitions`` are the partitions the response names (mapped to names);
        ``response_topic_ids`` the ids it used (v13+), to spot ids the session never sent.
        """
        if error_code != ErrorCode.NONE:
            log.info("node %s sent a top-level fetch error %d for session %s", self.node_id, error_code,
                     self.next_metadata)
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.next_metadata = self._initial()
            else:
                self.next_metadata = self._close_existing()
            return False
        if self.next_metadata.is_full:
            if not response_partitions and throttle_time_ms > 0:
                # KIP-219: a throttled full fetch comes back empty; not an error, just retry full.
                self.next_metadata = self._initial()
                return False
            problem = self._verify(response_partitions, response_topic_ids, version, full=True)
            if problem:
                log.info("node %s: full fetch response does not match the request: %s", self.node_id, problem)
                self.next_metadata = self._initial()
                return False
            self.sessionless = session_id == INVALID_SESSION_ID or not self._incremental
            if self.sessionless:
                self.next_metadata = self._initial()
            else:
                self.next_metadata = FetchMetadata.new_incremental(session_id)
            return True
        problem = self._verify(response_partitions, response_topic_ids, version, full=False)
        if problem:
            log.info("node %s: incremental fetch response does not match the session: %s", self.node_id, problem)
            self.next_metadata = self._close_existing()
            return False
        if session_id == INVALID_SESSION_ID:
            self.next_metadata = self._initial()
        else:
            self.next_metadata = self.next_metadata.next_incremental()
        return True

    def handle_error(self, error: BaseException) -> None:
        """The request failed (disconnect, timeout): the next request is full again."""
        log.info("fetch request %s to node %s failed: %s", self.next_metadata, self.node_id, error)
        self.next_metadata = self._close_existing()

    def notify_close(self) -> None:
        """The next request (sent with no partitions) closes the session on the broker."""
        self.next_metadata = self.next_metadata.final_epoch()

    def close_request_data(self) -> Optional[FetchRequestData]:
        """The request that closes an open session, or None when there is none to close."""
        if self.next_metadata.session_id == INVALID_SESSION_ID:
            return None
        self.notify_close()
        return FetchRequestData({}, [], [], {}, self.next_metadata, bool(self.session_topic_names))

    def _initial(self) -> FetchMetadata:
        return INITIAL if self._incremental else LEGACY

    def _close_existing(self) -> FetchMetadata:
        if not self._incremental:
            return LEGACY
        return self.next_metadata.next_close_existing()

    def _verify(self, partitions: set[TopicPartition], topic_ids: set[uuid.UUID], version: int,
                full: bool) -> str:
        problems = []
        extra = partitions - self.session_partitions.keys()
        if extra:
            problems.append("extra partitions {}".format(sorted(extra)))
        if full:
            omitted = self.session_partitions.keys() - partitions
            if omitted:
                problems.append("omitted partitions {}".format(sorted(omitted)))
        if version >= 13:
            unknown = topic_ids - set(self.session_topic_names)
            if unknown:
                problems.append("unknown topic ids {}".format(sorted(str(u) for u in unknown)))
        return "; ".join(problems)
