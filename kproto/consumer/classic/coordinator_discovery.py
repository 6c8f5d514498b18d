"""Coordinator discovery for the classic engine (Java's ``AbstractCoordinator.lookupCoordinator``,
``FindCoordinatorResponseHandler``, ``coordinatorUnknown`` and ``markCoordinatorUnknown``).

Owns the known coordinator's connection id (or None) and the FindCoordinator lookup: one
request at a time, to the least-loaded node, exponential backoff with jitter after a failure,
and forgetting the coordinator when it is said to be gone (``mark_coordinator_unknown``, on
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE answers or a lost connection) or its connection
failed (``coordinator_unknown``). Nothing here blocks: waiting for the coordinator
(``ensure_coordinator_ready``, wakeup-aware) stays with ``AbstractCoordinator``.

Threading: used from the application thread and the heartbeat thread, and the FindCoordinator
callbacks run on whichever polled; all state is guarded by the owning coordinator's
re-entrant lock (passed in), which is never held across a client poll. The two hooks
(``on_discovered``, ``on_fatal_error``) run with that lock held.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

from kproto import errors
from kproto.messages import FindCoordinatorRequest
from kproto.consumer.find_coordinator import build_find_coordinator_request, group_coordinator
from kproto.net.backoff import RETRY_BACKOFF_EXP_BASE, RETRY_BACKOFF_JITTER, ExponentialBackoff
from kproto.net.metadata import coordinator_broker_id

if TYPE_CHECKING:
    from kproto.net.client import NetworkClient


# The classic engine's one logger (the coordinator's messages read as one stream).
log = logging.getLogger("kproto.consumer.classic")


class CoordinatorDiscovery:
    """The group's coordinator as far as this member knows it; see the module docstring."""

    def __init__(self, client: NetworkClient, group_id: str, *, lock: threading.RLock, clock: Callable[[], float],
                 retry_backoff_ms: int, retry_backoff_max_ms: int, on_discovered: Callable[[], None],
                 on_fatal_error: Callable[[BaseException], None]) -> None:
        self._client = client
        self.group_id = group_id
        self._lock = lock
        self._clock = clock
        self._find_backoff = ExponentialBackoff(retry_backoff_ms, RETRY_BACKOFF_EXP_BASE, retry_backoff_max_ms,
                                                RETRY_BACKOFF_JITTER)
        # A coordinator was found (e.g. restart the session timer: it had no one to heartbeat to).
        self._on_discovered = on_discovered
        # A FindCoordinator error retrying cannot fix, for the application thread to raise.
        self._on_fatal_error = on_fatal_error
        self.coordinator_id: Optional[Any] = None  # the coordinator's connection (node) id
        self.find_future: Any = None  # the FindCoordinator in flight
        self._find_failures = 0
        self._next_find_ms = 0.0
        # A floor between two lookups, whatever answered (a coordinator found and at once
        # answering NOT_COORDINATOR would otherwise be looked up once per round trip).
        self._retry_backoff_ms = retry_backoff_ms

    @property
    def coordinator_broker_id(self) -> Optional[int]:
        """The broker the known coordinator runs on (None while it is unknown)."""
        node = self.coordinator_id
        return None if node is None else coordinator_broker_id(node)

    def coordinator_unknown(self) -> bool:
        """No coordinator, or its connection failed (then it is forgotten and looked up again)."""
        with self._lock:
            node = self.coordinator_id
        if node is None:
            return True
        delay = self._client.connection_delay(node)
        if self._client.connection_failed(node) is not None and delay > 0:
            self.mark_coordinator_unknown("the connection to the coordinator failed", disconnected=True)
            with self._lock:
                # It is likely the same node again: look it up once it may be reconnected.
                self._next_find_ms = max(self._next_find_ms, self._clock() + min(delay, self._find_backoff.max_ms))
            return True
        return False

    def mark_coordinator_unknown(self, reason: str, *, disconnected: bool = False) -> None:
        """Forget the coordinator and, unless its connection is already gone, close it (Java's
        ``markCoordinatorUnknown`` and ``disconnectAsync``): requests still in flight to it
        (a parked JoinGroup or SyncGroup, a heartbeat) then fail at once instead of holding
        the member until their request timeout, e.g. when the session timed out with no answer."""
        with self._lock:
            old = self.coordinator_id
            if old is None:
                return
            log.info("Group %s: coordinator %s is unavailable or invalid (%s); will rediscover it",
                     self.group_id, old, reason)
            self.coordinator_id = None
        if not disconnected:
            self._client.disconnect_async(old)

    def lookup_coordinator(self) -> Optional[Any]:
        """Send FindCoordinator unless one is in flight or we are backing off; its Future or None."""
        with self._lock:
            if self.find_future is not None:
                return self.find_future
            now = self._clock()
            if now < self._next_find_ms:
                return None
            node = self._client.least_loaded_node()
            if node is None or not self._client.ready(node):
                return None
            version = self._client.api_version(FindCoordinatorRequest.api_key, node)
            if version is None:
                raise errors.UnsupportedVersionError("node {} does not support FindCoordinator".format(node))
            request = build_find_coordinator_request(self.group_id, version)
            log.debug("Group %s: sending FindCoordinator v%d to node %s", self.group_id, version, node)
            future = self._client.send(node, request, version=version)
            self.find_future = future
            self._next_find_ms = now + self._retry_backoff_ms
        future.add_callback(self._on_find_coordinator_response)
        future.add_errback(self._on_find_coordinator_failure)
        return future

    def _on_find_coordinator_response(self, response: Any) -> None:
        entry, error = group_coordinator(response, self.group_id)
        if error is not None:
            self._on_find_coordinator_failure(error)
            return
        with self._lock:
            self.find_future = None
            self._find_failures = 0
            # A connection of its own (Java's Integer.MAX_VALUE - broker id): see
            # kproto.net.metadata.coordinator_connection_id.
            self.coordinator_id = coordinator = self._client.cluster.add_coordinator(
                entry.node_id, entry.host, entry.port)
            self._on_discovered()
        log.info("Group %s: discovered coordinator %s (%s:%s)", self.group_id, entry.node_id, entry.host, entry.port)
        self._client.ready(coordinator)  # start connecting now (Java's client.tryConnect(coordinator))

    def _on_find_coordinator_failure(self, exc: BaseException) -> None:
        with self._lock:
            self.find_future = None
            self._find_failures += 1
            self._next_find_ms = max(self._next_find_ms,
                                     self._clock() + self._find_backoff.backoff(self._find_failures - 1))
            if not getattr(exc, "retriable", False) and isinstance(exc, errors.BrokerResponseError):
                # e.g. GROUP_AUTHORIZATION_FAILED: nothing to retry, tell the application.
                self._on_fatal_error(exc)
        log.debug("Group %s: FindCoordinator failed (%s); next attempt after backoff", self.group_id, exc)
