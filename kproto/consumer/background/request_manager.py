"""The request-manager contract of the background thread, and retry backoff.

Owns ``RequestManager`` (Java's ``RequestManager``: ``poll(now_ms) -> PollResult`` does no
I/O, ``maximum_time_to_wait(now_ms)`` bounds how long the network thread may block),
``PollResult``, ``UnsentRequest`` (a request staged for the network client, answered
through a future) and ``RequestState`` (Java's ``RequestState``: one request at a time per
manager, with exponential backoff after failures: ``kproto.net.backoff.ExponentialBackoff``).

The network thread collects every manager's unsent requests, hands them to the network
client, and completes each ``UnsentRequest`` with the response body or an exception. A
manager learns about the outcome only through the callbacks it chained on that future.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any, Callable, Optional, Protocol, Sequence, runtime_checkable

from kproto.consumer.background.timer import Timer
from kproto.net.backoff import RETRY_BACKOFF_EXP_BASE, RETRY_BACKOFF_JITTER, ExponentialBackoff
from kproto.protocol.base import ProtocolStruct

log = logging.getLogger("kproto.kip848")

# Java's Long.MAX_VALUE stands for "no need to wake up for me"; any large int does here.
MAX_WAIT_MS = 2**63 - 1


class RequestBuilder:
    """A request whose body depends on the version the network client negotiates.

    ``request_class`` gives the api key; ``build(max_version)``, called with the highest
    version the node and kproto share, returns ``(message, version_to_send)``. Most
    requests are plain message objects; this is for the few whose fields moved between
    versions (FindCoordinator's ``key`` became ``coordinator_keys`` in v4) or whose version
    depends on the content (Fetch stays at v12 without topic ids).
    """

    __slots__ = ("request_class", "_build")

    def __init__(self, request_class: type[ProtocolStruct], build: Callable[[int], tuple[Any, int]]) -> None:
        self.request_class = request_class
        self._build = build

    def build(self, max_version: int) -> tuple[Any, int]:
        return self._build(max_version)

    def __repr__(self) -> str:
        return "RequestBuilder({})".format(self.request_class.__name__)


class UnsentRequest:
    """A request a manager wants sent, to ``node_id`` (None: the least-loaded node).

    ``request`` is a message object (``kproto.messages``) or a ``RequestBuilder``.

    ``future`` completes with the decoded response body, or with the exception that failed
    it (a disconnect, a timeout); ``completion_time_ms`` is the time the network thread
    completed it, which managers use for their backoff bookkeeping.
    """

    __slots__ = ("request", "node_id", "version", "future", "completion_time_ms", "timer", "timeout_ms")

    def __init__(self, request: Any, node_id: Optional[int], version: Optional[int] = None) -> None:
        self.request = request
        self.node_id = node_id
        self.version = version
        self.future: Future[Any] = Future()
        self.completion_time_ms: Optional[int] = None
        # Set by the network thread when it stages the request (request.timeout.ms).
        self.timer: Optional[Timer] = None
        # The answer's timeout once sent, if not the client's request timeout (a JoinGroup
        # waits for the whole group).
        self.timeout_ms: Optional[int] = None

    def when_complete(self, callback: Callable[[Any, Optional[BaseException]], None]) -> "UnsentRequest":
        """Chain ``callback(response, error)``; exactly one of the two is not None."""

        def _done(future: Future[Any]) -> None:
            error = future.exception()
            callback(None if error is not None else future.result(), error)

        self.future.add_done_callback(_done)
        return self

    def complete(self, response: Any, now_ms: int) -> None:
        self.completion_time_ms = now_ms
        if not self.future.done():
            self.future.set_result(response)

    def complete_exceptionally(self, error: BaseException, now_ms: int) -> None:
        self.completion_time_ms = now_ms
        if not self.future.done():
            self.future.set_exception(error)

    def __repr__(self) -> str:
        name = self.request.request_class.__name__ if isinstance(self.request, RequestBuilder) \
            else type(self.request).__name__
        return "UnsentRequest({}, node_id={})".format(name, self.node_id)


class PollResult:
    """What a manager returns from ``poll``: its next wake-up time and requests to send."""

    __slots__ = ("time_until_next_poll_ms", "unsent_requests")

    def __init__(self, time_until_next_poll_ms: int = MAX_WAIT_MS,
                 unsent_requests: Sequence[UnsentRequest] = ()) -> None:
        self.time_until_next_poll_ms = time_until_next_poll_ms
        self.unsent_requests = list(unsent_requests)

    def __repr__(self) -> str:
        return "PollResult(time_until_next_poll_ms={}, unsent_requests={})".format(
            self.time_until_next_poll_ms, self.unsent_requests)


PollResult.EMPTY = PollResult()  # type: ignore[attr-defined]


@runtime_checkable
class RequestManager(Protocol):
    """Polled once per network-thread iteration, on the background thread only.

    A manager may also define ``poll_on_close(now_ms) -> PollResult`` (Java's pollOnClose):
    its last requests, sent when the background thread closes.
    """

    def poll(self, now_ms: int) -> PollResult:
        """The requests to send now; never does I/O."""

    def maximum_time_to_wait(self, now_ms: int) -> int:
        """How long the network thread may block without this manager missing a deadline."""


class RequestState:
    """One-at-a-time request bookkeeping with backoff after failures.

    A request may be sent when none is in flight and the backoff since the last failed
    response has elapsed. A successful response clears the backoff.
    """

    RETRY_BACKOFF_EXP_BASE = RETRY_BACKOFF_EXP_BASE
    RETRY_BACKOFF_JITTER = RETRY_BACKOFF_JITTER

    def __init__(self, owner: str, retry_backoff_ms: int, retry_backoff_max_ms: int,
                 jitter: float = RETRY_BACKOFF_JITTER) -> None:
        self.owner = owner
        self.exponential_backoff = ExponentialBackoff(
            retry_backoff_ms, self.RETRY_BACKOFF_EXP_BASE, retry_backoff_max_ms, jitter)
        self.last_sent_ms = -1
        self.last_received_ms = -1
        self.num_attempts = 0
        self.backoff_ms = 0

    def reset(self) -> None:
        """Forget the history: the next request may go out immediately."""
        self.last_sent_ms = -1
        self.last_received_ms = -1
        self.num_attempts = 0
        self.backoff_ms = self.exponential_backoff.backoff(0)

    def can_send_request(self, now_ms: int) -> bool:
        if self.last_sent_ms == -1:
            return True
        if self.request_in_flight():
            log.debug("%s: a request is already in flight", self.owner)
            return False
        return self.request_backoff_expired(now_ms)

    def request_in_flight(self) -> bool:
        return self.last_sent_ms > -1 and self.last_received_ms < self.last_sent_ms

    def request_backoff_expired(self, now_ms: int) -> bool:
        return self.remaining_backoff_ms(now_ms) <= 0

    def remaining_backoff_ms(self, now_ms: int) -> int:
        if self.num_attempts == 0:
            return 0
        return max(0, self.backoff_ms - (now_ms - self.last_received_ms))

    def on_send_attempt(self, now_ms: int) -> None:
        # A response (even at the same millisecond) must compare as newer than the send.
        self.last_sent_ms = now_ms
        self.last_received_ms = min(self.last_received_ms, now_ms - 1)

    def on_successful_attempt(self, now_ms: int) -> None:
        self.last_received_ms = now_ms
        self.backoff_ms = 0
        self.num_attempts = 0

    def on_failed_attempt(self, now_ms: int) -> None:
        self.last_received_ms = now_ms
        self.backoff_ms = self.exponential_backoff.backoff(self.num_attempts)
        self.num_attempts += 1

    def __repr__(self) -> str:
        return "{}(owner={}, last_sent_ms={}, last_received_ms={}, num_attempts={}, backoff_ms={})".format(
            type(self).__name__, self.owner, self.last_sent_ms, self.last_received_ms,
            self.num_attempts, self.backoff_ms)
