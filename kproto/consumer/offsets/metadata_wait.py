"""Metadata as the classic engine's callers need it: the blocking wait for a refresh (façade
lookups, coordinator, OffsetFetcher) and the errors an update carries (``poll()``).

``NetworkClient.request_metadata_update()`` futures fail early with retriable
``NoBrokersAvailable`` when every known broker is backing off. A caller that waited only
until the future was done would give up long before its deadline (or, in a retry loop,
spin). Java's ``ConsumerNetworkClient.awaitMetadataUpdate`` keeps asking: a failed refresh
is retried after ``retry_backoff_ms`` until the deadline; so does this.

Topics a Metadata response names as unauthorized or invalid are raised from the next
``poll()``, once per update (``MetadataErrorTracker``), as the KIP-848 engine does.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from kproto import errors

log = logging.getLogger("kproto.consumer.offsets")


def await_metadata_update(client: Any, deadline: float, clock: Callable[[], float], retry_backoff_ms: float,
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
        if not future.retriable():
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


class MetadataErrorTracker:
    """Java's ``Metadata.maybeThrowAnyException`` for a consumer's poll loop: the error the
    latest metadata update carries (unauthorized or invalid topics), once per update.

    ``ClusterMetadata`` replaces its ``unauthorized_topics``/``invalid_topics`` sets on every
    update, so the sets' identity tells a new update from one already reported.
    """

    __slots__ = ("_cluster", "_seen")

    def __init__(self, cluster: Any) -> None:
        self._cluster = cluster
        self._seen: tuple[Any, Any] = (None, None)

    def get_and_clear(self) -> Optional[BaseException]:
        unauthorized, invalid = self._cluster.unauthorized_topics, self._cluster.invalid_topics
        if unauthorized is self._seen[0] and invalid is self._seen[1]:
            return None
        self._seen = (unauthorized, invalid)
        if unauthorized:
            return errors.error_for(29, "Not authorized to access topics: {}".format(sorted(unauthorized)))
        if invalid:
            return errors.error_for(17, "Invalid topics: {}".format(sorted(invalid)))
        return None
