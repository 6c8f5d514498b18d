"""Completed share fetches between the two threads (Java's ``ShareFetchBuffer``).

Owns the queue of ``ShareCompletedFetch`` objects: the background thread adds what a
ShareFetch response acquired, the application thread takes records out in ``poll``. Its
condition lets ``poll`` block until data arrives, ``wakeup`` ends that wait early.

The background thread asks ``buffered_nodes`` before fetching from a node: no new
ShareFetch goes to a node while records it delivered are still buffered, or handed to the
application and not yet settled (``mark_outstanding`` by the application thread when it
takes records; ``clear_outstanding`` by the background thread once the next poll's
acknowledgements are queued ahead of any fetch). So memory stays bounded by one response
per node (``fetch_max_bytes``) however many records the application holds, and no fetch
is in flight while the application holds records of that node: a broker may answer a
fetch with records this member already holds (librdkafka's mock does), which would
otherwise be handed out twice. ``drop_node`` forgets a node's fetches when its share
session ended (the broker released those records, so they must not be handed out).
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Optional

from kproto.consumer.share.share_completed_fetch import ShareCompletedFetch


class ShareFetchBuffer:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._fetches: collections.deque[ShareCompletedFetch] = collections.deque()
        self._woken = False
        self._closed = False
        self._outstanding: set[int] = set()

    def add(self, fetch: ShareCompletedFetch) -> None:
        with self._lock:
            if self._closed:
                return
            self._fetches.append(fetch)
            self._lock.notify_all()

    def peek(self) -> Optional[ShareCompletedFetch]:
        with self._lock:
            return self._fetches[0] if self._fetches else None

    def remove(self, fetch: ShareCompletedFetch) -> None:
        with self._lock:
            try:
                self._fetches.remove(fetch)
            except ValueError:
                pass

    def is_empty(self) -> bool:
        with self._lock:
            return not self._fetches

    def buffered_nodes(self) -> set[int]:
        """Nodes with fetches buffered or records handed out and not yet settled."""
        with self._lock:
            return {f.node_id for f in self._fetches} | self._outstanding

    def mark_outstanding(self, node_id: int) -> None:
        with self._lock:
            self._outstanding.add(node_id)

    def clear_outstanding(self) -> None:
        with self._lock:
            self._outstanding.clear()

    def drop_node(self, node_id: int) -> list[ShareCompletedFetch]:
        with self._lock:
            dropped = [f for f in self._fetches if f.node_id == node_id]
            self._fetches = collections.deque(f for f in self._fetches if f.node_id != node_id)
            return dropped

    def retain_partitions(self, partitions: set[Any]) -> None:
        """Drop fetches of partitions no longer assigned (Java's ``retainAll``): the next
        ShareFetch forgets those partitions and the broker releases their records, which
        must then not be handed out here (another member gets them)."""
        with self._lock:
            self._fetches = collections.deque(f for f in self._fetches if f.partition in partitions)

    def drain(self) -> list[ShareCompletedFetch]:
        with self._lock:
            fetches = list(self._fetches)
            self._fetches.clear()
            return fetches

    def await_not_empty(self, timeout_s: float) -> bool:
        """Wait until a fetch is buffered, ``wakeup`` is called or ``timeout_s`` passed."""
        with self._lock:
            if not self._fetches and not self._woken and not self._closed:
                self._lock.wait(max(0.0, timeout_s))
            self._woken = False
            return bool(self._fetches)

    def wakeup(self) -> None:
        with self._lock:
            self._woken = True
            self._lock.notify_all()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._fetches.clear()
            self._lock.notify_all()
