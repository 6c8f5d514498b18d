"""Group coordinator discovery for the background-thread engines (Java's ``CoordinatorRequestManager``).

Owns the known coordinator (or None) and the FindCoordinator request state: one request
at a time, to the least-loaded node, with exponential backoff after failures and never
two less than ``retry_backoff_ms`` apart. Other
managers read ``coordinator``, and call ``mark_coordinator_unknown`` on NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE and ``handle_coordinator_disconnect`` when a request to it
failed; the next ``poll`` then looks for it again.

A fatal FindCoordinator error (e.g. GROUP_AUTHORIZATION_FAILED, or an
``AuthenticationError`` from every broker) is kept until the heartbeat manager takes it
with ``get_and_clear_fatal_error`` and surfaces it; the commit manager, polled before it,
reads ``fatal_error`` to fail the commits and offset fetches waiting for a coordinator.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, NamedTuple, Optional

from kproto.consumer.background.request_manager import (
    MAX_WAIT_MS,
    PollResult,
    RequestBuilder,
    RequestState,
    UnsentRequest,
)
from kproto.consumer.find_coordinator import build_find_coordinator_request, group_coordinator
from kproto.errors import AuthenticationError, KafkaConnectionError
from kproto.messages import FindCoordinatorRequest

log = logging.getLogger("kproto.kip848")


class Coordinator(NamedTuple):
    node_id: int  # the connection to send group requests to (Java's coordinatorConnectionId)
    host: str
    port: int
    broker_id: int  # the broker the coordinator runs on


class CoordinatorRequestManager:
    """Finds the group coordinator and remembers it until told it is gone."""

    def __init__(self, group_id: str, retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000,
                 jitter: float = RequestState.RETRY_BACKOFF_JITTER,
                 add_coordinator: Optional[Callable[[int, str, int], int]] = None) -> None:
        self.group_id = group_id
        # Registers the coordinator's address and gives it a connection of its own
        # (ClusterMetadata.add_coordinator); without it the broker id is used as is.
        self._add_coordinator = add_coordinator
        self.request_state = RequestState("FindCoordinator", retry_backoff_ms, retry_backoff_max_ms, jitter)
        # A floor between two lookups, whatever answered: a found coordinator that another
        # manager marks unknown at once (NOT_COORDINATOR on every request to it) would
        # otherwise be looked up again at once, one FindCoordinator per round trip.
        self._retry_backoff_ms = retry_backoff_ms
        self._next_lookup_ms = 0
        self.coordinator: Optional[Coordinator] = None
        self.time_marked_unknown_ms: Optional[int] = None
        self._fatal_error: Optional[BaseException] = None
        self._closing = False

    def poll(self, now_ms: int) -> PollResult:
        if self._closing or self.coordinator is not None:
            return PollResult.EMPTY  # type: ignore[attr-defined]
        if now_ms < self._next_lookup_ms and not self.request_state.request_in_flight():
            return PollResult(max(self._next_lookup_ms - now_ms, self.request_state.remaining_backoff_ms(now_ms)))
        if self.request_state.can_send_request(now_ms):
            return PollResult(MAX_WAIT_MS, [self._make_find_coordinator_request(now_ms)])
        return PollResult(self.request_state.remaining_backoff_ms(now_ms))

    def maximum_time_to_wait(self, now_ms: int) -> int:
        return MAX_WAIT_MS

    def signal_close(self) -> None:
        """On close: the group work is done, stop looking for the coordinator."""
        self._closing = True

    def _make_find_coordinator_request(self, now_ms: int) -> UnsentRequest:
        self.request_state.on_send_attempt(now_ms)
        self._next_lookup_ms = now_ms + self._retry_backoff_ms
        builder = RequestBuilder(FindCoordinatorRequest, self._build_request)
        unsent = UnsentRequest(builder, node_id=None)

        def _on_complete(response: Any, error: Optional[BaseException]) -> None:
            done_ms = unsent.completion_time_ms if unsent.completion_time_ms is not None else now_ms
            if error is not None:
                self._on_failed_response(done_ms, error)
            else:
                self._on_response(done_ms, response)

        return unsent.when_complete(_on_complete)

    def _build_request(self, version: int) -> tuple[FindCoordinatorRequest, int]:
        return build_find_coordinator_request(self.group_id, version), version

    def _on_response(self, now_ms: int, response: Any) -> None:
        entry, error = group_coordinator(response, self.group_id)
        if error is not None:
            self._on_failed_response(now_ms, error)
            return
        node_id = (self._add_coordinator(entry.node_id, entry.host, entry.port)
                   if self._add_coordinator is not None else entry.node_id)
        self.coordinator = Coordinator(node_id, entry.host, entry.port, entry.node_id)
        log.info("Discovered group coordinator %s for group %s", self.coordinator, self.group_id)
        self.request_state.on_successful_attempt(now_ms)

    def _on_failed_response(self, now_ms: int, error: BaseException) -> None:
        self.request_state.on_failed_attempt(now_ms)
        self.mark_coordinator_unknown("FindCoordinator failed: {}".format(error), now_ms)
        if getattr(error, "retriable", False):
            log.debug("FindCoordinator failed with a retriable error, will retry: %s", error)
            return
        # An authentication failure is the network client's, which the application's next
        # call raises: a warning would report it twice (the CLI prints it as its one line).
        log.log(logging.INFO if isinstance(error, AuthenticationError) else logging.WARNING,
                "FindCoordinator failed with a fatal error: %s", error)
        self._fatal_error = error

    def mark_coordinator_unknown(self, cause: str, now_ms: int) -> None:
        if self.coordinator is not None:
            log.info("Group coordinator %s is unavailable or invalid (%s); rediscovering it",
                     self.coordinator, cause)
            self.coordinator = None
            self.time_marked_unknown_ms = now_ms
        elif self.time_marked_unknown_ms is None:
            self.time_marked_unknown_ms = now_ms

    def handle_coordinator_disconnect(self, error: BaseException, now_ms: int) -> None:
        """A request to the coordinator failed; a lost connection means look for it again."""
        if isinstance(error, KafkaConnectionError):
            self.mark_coordinator_unknown(str(error), now_ms)

    @property
    def fatal_error(self) -> Optional[BaseException]:
        """The fatal error of the last lookup, until the heartbeat manager takes it."""
        return self._fatal_error

    def get_and_clear_fatal_error(self) -> Optional[BaseException]:
        error, self._fatal_error = self._fatal_error, None
        return error
