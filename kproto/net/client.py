"""NetworkClient: many broker connections driven by one ``selectors`` loop.

Owns the selector and its wakeup socketpair, the locks, the poll loop, and the fate of
requests when a connection closes. The node table (one :class:`BrokerConnection` per node
id), the requests queued for nodes that are not ready yet and the outcomes to deliver live
in a :class:`~kproto.net.client_state.ClientState`, with the client's close and
connection-error hooks: the one object its four helpers are handed, so none of them
reaches into the client. The helpers: the ApiVersions negotiation of every new
connection and the version choice per node (:class:`~kproto.net.api_versions.ApiVersions`),
the connect, request, idle and SASL session deadlines (:mod:`kproto.net.timeouts`), the
metadata refresh loop feeding :class:`ClusterMetadata` (:class:`MetadataUpdater`) and SASL
(:class:`ChannelAuthenticator`). Java's ``NetworkClient`` and ``ConsumerNetworkClient`` in
one, with their names in snake_case.

Threading model. Any thread may call ``send()``; it only queues bytes in the sans-IO
connection under ``_lock`` and wakes a thread blocked in ``select``. All socket I/O and
selector changes happen inside ``poll()``, which one thread at a time runs (``_io_lock``;
a second poller wakes the first and waits its turn). ``_lock`` is never held across the
blocking ``select``, and futures are completed (callbacks run) with no lock held, so a
callback may call ``send()``. This is what lets the classic engine's heartbeat thread
send Heartbeats while the application thread polls.

Failure semantics: a connection that closes fails every request in flight on it with a
retriable ``KafkaConnectionError`` (a request past its deadline with
``RequestTimeoutError``) and, unless the client closed it itself, asks for a metadata
refresh (:meth:`MetadataUpdater.handle_server_disconnect`); a request for a node in reconnect backoff fails at once with
``NodeNotReadyError`` (fail fast, the caller decides when to retry).

Authentication (``SASL_PLAINTEXT``/``SASL_SSL``): after ApiVersions a connection runs
:class:`~kproto.net.sasl.SaslClientAuthenticator` (state AUTHENTICATING) and is ready only
once it completes; queued requests wait. A failed authentication (bad credentials, a
server signature that does not verify, the broker hanging up mid-exchange) is fatal, as
Java's ``authenticationException(node)``: the node's requests and metadata waiters fail
with the ``AuthenticationError``, the node backs off, and the next ``poll()`` raises it
once (Java's ``ConsumerNetworkClient.poll``); it is never retried silently. So is a TLS
handshake that fails verification (``SslAuthenticationError``: a broker certificate that
does not verify, or the broker refusing ours); a TCP refusal or reset stays retriable.

``network_listener`` (:mod:`kproto.net.network_listener`; None by default) observes
connections, bytes, frames and select/I-O time: the consumer's network metrics use it.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from typing import Any

from kproto import errors
from kproto.clock import monotonic_ms
from kproto.net import timeouts
from kproto.net.api_versions import API_VERSIONS, ApiVersions
from kproto.net.broker import BrokerConnection, ConnectionState
from kproto.net.client_state import ClientState, Unsent
from kproto.net.config import NetworkClientConfig, parse_bootstrap_servers
from kproto.net.connection import Connection, InFlightRequest
from kproto.net.future import Future
from kproto.net.metadata import ClusterMetadata, response_needs_metadata_update
from kproto.net.metadata_updater import METADATA, MetadataUpdater
from kproto.net.network_listener import NetworkListener
from kproto.net.channel_authenticator import SASL, ChannelAuthenticator
from kproto.net.tls import build_ssl_context
from kproto.structs import BrokerMetadata

log = logging.getLogger("kproto.net")


class NetworkClient:
    """Non-blocking client for many brokers; see the module docstring for the threading."""

    def __init__(self, *, network_listener: NetworkListener | None = None,
                 config: NetworkClientConfig | None = None, **configs: Any) -> None:
        """Settings as ``config`` (built once by the consumer) or as keyword arguments;
        unknown keywords are ignored so a whole consumer configuration can be handed over."""
        if config is not None and configs:
            raise errors.IllegalArgumentError("NetworkClient takes config or keyword settings, not both")
        self.config = config if config is not None else NetworkClientConfig.from_config(configs)
        self._listener = network_listener
        ssl_context = build_ssl_context(self.config)
        bootstrap = [BrokerMetadata("bootstrap-{}".format(i), host, port, None)
                     for i, (host, port) in enumerate(
                         parse_bootstrap_servers(self.config.bootstrap_servers))]
        self.cluster = ClusterMetadata(metadata_max_age_ms=self.config.metadata_max_age_ms,
                                       retry_backoff_ms=self.config.retry_backoff_ms,
                                       retry_backoff_max_ms=self.config.retry_backoff_max_ms,
                                       bootstrap_brokers=bootstrap)
        # The node table, queues and outcomes, with the hooks the helpers may call.
        self._state = ClientState(self.config, self.cluster, ssl_context=ssl_context,
                                  listener=network_listener, clock=monotonic_ms,
                                  close_node=self._close_node, connection_error=self._connection_error)
        self._authenticator = ChannelAuthenticator(self._state)  # SASL; checks its settings now
        self._metadata_updater = MetadataUpdater(self._state)  # checks the recovery settings now
        self._lock = threading.RLock()
        self._io_lock = threading.RLock()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._registered: dict[Any, tuple[socket.socket, int]] = {}
        self._nodes = self._state.nodes
        self._unsent = self._state.unsent
        # Metadata-refresh waiters, completed like responses but not returned by poll().
        self._settled: list[tuple[Future, Any, BaseException | None]] = []
        self.cluster.set_settle(lambda f, value, exc: self._settled.append((f, value, exc)))
        self._api_versions = ApiVersions(self._state, self._authenticator.start,
                                         self._metadata_updater.request_rebootstrap)
        self._selecting = False
        self._closed = False
        # When the metadata loop next wants a poll (io_interest's hint for event loops).
        self._metadata_due_ms = 0.0
        # Java's disconnectAsync: closed by the next poll, on whichever thread owns the I/O.
        self._pending_disconnects: set[Any] = set()

    # --- public API -------------------------------------------------------------------

    def send(self, node_id: Any, request: Any, *, version: int | None = None,
             timeout_ms: float | None = None) -> Future:
        """Queue ``request`` for ``node_id``; the future completes with the decoded response.

        ``version=None`` uses the highest version both sides support (capped at
        ``kproto.net.client_versions.client_max_version``). The connection is opened if needed. Fails fast with
        ``NodeNotReadyError`` while the node is in reconnect backoff.
        """
        future = Future()
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        with self._lock:
            if self._closed:
                return future.failure(errors.IllegalStateError("network client is closed"))
            now = monotonic_ms()
            try:
                node = self._state.node(node_id)
            except errors.KafkaError as exc:
                return future.failure(exc)
            if node.state is ConnectionState.DISCONNECTED and not node.can_connect(now):
                return future.failure(errors.NodeNotReadyError(
                    "node {} is in reconnect backoff for {:.0f} ms".format(
                        node_id, node.backoff_until_ms - now)))
            self._unsent[node_id].append(Unsent(request, version, future, now + timeout, timeout))
            if node.is_ready():
                self._flush_unsent(node, now)
            wake = self._selecting
        if wake:
            self.wakeup()
        return future

    def poll(self, timeout_ms: float | None = None, future: Future | None = None) -> list[Any]:
        """Do network I/O; return the responses completed by this call.

        Blocks up to ``timeout_ms`` (default ``request_timeout_ms``); with ``future``,
        returns as soon as it is done (or the timeout passes).
        """
        if timeout_ms is None:
            timeout_ms = self.config.request_timeout_ms
        deadline = monotonic_ms() + timeout_ms
        responses: list[Any] = []
        while True:
            remaining = max(deadline - monotonic_ms(), 0.0)
            if future is not None and future.is_done:
                remaining = 0.0
            responses.extend(self._poll_once(remaining))
            self._maybe_throw_fatal_error()
            if future is None or future.is_done or monotonic_ms() >= deadline:
                return responses

    def _maybe_throw_fatal_error(self) -> None:
        with self._lock:
            error = self._authenticator.take_fatal_error()
        if error is not None:
            raise error

    def authentication_exception(self, node_id: Any) -> BaseException | None:
        """The authentication failure of the node's last connection, if that is how it ended."""
        with self._lock:
            node = self._nodes.get(node_id)
            error = node.last_error if node is not None else None
            return error if isinstance(error, errors.AuthenticationError) else None

    def wakeup(self) -> None:
        """Make a ``poll()`` blocked in another thread return soon (safe from any thread)."""
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, InterruptedError, OSError):
            pass  # the pipe is full (already woken) or closed

    def ready(self, node_id: Any) -> bool:
        """Is the node ready for a request now? Starts connecting if it may."""
        with self._lock:
            if self.is_ready(node_id):
                return True
            node = self._nodes.get(node_id)
            if node is None or node.can_connect(monotonic_ms()):
                self._state.maybe_connect(node_id)
                wake = self._selecting
            else:
                wake = False
        if wake:
            self.wakeup()
        return False

    def is_ready(self, node_id: Any) -> bool:
        with self._lock:
            node = self._nodes.get(node_id)
            return (node is not None and node.is_ready() and node.proto is not None
                    and node.proto.can_send_more())

    def bootstrap_connected(self) -> bool:
        """Is a connection to a bootstrap server or to a broker the metadata named ready?"""
        return any(self.is_ready(b.node_id) for b in self.cluster.known_brokers())

    def is_disconnected(self, node_id: Any) -> bool:
        with self._lock:
            node = self._nodes.get(node_id)
            return node is None or node.state is ConnectionState.DISCONNECTED

    def connection_state(self, node_id: Any) -> ConnectionState:
        with self._lock:
            node = self._nodes.get(node_id)
            return ConnectionState.DISCONNECTED if node is None else node.state

    def connection_failed(self, node_id: Any) -> BaseException | None:
        """The error that closed the node's last connection, if it is disconnected."""
        with self._lock:
            node = self._nodes.get(node_id)
            if node is None or node.state is not ConnectionState.DISCONNECTED:
                return None
            return node.last_error

    def connection_failures(self) -> list[tuple[str, int, BaseException]]:
        """Why the brokers this client tried are unreachable: ``("host:port", consecutive
        failures, last error)`` for each node that is disconnected after a failed
        connection (refused, name not resolved, TLS or SASL refused, closed mid-handshake),
        in node order. Empty while no connection has failed. Timeout errors quote it, so a
        wait that ran out says what was tried and why it failed."""
        with self._lock:
            return [("{}:{}".format(node.host, node.port), node.failures, node.last_error)
                    for node in self._nodes.values()
                    if node.state is ConnectionState.DISCONNECTED and node.last_error is not None]

    def connection_delay(self, node_id: Any) -> float:
        """Ms before a connection attempt to the node is allowed (inf: connecting/connected)."""
        with self._lock:
            node = self._nodes.get(node_id)
            return 0.0 if node is None else node.connection_delay(monotonic_ms())

    def in_flight_request_count(self, node_id: Any = None) -> int:
        with self._lock:
            nodes = [self._nodes.get(node_id)] if node_id is not None else list(self._nodes.values())
            return sum(n.proto.in_flight_count for n in nodes if n is not None and n.proto)

    def has_pending_output(self) -> bool:
        """Whether a connection still holds request bytes not written to its socket."""
        with self._lock:
            return any(n.proto.has_pending_output() for n in self._nodes.values() if n.proto)

    def pending_request_count(self, node_id: Any = None) -> int:
        """Requests queued and not yet written to a socket."""
        with self._lock:
            if node_id is not None:
                return len(self._unsent.get(node_id, ()))
            return sum(len(q) for q in self._unsent.values())

    def least_loaded_node(self) -> Any:
        """A node to send to when any will do: fewest in flight among ready ones, else one
        that is connecting, else one that may connect now; None if all are backing off."""
        with self._lock:
            return self._state.least_loaded_node()

    def api_version(self, api_key: int, node_id: Any = None) -> int | None:
        """The highest version of an API usable with the node (or with every ready node)."""
        with self._lock:
            return self._api_versions.usable_version(api_key, node_id)

    def broker_api_versions(self, node_id: Any) -> dict[int, tuple[int, int]]:
        """The (min, max) versions the node advertised, by API key."""
        with self._lock:
            return self._api_versions.node_api_versions(node_id)

    def request_metadata_update(self, reset_equivalent: bool = True) -> Future:
        """Ask for a metadata refresh on the next poll; completes after it is applied.
        ``reset_equivalent=False`` when retrying for fresher leaders (see
        ``ClusterMetadata.request_update_no_wait``)."""
        with self._lock:
            future = self.cluster.request_update(reset_equivalent)
            wake = self._selecting
        if wake:
            self.wakeup()
        return future

    def io_interest(self) -> tuple[list[tuple[Any, int]], float]:
        """For a shell that runs ``poll(0)`` from an event loop instead of blocking in
        ``select`` (``kproto.aio``): the sockets with the selector events the next poll
        waits for (the wakeup socket first), and ms until a connect, request, idle or
        metadata deadline needs a poll even if no socket is ready. Reads state only."""
        with self._lock:
            if self._closed:
                return [], float("inf")
            now = monotonic_ms()
            wanted: list[tuple[Any, int]] = [(self._wake_r, selectors.EVENT_READ)]
            for node in self._nodes.values():
                mask = node.interest()
                if mask and node.sock is not None:
                    wanted.append((node.sock, mask))
            wait = min(timeouts.next_timeout_ms(self._state, now),
                       max(self._metadata_due_ms - now, 0.0))
            return wanted, wait

    def poll_due_ms(self) -> float:
        """For a shell that polls only when ``io_interest`` says so (``kproto.aio``): ms
        until ``poll(0)`` has work that neither a socket's readiness nor ``io_interest``'s
        deadline announces, 0 when it has some now: outcomes to deliver, a disconnect
        asked for, requests queued or bytes unwritten (a send since the last poll), or a
        metadata refresh requested since (due now or once its backoff passes). Reads
        state only."""
        with self._lock:
            if self._closed:
                return float("inf")
            if self._pending_disconnects or self._state.completed or self._settled:
                return 0.0
            for queue in self._unsent.values():
                if queue:
                    return 0.0
            for node in self._nodes.values():
                if node.proto is not None and node.proto.has_pending_output():
                    return 0.0
            if self._metadata_updater.in_flight is not None:
                return float("inf")  # its answer is a socket's readiness
            return self.cluster.ttl(monotonic_ms())

    def close(self, node_id: Any = None) -> None:
        """Close one node's connection, or (no argument) every connection and the client."""
        self.wakeup()
        with self._io_lock, self._lock:
            now = monotonic_ms()
            targets = [node_id] if node_id is not None else list(self._nodes)
            for nid in targets:
                self._state.close_by_client(nid, now)
            if node_id is None and not self._closed:
                self._closed = True
                for queue in self._unsent.values():
                    for item in queue:
                        self._state.completed.append((item.future, None, errors.Cancelled("client closed")))
                self._unsent.clear()
                self._selector.close()
                self._wake_r.close()
                self._wake_w.close()
        self._complete_futures()

    def disconnect_async(self, node_id: Any) -> None:
        """Close ``node_id``'s connection at the next poll (Java's ``disconnectAsync``): its
        in-flight requests then fail with a connection error. Safe under any caller's lock,
        since it neither waits for the I/O lock nor runs callbacks."""
        with self._lock:
            self._pending_disconnects.add(node_id)
        self.wakeup()

    # --- the poll loop ----------------------------------------------------------------

    def _poll_once(self, timeout_ms: float) -> list[Any]:
        if not self._io_lock.acquire(blocking=False):
            # Another thread is in select: wake it and wait for our turn.
            self.wakeup()
            self._io_lock.acquire()
        try:
            with self._lock:
                if self._closed:
                    raise errors.IllegalStateError("network client is closed")
                now = monotonic_ms()
                self._process_pending_disconnects(now)
                metadata_wait = self._metadata_updater.maybe_update(now)
                self._metadata_due_ms = now + metadata_wait
                timeout_ms = min(timeout_ms, metadata_wait)
                self._write_all(now)
                timeout_ms = min(timeout_ms, timeouts.next_timeout_ms(self._state, now))
                self._sync_selector()
                self._selecting = True
            select_start = time.perf_counter_ns()
            try:
                events = self._selector.select(max(timeout_ms, 0.0) / 1000.0)
            finally:
                select_end = time.perf_counter_ns()
                with self._lock:
                    self._selecting = False
            with self._lock:
                now = monotonic_ms()
                for key, mask in events:
                    if key.data is None:
                        self._drain_wakeup()
                    else:
                        self._handle_io(key.data, mask, now)
                timeouts.handle_timeouts(self._state, now, self._metadata_updater.handle_server_disconnect)
                self._write_all(now)
                if self._listener is not None:
                    self._listener.poll_done(select_end - select_start, time.perf_counter_ns() - select_end)
        finally:
            self._io_lock.release()
        return self._complete_futures()

    def _process_pending_disconnects(self, now: float) -> None:
        pending, self._pending_disconnects = self._pending_disconnects, set()
        for nid in pending:
            self._state.close_by_client(nid, now)

    def _complete_futures(self) -> list[Any]:
        with self._lock:
            done, self._state.completed = self._state.completed, []
            settled, self._settled = self._settled, []
        responses = []
        for future, value, exc in done:
            if future.is_done:
                continue
            if exc is None:
                future.success(value)
                responses.append(value)
            else:
                future.failure(exc)
        for future, value, exc in settled:
            if not future.is_done:
                future.failure(exc) if exc is not None else future.success(value)
        return responses

    def _drain_wakeup(self) -> None:
        try:
            while self._wake_r.recv(1024):
                pass
        except (BlockingIOError, InterruptedError, OSError):
            pass

    def _sync_selector(self) -> None:
        for node_id, node in self._nodes.items():
            want = node.interest()
            have = self._registered.get(node_id)
            if have is not None and (want == 0 or have[0] is not node.sock):
                self._unregister(node_id)
                have = None
            if want == 0:
                continue
            sock = node.sock
            assert sock is not None  # a node without a socket has no interest
            if have is None:
                self._selector.register(sock, want, node_id)
                self._registered[node_id] = (sock, want)
            elif have[1] != want:
                self._selector.modify(sock, want, node_id)
                self._registered[node_id] = (sock, want)

    def _unregister(self, node_id: Any) -> None:
        have = self._registered.pop(node_id, None)
        if have is not None:
            try:
                self._selector.unregister(have[0])
            except (KeyError, ValueError, OSError):
                pass

    def _handle_io(self, node_id: Any, mask: int, now: float) -> None:
        node = self._nodes.get(node_id)
        if node is None or node.sock is None:
            return
        try:
            if node.state in (ConnectionState.CONNECTING, ConnectionState.HANDSHAKE):
                if node.finish_connect(now):
                    self._on_connected(node, now)
                return
            error = None
            if mask & selectors.EVENT_READ:
                pairs, error = node.read(now)
                # Deliver every answer that arrived, even when a later frame was bad.
                for ifr, response in pairs:
                    try:
                        self._on_response(node, ifr, response, now)
                    except errors.KafkaError as exc:
                        error = error or exc
            if error is not None:
                raise error
            if mask & selectors.EVENT_WRITE and node.proto is not None:
                node.write(now)
        except errors.KafkaError as exc:
            self._connection_error(node, exc, now)

    def _connection_error(self, node: BrokerConnection, exc: errors.KafkaError, now: float) -> None:
        exc = self._authenticator.connection_error(node, exc)
        if isinstance(exc, errors.AuthenticationError):
            self._authenticator.failed(node, exc, now)  # fatal: never retried silently
            return
        connecting = node.state in (ConnectionState.CONNECTING, ConnectionState.HANDSHAKE)
        if connecting and node.has_more_addresses() and isinstance(exc, errors.KafkaConnectionError):
            # Try the next address DNS gave for this host before calling it a failure.
            log.debug("node %s: %s; trying the next address", node.node_id, exc)
            self._unregister(node.node_id)
            node.close(now, failed=False)
            try:
                node.connect(now)
                return
            except errors.KafkaError as again:
                exc = again
        if isinstance(exc, errors.KafkaConnectionError):
            log.info("node %s (%s:%s): %s", node.node_id, node.host, node.port, exc)
            failure: errors.KafkaError = exc
        else:
            # A broken protocol (bad frame, correlation, corrupt body) or failed negotiation:
            # the connection is unusable; what was in flight may succeed on a new one.
            log.warning("node %s: %s; closing the connection", node.node_id, exc)
            failure = errors.KafkaConnectionError(str(exc))
            failure.__cause__ = exc
        self._close_node(node, now, failure, failed=True)

    def _close_node(self, node: BrokerConnection, now: float, exc: BaseException, *,
                    failed: bool, timed_out: set[int] | None = None) -> None:
        self._unregister(node.node_id)
        node.last_error = exc if failed else None
        for ifr in node.close(now, failed=failed):
            kind = self._state.internal.pop(id(ifr.future), None)
            if kind == METADATA:
                self._metadata_updater.handle_failure(exc, now)
            if timed_out is not None and ifr.correlation_id in timed_out:
                err: BaseException = errors.RequestTimeoutError(
                    "{} to node {} got no response in {:.0f} ms".format(
                        type(ifr.request).__name__, node.node_id, now - ifr.send_time_ms))
            else:
                err = exc
            self._state.completed.append((ifr.future, None, err))
        # Requests not yet written share the fate of the connection they were waiting for.
        for item in self._unsent.pop(node.node_id, ()):
            self._state.completed.append((item.future, None, exc))
        if failed:
            # Not our own close (those pass failed=False): the metadata may be stale.
            self._metadata_updater.handle_server_disconnect(node.node_id, now)

    def _write_all(self, now: float) -> None:
        for node in list(self._nodes.values()):
            if node.proto is not None and node.sock is not None and node.proto.has_pending_output():
                try:
                    node.write(now)
                except errors.KafkaError as exc:
                    self._connection_error(node, exc, now)
        for node_id, queue in list(self._unsent.items()):
            if queue:
                self._state.maybe_connect(node_id)

    # --- connections --------------------------------------------------------------------

    def _on_connected(self, node: BrokerConnection, now: float) -> None:
        proto = Connection(node.node_id, client_id=self.config.client_id,
                           max_in_flight_requests=self.config.max_in_flight_requests_per_connection,
                           receive_message_max_bytes=self.config.receive_message_max_bytes)
        node.connected(proto, now)
        log.debug("node %s: connected; negotiating API versions", node.node_id)
        self._api_versions.start(node, now)

    def _on_response(self, node: BrokerConnection, ifr: InFlightRequest, response: Any,
                     now: float) -> None:
        kind = self._state.internal.pop(id(ifr.future), None)
        if kind == API_VERSIONS:
            self._api_versions.handle_response(node, ifr, response, now)
        elif kind == SASL:
            self._authenticator.on_response(node, response, now)
        elif kind == METADATA:
            self._metadata_updater.handle_response(response, now)
            self._state.completed.append((ifr.future, response, None))
        else:
            if response_needs_metadata_update(response):
                # A retry for fresher leaders (Java's requestUpdate(false)); nobody waits.
                self.cluster.request_update_no_wait(reset_equivalent=False)
            self._state.completed.append((ifr.future, response, None))
        if node.is_ready():
            self._flush_unsent(node, now)

    def _flush_unsent(self, node: BrokerConnection, now: float) -> None:
        if now >= node.reauthenticate_at_ms:
            return  # held for the next SASL session: this one closes once idle (KIP-368)
        queue = self._unsent.get(node.node_id)
        while queue and node.proto is not None and node.proto.can_send_more():
            item = queue.popleft()
            try:
                version = item.version
                if version is None:
                    version = self._api_versions.latest_usable_version(node, type(item.request))
                node.proto.send(item.request, version, now_ms=now,
                                timeout_ms=max(item.deadline_ms - now, 0.0), future=item.future)
            except errors.KafkaError as exc:
                self._state.completed.append((item.future, None, exc))
