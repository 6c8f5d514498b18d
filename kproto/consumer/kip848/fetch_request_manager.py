"""Fetching for the KIP-848 engine (Java's ``FetchRequestManager``).

Owns nothing beyond the shared ``AbstractFetch`` (sessions, pending nodes, the buffer)
except the rule of when to fetch: only when the application asked for it, through an
AsyncPollEvent or a prefetch (``create_fetch_requests``), so a consumer whose application
stopped polling does not keep filling its buffer. The next ``poll`` turns the fetchable
partitions into one FetchRequest per node as UnsentRequests; responses are buffered by
``handle_fetch_success`` on the background thread and collected on the application thread.
"""

from __future__ import annotations

import functools
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Optional

from kproto.consumer.background.request_manager import MAX_WAIT_MS, PollResult, RequestBuilder, UnsentRequest
from kproto.clock import monotonic_ms
from kproto.consumer.fetch.abstract_fetch import AbstractFetch
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.fetch.fetch_session_handler import FetchRequestData
from kproto.messages.fetch import FetchRequest, FetchResponse

if TYPE_CHECKING:
    from kproto.consumer.subscription_state import SubscriptionState
    from kproto.net.metadata import ClusterMetadata

log = logging.getLogger("kproto.kip848")


class FetchRequestManager(AbstractFetch):
    def __init__(self, config: FetchConfig, subscriptions: SubscriptionState, metadata: ClusterMetadata,
                 fetch_buffer: FetchBuffer,
                 node_unavailable: Callable[[int], bool] = lambda node_id: False,
                 time_ms: Callable[[], int] = monotonic_ms, metrics_manager: Any = None) -> None:
        super().__init__(config, subscriptions, metadata, fetch_buffer, time_ms, metrics_manager)
        self._node_unavailable = node_unavailable
        self._pending_fetch_request_future: Optional[Future[Any]] = None

    def is_unavailable(self, node_id: int) -> bool:
        return self._node_unavailable(node_id)

    def create_fetch_requests(self) -> Future[Any]:
        """Ask for fetches on the next poll; the future completes once they are staged."""
        if self._pending_fetch_request_future is None:
            self._pending_fetch_request_future = Future()
        return self._pending_fetch_request_future

    def poll(self, now_ms: int) -> PollResult:
        future, self._pending_fetch_request_future = self._pending_fetch_request_future, None
        if future is None:
            return PollResult.EMPTY  # type: ignore[attr-defined]
        try:
            requests = [self._make_request(node_id, data)
                        for node_id, data in self.prepare_fetch_requests(now_ms).items()]
        except Exception as exc:
            future.set_exception(exc)
            raise
        future.set_result(None)
        return PollResult(MAX_WAIT_MS, requests)

    def maximum_time_to_wait(self, now_ms: int) -> int:
        return MAX_WAIT_MS

    def _make_request(self, node_id: int, data: FetchRequestData) -> UnsentRequest:
        self.mark_pending(node_id)
        sent_version: list[int] = []

        def _build(max_version: int) -> tuple[Any, int]:
            version = self.request_version(data, max_version)
            sent_version.append(version)
            return self.create_fetch_request(data, version), version

        unsent = UnsentRequest(RequestBuilder(FetchRequest, _build), node_id)

        def _on_complete(response: FetchResponse, error: Optional[BaseException]) -> None:
            try:
                if error is not None:
                    self.handle_fetch_failure(node_id, data, error)
                else:
                    self.handle_fetch_success(node_id, data, response, sent_version[-1])
            finally:
                # Also after an empty answer: the application's poll() then asks for the
                # next fetch instead of waiting out its timeout with none in flight.
                self.fetch_buffer.wakeup()

        return unsent.when_complete(_on_complete)

    def close_fetch_sessions(self) -> list[UnsentRequest]:
        """Requests that close the broker-side sessions (sent once, on close)."""
        requests = []
        for node_id, data in self.prepare_close_fetch_session_requests().items():
            requests.append(UnsentRequest(RequestBuilder(
                FetchRequest, functools.partial(self._close_session_request, data)), node_id))
        return requests

    def _close_session_request(self, data: FetchRequestData, max_version: int) -> tuple[Any, int]:
        version = self.request_version(data, max_version)
        return self.create_fetch_request(data, version), version
