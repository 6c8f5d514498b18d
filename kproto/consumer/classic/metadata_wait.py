"""The classic engine's blocking wait for a metadata refresh (façade lookups, coordinator,
OffsetFetcher).

``NetworkClient.request_metadata_update()`` futures fail early with retriable
``NoBrokersAvailable`` when every known broker is backing off. A caller that waited only
until the future was done would give up long before its deadline (or, in a retry loop,
spin). Java's ``ConsumerNetworkClient.awaitMetadataUpdate`` keeps asking: a failed refresh
is retried after ``retry_backoff_ms`` until the deadline; so does this.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from kproto.consumer.classic.offset_fetcher import BlockingClient

log = logging.getLogger("kproto.consumer.offsets")


def await_metadata_update(client: BlockingClient, deadline: float, clock: Callable[[], float], retry_backoff_ms: float,
                          poll: Optional[Callable[..., None]] = None) -> bool:
    """Request a metadata refresh and wait until one succeeds or ``deadline`` (clock ms).

    ``poll(timeout_ms=..., future=...)`` is the network step (default ``client.poll``; the
    classic consumer passes its wakeup-aware one). A retriable failure is retried after
    ``retry_backoff_ms``; a non-retriable one is raised. Returns True once a refresh was
    applied, False at the deadline.
    """
    step = client.poll if poll is None else poll
    while True:
        future = client.request_metadata_update()
        while not future.is_done:
            left = deadline - clock()
            if left <= 0:
                return False
            step(timeout_ms=left, future=future)
        if future.succeeded():
            return True
        if future.exception is not None and not future.retriable():
            raise future.exception
        log.debug("Metadata refresh failed (%s); asking again in %s ms", future.exception, retry_backoff_ms)
        until = min(deadline, clock() + retry_backoff_ms)
        while True:
            left = until - clock()
            if left <= 0:
                break
            step(timeout_ms=left)
        if clock() >= deadline:
            return False
