"""Fetcher: the classic engine's fetch driver over a NetworkClient.

Java's ``Fetcher``: ``AbstractFetch`` plus the I/O. ``send_fetches()`` sends one
FetchRequest per ready leader node (the response callbacks buffer CompletedFetches when
``NetworkClient.poll()`` completes them) and ``collect_fetch()`` hands out records
through a ``FetchCollector``. The façade calls ``send_fetches()`` again before returning
records from ``poll()`` so the next batch is on its way while the caller processes this
one (pipelining). Sending runs on the caller's thread; the response callbacks run on
whichever thread polls the client (the classic heartbeat thread sometimes does), under
``AbstractFetch.lock``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional

from kproto.consumer.fetch.abstract_fetch import FETCH_API_KEY, AbstractFetch
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_collector import Fetch, FetchCollector
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.fetch.fetch_session_handler import FetchRequestData
from kproto.consumer.subscription_state import SubscriptionState
from kproto.messages.fetch import FetchResponse
from kproto.clock import monotonic_ms
from kproto.structs import TopicPartition

if TYPE_CHECKING:
    from kproto.net.client import NetworkClient
    from kproto.net.metadata import ClusterMetadata

log = logging.getLogger("kproto.consumer.fetch")


class Fetcher(AbstractFetch):
    """Sends fetches through ``client`` (a ``kproto.net.NetworkClient``) and collects records."""

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState, config: FetchConfig,
                 fetch_buffer: Optional[FetchBuffer] = None, metadata: Optional[ClusterMetadata] = None,
                 time_ms: Callable[[], float] = monotonic_ms, metrics_manager: Any = None) -> None:
        super().__init__(config, subscriptions, metadata if metadata is not None else client.cluster,
                         fetch_buffer if fetch_buffer is not None else FetchBuffer(), time_ms, metrics_manager)
        self.client = client
        self.collector = FetchCollector(subscriptions, config,
                                        functools.partial(self.metadata.request_update_no_wait, reset_equivalent=False),
                                        time_ms, metrics_manager)

    def is_unavailable(self, node_id: int) -> bool:
        # ready() also starts connecting, so the node is usable on a later round.
        return not self.client.ready(node_id) or self.client.api_version(FETCH_API_KEY, node_id) is None

    def select_read_replica(self, tp: TopicPartition, leader: int, now_ms: float) -> int:
        node = super().select_read_replica(tp, leader, now_ms)
        if node != leader and self.client.connection_failed(node) is not None:
            # Java sends to a replica not yet connected and, when the connection fails,
            # the failed request drops the replica (handle_fetch_failure). This engine
            # sends only to ready nodes, so without this the replica would be waited on
            # until its lease ran out.
            log.debug("preferred read replica %s of %s cannot be reached; fetching from the leader %s",
                      node, tp, leader)
            self.subscriptions.clear_preferred_read_replica(tp)
            return leader
        return node

    def send_fetches(self) -> int:
        """Send a fetch to every node that should get one now; returns how many were sent."""
        with self.lock:  # Java's synchronized sendFetches: no response handled half-way
            return self._send_fetches()

    def _send_fetches(self) -> int:
        requests = self.prepare_fetch_requests()
        for node_id, data in requests.items():
            max_version = self.client.api_version(FETCH_API_KEY, node_id)
            assert max_version is not None  # is_unavailable() left out nodes without one
            version = self.request_version(data, max_version)
            request = self.create_fetch_request(data, version)
            self.mark_pending(node_id)
            log.debug("sending fetch %s to node %s (v%d): %d partitions, %d forgotten", data.metadata, node_id,
                      version, len(data.to_send), len(data.forgotten(version)))
            future = self.client.send(node_id, request, version=version)
            future.add_callback(self._on_success, node_id, data, version)
            future.add_errback(self._on_failure, node_id, data)
        return len(requests)

    def _on_success(self, node_id: int, data: FetchRequestData, version: int, response: FetchResponse) -> None:
        self.handle_fetch_success(node_id, data, response, version)

    def _on_failure(self, node_id: int, data: FetchRequestData, error: BaseException) -> None:
        self.handle_fetch_failure(node_id, data, error)

    def collect_fetch(self, max_records: Optional[int] = None, update_positions: bool = True) -> Fetch:
        return self.collector.collect_fetch(self.fetch_buffer, max_records, update_positions)

    def clear_buffered_data_for_unassigned_partitions(self) -> None:
        self.fetch_buffer.retain_all(self.subscriptions.assigned_partitions())

    def close(self, timeout_ms: float = 0) -> None:
        """Close the broker-side fetch sessions (best effort) and drop buffered data."""
        futures = []
        for node_id, data in self.prepare_close_fetch_session_requests().items():
            max_version = self.client.api_version(FETCH_API_KEY, node_id)
            if max_version is None:
                continue
            version = self.request_version(data, max_version)
            futures.append(self.client.send(node_id, self.create_fetch_request(data, version), version=version))
        deadline = self._time_ms() + timeout_ms
        for future in futures:
            remaining = deadline - self._time_ms()
            if remaining <= 0:
                break
            self.client.poll(remaining, future=future)
        self.fetch_buffer.close()
