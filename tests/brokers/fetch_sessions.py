"""A test-only front that gives Tansu KIP-227 fetch sessions, and the broker kind using it.

Why: neither local broker keeps fetch sessions (the mock and Tansu answer session id 0
to every Fetch), so without this no local test would ever see an *incremental* Fetch
answer, one that leaves out partitions with nothing new. Owns :class:`FetchSessionCache`
(sessions by Kafka's broker rules), :class:`FetchSessionFront` (the TCP front) and
:class:`TansuFetchSessions` (the ``tansu_sessions`` :class:`~tests.brokers.base.Broker`:
a Tansu of its own advertising the front's port, so Metadata and FindCoordinator answers
already name the front and clients never leave it; nothing is rewritten but Fetch).

The rules follow Kafka's ``FetchManager.newContext`` and its fetch contexts (read for
understanding; this is an independent implementation):

- full request (epoch 0 or -1) naming a session id closes that session first;
- epoch 0: full fetch, a new session caching every answered partition (fetch
  parameters, high watermark, log start offset); the answer carries the new id (0 when
  the cache is full and nothing may be evicted);
- epoch -1: sessionless full fetch, answer session id 0;
- epoch N > 0: unknown id -> top-level FETCH_SESSION_ID_NOT_FOUND (70); N != the
  session's epoch -> INVALID_FETCH_SESSION_EPOCH (71); a request version whose topic
  form (ids from v13) differs from the session's -> FETCH_SESSION_TOPIC_ID_ERROR (106).
  Otherwise the named partitions are added or their parameters updated, forgotten ones
  removed (a session left empty is closed and the request answered sessionless), the
  epoch advances, every cached partition is fetched, and the answer names only the
  partitions that have records, a changed high watermark or log start offset, an error,
  a preferred read replica or a diverging epoch (an added partition always qualifies:
  its cached marks start at -1; an error resets the cached high watermark so the
  partition comes again once it clears). Partitions that returned records move to the
  end of the session (Kafka's fairness rotation).
- the cache holds ``max_sessions`` sessions (Kafka's default 1000). A new session when
  full evicts the least recently used one if it was idle more than ``eviction_ms``
  (Kafka's ``min.incremental.fetch.session.eviction.ms``, default 120 s), else the
  smallest session older than ``eviction_ms`` if the new one is bigger, else gets no
  session. ``eviction_ms=0`` makes it plain LRU. :meth:`FetchSessionCache.evict` drops
  a session on demand.

Tansu serves Fetch v0-17, so the front forwards each request at the client's version
(kproto sends v17, topics by id). Upstream, every Fetch (v7+) goes to Tansu as one sessionless full fetch of the same
version with the client's max_wait/min_bytes/max_bytes. An incremental answer with
nothing to report is re-polled until the client's max_wait has passed, as a real broker
holds the request. Each connection is served one request at a time, in order (as Kafka
does); every other API, and Fetch before v7, passes through unchanged. What the front
did is recorded as :class:`FetchEvent` entries (``events()``).
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import uuid
from typing import Any, Callable, NamedTuple, Optional

from kproto.errors import EmbeddedBrokerError
from kproto.tools.embedded import create_topic
from kproto.tools.embedded import TansuBroker as TansuProcess
from kproto.messages import FetchRequest, FetchResponse, MetadataResponse, ProduceRequest
from kproto.protocol import headers
from tests.brokers._net import recv_exact
from tests.brokers.base import BROKER_CAPABILITIES, Broker
from tests.brokers.proxy import BrokerProxy
from tests.brokers.tansu import BrokerStartError

INVALID_SESSION_ID, INITIAL_EPOCH, FINAL_EPOCH = 0, 0, -1
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106
FETCH, METADATA, PRODUCE = 1, 3, 0
_FIRST_SESSION_VERSION = 7
_FIRST_TOPIC_ID_VERSION = 13
_INT32_MAX = 2**31 - 1
_MAX_FRAME = 64 * 1024 * 1024
_REPOLL_PAUSE_S = 0.02

Key = tuple  # (topic name or topic id, partition): ids identify topics from v13


def next_epoch(epoch: int) -> int:
    return 1 if epoch == _INT32_MAX else epoch + 1


class FetchEvent(NamedTuple):
    """One Fetch the front answered. ``kind``: "new_session", "no_session_slot" (epoch 0
    but the cache was full), "sessionless", "incremental" or "session_error".
    Partitions are (topic name, partition) pairs (ids resolved through Metadata)."""

    kind: str
    version: int
    request_session_id: int
    request_epoch: int
    session_id: int                  # the answer's session id
    error_code: int                  # the answer's top-level error
    requested: tuple                 # partitions the request named
    forgotten: tuple                 # partitions it forgot
    answered: tuple                  # partitions the answer names
    session_partitions: tuple        # what the session holds after it (empty: none)


class CachedPartition:
    """A partition in a session: the last fetch parameters and the marks last reported."""

    __slots__ = ("key", "params", "high_watermark", "log_start_offset")

    def __init__(self, key: Key, params: Any, high_watermark: int = -1,
                 log_start_offset: int = -1) -> None:
        self.key = key
        self.params = params  # the request's FetchPartition entry
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset

    def must_respond(self, data: Any, update: bool) -> bool:
        """Whether an incremental answer names this partition (Kafka's rule, see the
        module docstring); with ``update`` the cached marks take the answer's values."""
        respond = bool(data.records)
        if data.high_watermark != self.high_watermark:
            respond = True
            if update:
                self.high_watermark = data.high_watermark
        if data.log_start_offset != self.log_start_offset:
            respond = True
            if update:
                self.log_start_offset = data.log_start_offset
        if data.preferred_read_replica != -1:
            respond = True
        if data.error_code:
            respond = True
            if update:
                self.high_watermark = -1
        diverging = getattr(data, "diverging_epoch", None)
        if diverging is not None and diverging.end_offset >= 0:
            respond = True
        return respond


class FetchSession:
    """One session: its id, next expected epoch, topic form and cached partitions."""

    def __init__(self, session_id: int, uses_topic_ids: bool, partitions: dict[Key, CachedPartition],
                 now_ms: int) -> None:
        self.id = session_id
        self.uses_topic_ids = uses_topic_ids
        self.partitions = partitions  # insertion order is the fetch order
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.creation_ms = now_ms
        self.last_used_ms = now_ms

    def update(self, requested: list[tuple[Key, Any]], forgotten: list[Key]) -> None:
        """An incremental request's changes: named partitions added or their fetch
        parameters replaced, forgotten ones removed."""
        for key, params in requested:
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(key, params)
            else:
                cached.params = params
        for key in forgotten:
            self.partitions.pop(key, None)


class FetchSessionCache:
    """Sessions by id, bounded and evicted as Kafka's broker does (see module docstring)."""

    def __init__(self, max_sessions: int = 1000, eviction_ms: int = 120_000,
                 clock_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000)) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self.clock_ms = clock_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evicted: list[int] = []
        self.lock = threading.RLock()

    def get(self, session_id: int) -> Optional[FetchSession]:
        with self.lock:
            return self.sessions.get(session_id)

    def remove(self, session_id: int) -> Optional[FetchSession]:
        with self.lock:
            return self.sessions.pop(session_id, None)

    def evict(self, session_id: int) -> bool:
        """Drop a session now (as the broker's eviction would); True if it existed."""
        with self.lock:
            if self.sessions.pop(session_id, None) is None:
                return False
            self.evicted.append(session_id)
            return True

    def touch(self, session: FetchSession) -> None:
        with self.lock:
            session.last_used_ms = self.clock_ms()

    def create(self, uses_topic_ids: bool, partitions: dict[Key, CachedPartition]) -> int:
        """A new session's id, or 0 when the cache is full and nothing may be evicted."""
        with self.lock:
            now = self.clock_ms()
            if len(self.sessions) >= self.max_sessions and not self._try_evict(len(partitions), now):
                return INVALID_SESSION_ID
            session_id = INVALID_SESSION_ID
            while session_id == INVALID_SESSION_ID or session_id in self.sessions:
                session_id = random.randint(1, _INT32_MAX - 1)
            self.sessions[session_id] = FetchSession(session_id, uses_topic_ids, partitions, now)
            return session_id

    def _try_evict(self, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - lru.last_used_ms > self.eviction_ms or self.eviction_ms == 0:
            victim = lru
        else:
            old = [s for s in self.sessions.values() if now - s.creation_ms > self.eviction_ms]
            if not old:
                return False
            victim = min(old, key=lambda s: (len(s.partitions), s.id))
            if size <= len(victim.partitions):
                return False
        return self.evict(victim.id)


def _keys(topics: list, by_id: bool, index: str = "partition_index") -> list[tuple[Key, Any]]:
    """(key, entry) of each partition of response topics (request topics: ``index`` is
    "partition"), in order."""
    return [((t.topic_id if by_id else t.topic, getattr(p, index)), p) for t in topics for p in t.partitions]


class FetchSessionFront(BrokerProxy):
    """Listens on 127.0.0.1 and serves KIP-227 sessions in front of ``upstream`` (which
    may be set after construction). :class:`BrokerProxy`'s listener and request log
    (``requests()``) are reused; each connection is served here, one request at a time."""

    def __init__(self, upstream: Optional[tuple[str, int]] = None, *, max_sessions: int = 1000,
                 eviction_ms: int = 120_000) -> None:
        self.cache = FetchSessionCache(max_sessions, eviction_ms)
        self.errors: list[BaseException] = []  # what a serving thread hit (tests check it)
        self._events: list[FetchEvent] = []
        self._topic_names: dict[uuid.UUID, str] = {}
        super().__init__(upstream)  # type: ignore[arg-type]  # starts accepting

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def events(self) -> list[FetchEvent]:
        """Every Fetch the front answered so far, in order."""
        with self._lock:
            return list(self._events)

    def clear_events(self) -> None:
        with self._lock:
            self._events.clear()

    def evict(self, session_id: int) -> bool:
        return self.cache.evict(session_id)

    # --- connections -------------------------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        up: Optional[socket.socket] = None
        try:
            assert self.upstream is not None, "FetchSessionFront.upstream is not set"
            up = socket.create_connection(self.upstream)
            self._sockets.append(up)
            while True:
                frame = _read_frame(client)
                if frame is None:
                    break
                self._record(struct.pack(">i", len(frame)) + frame)
                api_key, version = struct.unpack_from(">hh", frame)
                if api_key == FETCH and version >= _FIRST_SESSION_VERSION:
                    _write_frame(client, self._fetch(frame, version, up))
                    continue
                _write_frame(up, frame)
                if api_key == PRODUCE and _acks(frame, version) == 0:
                    continue  # acks=0: the broker answers nothing
                answer = _read_frame(up)
                if answer is None:
                    break
                if api_key == METADATA:
                    self._learn_topic_ids(answer, version)
                _write_frame(client, answer)
        except OSError:
            pass
        except BaseException as exc:  # recorded for the tests, then the connection drops
            self.errors.append(exc)
        finally:
            for s in (client, up):
                if s is not None:
                    _shutdown(s)
                    s.close()

    def _learn_topic_ids(self, frame: bytes, version: int) -> None:
        if version < 10:
            return
        _, pos = headers.decode_response_header(frame, headers.response_header_version(METADATA, version))
        try:
            md = MetadataResponse.decode(memoryview(frame)[pos:], version, allow_trailing=True)
        except Exception:  # a name map for the event log only: never break the exchange
            return
        with self._lock:
            for t in md.topics:
                if t.name is not None and t.topic_id.int:
                    self._topic_names[t.topic_id] = t.name

    def _name(self, topic: Any) -> str:
        if isinstance(topic, uuid.UUID):
            with self._lock:
                return self._topic_names.get(topic, str(topic))
        return topic

    def _named(self, keys) -> tuple:
        return tuple((self._name(t), p) for t, p in keys)

    # --- Fetch -------------------------------------------------------------------------

    def _fetch(self, frame: bytes, version: int, up: socket.socket) -> bytes:
        hv = headers.request_header_version(FETCH, version)
        _, _, correlation_id, client_id, pos = headers.decode_request_header(frame, hv)
        request = FetchRequest.decode(memoryview(frame)[pos:], version)
        by_id = version >= _FIRST_TOPIC_ID_VERSION
        requested = _keys(request.topics, by_id, "partition")
        forgotten = [((f.topic_id if by_id else f.topic), p)
                     for f in request.forgotten_topics_data for p in f.partitions]
        sid, epoch = request.session_id, request.session_epoch
        cache = self.cache

        def answer(response: Any, kind: str, session: Optional[FetchSession] = None) -> bytes:
            answered = _keys(response.responses, by_id)
            with cache.lock:
                held = tuple(session.partitions) if session is not None else ()
            event = FetchEvent(kind, version, sid, epoch, response.session_id, response.error_code,
                               self._named(k for k, _ in requested), self._named(forgotten),
                               self._named(k for k, _ in answered), self._named(held))
            with self._lock:
                self._events.append(event)
            hv_out = headers.response_header_version(FETCH, version)
            return struct.pack(">i", correlation_id) + (b"\x00" if hv_out else b"") + response.encode(version)

        def upstream(entries: list[tuple[Key, Any]], max_wait_ms: int) -> Any:
            return self._upstream_fetch(up, request, version, client_id, entries, max_wait_ms)

        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # full
            if sid != INVALID_SESSION_ID:
                cache.remove(sid)
            response = upstream(requested, request.max_wait_ms)
            if epoch == FINAL_EPOCH or response.error_code:
                return answer(response, "sessionless")
            params = dict(requested)
            partitions = {key: CachedPartition(key, params[key], data.high_watermark, data.log_start_offset)
                          for key, data in _keys(response.responses, by_id) if key in params}
            response.session_id = cache.create(by_id, partitions)
            if response.session_id == INVALID_SESSION_ID:
                return answer(response, "no_session_slot")
            return answer(response, "new_session", cache.get(response.session_id))

        def session_error(code: int) -> bytes:
            return answer(FetchResponse(error_code=code, session_id=INVALID_SESSION_ID, responses=[]),
                          "session_error")

        with cache.lock:
            session = cache.get(sid)
            if session is None:
                return session_error(FETCH_SESSION_ID_NOT_FOUND)
            if session.epoch != epoch:
                return session_error(INVALID_FETCH_SESSION_EPOCH)
            if session.uses_topic_ids != by_id:
                return session_error(FETCH_SESSION_TOPIC_ID_ERROR)
            session.update(requested, forgotten)
            closed = not session.partitions
            if closed:
                cache.remove(sid)
            else:
                cache.touch(session)
                session.epoch = next_epoch(session.epoch)
            expected = session.epoch
            entries = [(key, c.params) for key, c in session.partitions.items()]
        if closed:  # emptied: closed, answered as a sessionless fetch
            return answer(upstream(requested, request.max_wait_ms), "sessionless")

        deadline = time.monotonic() + request.max_wait_ms / 1000
        while True:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            response = upstream(entries, remaining_ms)
            with cache.lock:
                ready = response.error_code or any(
                    session.partitions[key].must_respond(data, False)
                    for key, data in _keys(response.responses, by_id) if key in session.partitions)
            if ready or time.monotonic() >= deadline:
                break
            time.sleep(_REPOLL_PAUSE_S)
        with cache.lock:
            if session.epoch != expected:  # a duplicate request raced this one (Kafka checks too)
                return answer(FetchResponse(error_code=INVALID_FETCH_SESSION_EPOCH, session_id=sid,
                                            responses=[]), "session_error")
            response.session_id = sid
            if response.error_code:
                return answer(response, "incremental", session)
            for topic in response.responses:
                kept = []
                for data in topic.partitions:
                    key = (topic.topic_id if by_id else topic.topic, data.partition_index)
                    cached = session.partitions.get(key)
                    if cached is not None and cached.must_respond(data, True):
                        kept.append(data)
                        if data.records:  # rotate: partitions with data go to the back
                            session.partitions[key] = session.partitions.pop(key)
                topic.partitions = kept
            response.responses = [t for t in response.responses if t.partitions]
        return answer(response, "incremental", session)

    def _upstream_fetch(self, up: socket.socket, request: Any, version: int, client_id: Optional[str],
                        entries: list[tuple[Key, Any]], max_wait_ms: int) -> Any:
        """One sessionless full Fetch of ``entries`` upstream (same version and limits)."""
        by_id = version >= _FIRST_TOPIC_ID_VERSION
        topics: list = []
        for (topic, _), params in entries:  # consecutive partitions of a topic share an entry
            if not topics or (topics[-1].topic_id if by_id else topics[-1].topic) != topic:
                topics.append(FetchRequest.FetchTopic(topic_id=topic, partitions=[]) if by_id
                              else FetchRequest.FetchTopic(topic=topic, partitions=[]))
            topics[-1].partitions.append(params)
        fields = {name: getattr(request, name) for name in
                  ("cluster_id", "replica_id", "replica_state", "min_bytes", "max_bytes",
                   "isolation_level", "rack_id")}
        full = FetchRequest(**fields, max_wait_ms=max_wait_ms, session_id=INVALID_SESSION_ID,
                            session_epoch=FINAL_EPOCH, topics=topics, forgotten_topics_data=[])
        hv = headers.request_header_version(FETCH, version)
        _write_frame(up, headers.encode_request_header(FETCH, version, 0, client_id, hv) + full.encode(version))
        frame = _read_frame(up)
        if frame is None:
            raise ConnectionError("upstream closed the connection during a Fetch")
        _, pos = headers.decode_response_header(frame, headers.response_header_version(FETCH, version))
        return FetchResponse.decode(memoryview(frame)[pos:], version)


def _read_frame(s: socket.socket) -> Optional[bytes]:
    head = recv_exact(s, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    if not 0 <= size <= _MAX_FRAME:
        raise ConnectionError("frame size {} out of range".format(size))
    return recv_exact(s, size)


def _write_frame(s: socket.socket, frame: bytes) -> None:
    s.sendall(struct.pack(">i", len(frame)) + frame)


def _acks(frame: bytes, version: int) -> int:
    _, _, _, _, pos = headers.decode_request_header(frame, headers.request_header_version(PRODUCE, version))
    return ProduceRequest.decode(memoryview(frame)[pos:], version).acks


def _shutdown(s: socket.socket) -> None:
    # shutdown() (not just close()) wakes threads blocked in accept()/recv().
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class TansuFetchSessions(Broker):
    """A Tansu of its own behind a :class:`FetchSessionFront` (broker kind
    ``tansu_sessions``): Tansu advertises the front's port, so every client stays on the
    front. ``front`` gives the event log (``front.events()``) and ``front.evict(id)``."""

    name = "tansu_sessions"

    def __init__(self, startup_timeout: float = 30.0, **front_options: Any) -> None:
        super().__init__()
        self.capabilities = BROKER_CAPABILITIES["tansu_sessions"]
        self.front = FetchSessionFront(**front_options)
        self._tansu = TansuProcess(startup_timeout_s=startup_timeout, advertised_port=self.front.port)
        try:
            self._tansu.start()
        except EmbeddedBrokerError as exc:
            self.front.close()
            raise BrokerStartError(str(exc)) from exc
        self.front.upstream = ("127.0.0.1", self._tansu.port)

    @property
    def bootstrap_servers(self) -> str:  # type: ignore[override]
        return self.front.bootstrap_servers

    def _create_topic(self, name: str, partitions: int, replication: int) -> None:
        create_topic(self.bootstrap_servers, name, partitions, replication)

    def close(self) -> None:
        self._tansu.stop()
        self.front.close()
