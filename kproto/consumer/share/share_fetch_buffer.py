"""Completed share fetches between the two threads (Java's ``ShareFetchBuffer``).

Owns the queue of ``ShareCompletedFetch`` objects: the background thread adds what a
ShareFetch response acquired, the application thread takes records out in ``poll``. Its
condition lets ``poll`` block until data arrives, ``wakeup`` ends that wait early.

The background thread asks ``buffered_nodes`` before sending a ShareFetch to a node
(one that fetches, or one that only forgets partitions): none goes to a node while records
it delivered are still buffered, or handed to the application and not yet settled
(``mark_outstanding`` by the application thread when it takes records;
``clear_outstanding`` by the background thread once the next poll's acknowledgements are
queued ahead of any fetch). So memory stays bounded by one response per node
(``fetch_max_bytes``) however many records the application holds, no fetch is in flight
while the application holds records of that node (a broker may answer a fetch with
records this member already holds: librdkafka's mock does, and they would be handed out
twice), and no partition is forgotten while the application holds records of it (the
mock releases a member's records of a partition its session forgets: their
acknowledgements would fail and the records come again).

Settling is counted in poll rounds: ``next_round`` starts one (the application thread, as
a poll begins to settle what was handed out before) and its number rides on that poll's
``ShareFetchEvent``; ``clear_outstanding(round)`` clears only what earlier rounds handed
out, since the same poll may already have taken records from the buffer (and marked their
node) before the background thread gets to its event.

``drop_node`` forgets a node's fetches when its share session ended (the broker released
those records, so they must not be handed out). Nothing else prunes the buffer, the
assignment included, as in Java 4.4's ``ShareFetchBuffer`` (which has no ``retainAll``):
records acquired of a partition the member has since given up are still this member's
until their lock expires, so they are handed out and acknowledged like any others. Dropped,
they would stay locked to it on Kafka until the lock expired (30 s by default) and then go
to another member with their delivery count raised.
"""

from __future__ import annotations

import collections
import threading
from typing import Optional

from kproto.consumer.share.share_completed_fetch import ShareCompletedFetch


class ShareFetchBuffer:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._fetches: collections.deque[ShareCompletedFetch] = collections.deque()
        self._woken = False
        self._closed = False
        self._outstanding: dict[int, int] = {}  # node -> the round that handed its records out
        self._round = 0

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
            return {f.node_id for f in self._fetches} | set(self._outstanding)

    def next_round(self) -> int:
        """A poll begins that settles every record handed out so far: its round."""
        with self._lock:
            self._round += 1
            return self._round

    def mark_outstanding(self, node_id: int) -> None:
        """The application took records of ``node_id`` in the current round."""
        with self._lock:
            self._outstanding[node_id] = self._round

    def clear_outstanding(self, settled_round: int) -> None:
        """The acknowledgements of poll round ``settled_round`` are queued: what earlier
        rounds handed out is settled; what that round itself took stays outstanding."""
        with self._lock:
            self._outstanding = {n: r for n, r in self._outstanding.items() if r >= settled_round}

    def drop_node(self, node_id: int) -> list[ShareCompletedFetch]:
        with self._lock:
            dropped = [f for f in self._fetches if f.node_id == node_id]
            self._fetches = collections.deque(f for f in self._fetches if f.node_id != node_id)
            return dropped

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
