"""The background thread's wrapper over ``kproto.net.NetworkClient`` (Java's
``NetworkClientDelegate``).

Owns the unsent-request queue: the request managers' ``UnsentRequest``s wait here until
their node is known (None: the least-loaded node), connected and has negotiated API
versions; then they are sent and their future is completed from the network client's
response callback. A request that cannot be sent within ``request_timeout_ms`` fails with
``KafkaTimeoutError``. ``poll`` is the loop's one network step.

Only the background thread calls this class, except ``wakeup`` (any thread).
"""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from kproto.consumer.background.events import ErrorEvent
from kproto.consumer.background.request_manager import PollResult, RequestBuilder, UnsentRequest
from kproto.clock import monotonic_ms
from kproto.consumer.background.timer import Timer
from kproto.consumer.metadata_errors import MetadataErrorTracker
from kproto.errors import AuthenticationError, KafkaTimeoutError, UnsupportedVersionError

if TYPE_CHECKING:
    from kproto.net.client import NetworkClient

log = logging.getLogger("kproto.kip848")

# While requests wait for a connection, look again at least this often.
UNSENT_RECHECK_MS = 50


class NetworkClientDelegate:
    def __init__(self, client: NetworkClient, request_timeout_ms: int = 30000,
                 time_ms: Callable[[], int] = monotonic_ms) -> None:
        self.client = client
        self.request_timeout_ms = request_timeout_ms
        self._time_ms = time_ms
        self.unsent_requests: collections.deque[UnsentRequest] = collections.deque()
        self._metadata_errors = MetadataErrorTracker(client.cluster)
        self._authentication_error: Optional[BaseException] = None

    def add_all(self, requests: "PollResult | Iterable[UnsentRequest]") -> int:
        """Stage requests; returns the manager's time until next poll (PollResult) or max."""
        items = requests.unsent_requests if isinstance(requests, PollResult) else list(requests)
        now = self._time_ms()
        for unsent in items:
            unsent.timer = Timer(now, self.request_timeout_ms)
            self.unsent_requests.append(unsent)
        return requests.time_until_next_poll_ms if isinstance(requests, PollResult) else 0

    def poll(self, timeout_ms: int, now_ms: Optional[int] = None) -> None:
        """Send what can be sent, do one network step (blocking up to ``timeout_ms``)."""
        self._try_send_all(self._time_ms() if now_ms is None else now_ms)
        if self.unsent_requests:
            timeout_ms = min(timeout_ms, UNSENT_RECHECK_MS)
        try:
            self.client.poll(timeout_ms=max(0, timeout_ms))
        except AuthenticationError as exc:
            # Fatal (a SASL failure): surfaced as an ErrorEvent like a metadata error, so
            # the application's next call raises it instead of the loop logging it.
            self._authentication_error = exc
        # Sends that became possible during the step (a connection finished) go out now.
        self._try_send_all(self._time_ms())

    def get_and_clear_metadata_error(self) -> Optional[BaseException]:
        """The error the latest metadata update carries (unauthorized or invalid topics),
        once per update (Java's ``getAndClearMetadataError``; shared with the classic engine);
        an authentication failure first."""
        error, self._authentication_error = self._authentication_error, None
        return error if error is not None else self._metadata_errors.get_and_clear()

    def surface_metadata_error(self, background_event_handler: Any) -> None:
        """Hand ``get_and_clear_metadata_error()`` to the application thread as an
        ``ErrorEvent`` (raised by its next call), once per loop of the network thread."""
        error = self.get_and_clear_metadata_error()
        if error is not None:
            background_event_handler.add(ErrorEvent(error))

    def wakeup(self) -> None:
        self.client.wakeup()

    def has_pending_requests(self) -> bool:
        return bool(self.unsent_requests) or self.client.in_flight_request_count() > 0

    def _try_send_all(self, now_ms: int) -> None:
        waiting: collections.deque[UnsentRequest] = collections.deque()
        while self.unsent_requests:
            unsent = self.unsent_requests.popleft()
            timer = unsent.timer
            assert timer is not None  # add_all() stages every request with its timer
            timer.update(now_ms)
            if timer.is_expired():
                unsent.complete_exceptionally(KafkaTimeoutError(
                    "{} could not be sent within {} ms".format(unsent, self.request_timeout_ms)), now_ms)
                continue
            if not self._try_send(unsent, now_ms):
                waiting.append(unsent)
        self.unsent_requests = waiting

    def _refused_by_every_node(self) -> Optional[BaseException]:
        """The AuthenticationError every known node refused us with, if all did: a request
        any node may take can then never be sent. (Fatal, as in Java: waiting for a
        connection until the request times out would only hold up the caller, e.g.
        close(), for the whole timeout.)"""
        found = [self.client.authentication_exception(b.node_id) for b in self.client.cluster.known_brokers()]
        return found[0] if found and all(found) else None

    def _try_send(self, unsent: UnsentRequest, now_ms: int) -> bool:
        node_id = unsent.node_id if unsent.node_id is not None else self.client.least_loaded_node()
        # ready() also starts connecting, so a later pass can send.
        if node_id is None or not self.client.ready(node_id):
            failure = self.client.connection_failed(node_id) if unsent.node_id is not None else None
            if failure is None:
                failure = self._refused_by_every_node()
            if failure is not None:
                # A known node refusing connections, or every node refusing our credentials:
                # fail fast, the manager decides.
                unsent.complete_exceptionally(failure, now_ms)
                return True
            return False
        request = unsent.request
        version = unsent.version
        if isinstance(request, RequestBuilder):
            max_version = self.client.api_version(request.request_class.api_key, node_id)
            if max_version is None:
                # The node is ready, so its versions are known: it lacks the API (or shares
                # no version with kproto). Fail now; the manager decides (e.g. validation
                # trusts the position) instead of waiting for the request timeout.
                unsent.complete_exceptionally(UnsupportedVersionError("node {} does not support {}".format(
                    node_id, request.request_class.__name__)), now_ms)
                return True
            try:
                request, version = request.build(max_version)
            except Exception as exc:  # e.g. the node's versions cannot carry it
                unsent.complete_exceptionally(exc, now_ms)
                return True
        future = self.client.send(node_id, request, version=version, timeout_ms=unsent.timeout_ms)
        future.add_callback(lambda response: unsent.complete(response, self._time_ms()))
        future.add_errback(lambda error: unsent.complete_exceptionally(error, self._time_ms()))
        return True
