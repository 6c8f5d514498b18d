"""FetchBuffer: the completed fetches waiting to be collected, shared between threads.

Java's ``FetchBuffer``. It owns the queue of ``CompletedFetch`` objects, the one being
read now (``next_in_line_fetch``), and a condition the application thread waits on until
data arrives or ``wakeup()`` is called. Fresh answers without records, error or read
replica wait in a second queue, which the collector empties first at every step (they
deliver nothing; Java keeps one queue in arrival order). In the KIP-848 engine the background thread adds
fetches and the application thread collects them; in the classic engine both happen on
the caller's thread and the lock is uncontended.

``retain_all``/``clear`` are called by the collecting thread (assign, unsubscribe, seek
handling), which also owns ``next_in_line_fetch``; the fetching thread only adds.

Invariant: at most one CompletedFetch per partition is buffered (queued or next in line
and not yet consumed). The fetch builder keeps it by not fetching partitions that are
buffered; adding a second one is a bug and raises ``IllegalStateError``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Iterable, Set
from typing import Optional

from kproto.consumer.fetch.completed_fetch import CompletedFetch
from kproto.errors import IllegalStateError
from kproto.structs import TopicPartition

log = logging.getLogger("kproto.consumer.fetch")


class FetchBuffer:
    """Thread-safe queue of completed fetches with a wake-up condition."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._completed: collections.deque[CompletedFetch] = collections.deque()
        # Fresh answers without records, error or read replica (CompletedFetch.empty_answer),
        # queued apart: the collector takes them all before any data (see peek_empty_answers).
        self._empty: collections.deque[CompletedFetch] = collections.deque()
        self._next_in_line: Optional[CompletedFetch] = None
        self._woken_up = False
        self._closed = False

    def _buffered(self) -> set[TopicPartition]:
        parts = {cf.partition for cf in self._completed}
        parts.update(cf.partition for cf in self._empty)
        if self._next_in_line is not None and not self._next_in_line.is_consumed:
            parts.add(self._next_in_line.partition)
        return parts

    def is_empty(self) -> bool:
        with self._lock:
            return not self._completed and not self._empty

    def add(self, completed_fetch: CompletedFetch) -> None:
        self.add_all([completed_fetch])

    def add_all(self, completed_fetches: Iterable[CompletedFetch], notify: bool = True) -> None:
        """Queue fetches; ``notify=False`` (paused data put back) does not wake a waiter,
        so a poll with only paused data waits instead of spinning."""
        fetches = list(completed_fetches)
        if not fetches:
            return
        with self._lock:
            buffered = self._buffered()
            for cf in fetches:
                if cf.partition in buffered:
                    raise IllegalStateError("a completed fetch for {}-{} is already buffered".format(*cf.partition))
                buffered.add(cf.partition)
                if cf.empty_answer and not cf.initialized:
                    self._empty.append(cf)
                else:
                    self._completed.append(cf)
            if notify:
                self._woken_up = True
                self._not_empty.notify_all()

    def peek(self) -> Optional[CompletedFetch]:
        with self._lock:
            return self._completed[0] if self._completed else None

    def poll(self) -> Optional[CompletedFetch]:
        with self._lock:
            return self._completed.popleft() if self._completed else None

    @property
    def next_in_line_fetch(self) -> Optional[CompletedFetch]:
        with self._lock:
            return self._next_in_line

    def set_next_in_line_fetch(self, completed_fetch: Optional[CompletedFetch]) -> None:
        with self._lock:
            self._next_in_line = completed_fetch

    def poll_to_next_in_line(self, completed_fetch: Optional[CompletedFetch]) -> None:
        """``set_next_in_line_fetch(completed_fetch)`` then ``poll()`` under one lock: the
        collector's step from the head of the queue (its fetch, or None when that fetch
        was stale) to the fetch it reads next, once per partition of every response."""
        with self._lock:
            self._next_in_line = completed_fetch
            if self._completed:
                self._completed.popleft()

    def has_empty_answers(self) -> bool:
        """Whether fresh answers without records are queued (read without the lock: a
        hint, which ``peek_empty_answers`` makes good)."""
        return bool(self._empty)

    def peek_empty_answers(self) -> list[CompletedFetch]:
        """The queued fresh answers without records, error or read replica
        (``CompletedFetch.empty_answer``, not initialized), in arrival order, whatever data
        was queued before them: they carry nothing to deliver, so the collector takes them
        all at once and their partitions stop counting as buffered (a sessionless broker's
        answer to many partitions is mostly these; see ``AbstractFetch``). They stay
        queued until ``drop_empty_answers`` takes them."""
        with self._lock:
            return list(self._empty)

    def drop_empty_answers(self, fetches: list[CompletedFetch]) -> None:
        """Remove ``fetches`` (from ``peek_empty_answers``, which the collector has dealt
        with) from the head of the empty answers' queue, under one lock."""
        with self._lock:
            queue = self._empty
            for completed in fetches:
                if not queue or queue[0] is not completed:
                    break  # cleared meanwhile (by the collecting thread, so not in practice)
                queue.popleft()

    def await_not_empty(self, timeout_s: Optional[float]) -> bool:
        """Block until a fetch is added, ``wakeup()`` is called or the timeout passes.

        Returns True if woken (by new data, now or since the last wait, or ``wakeup()``),
        False on timeout. ``None`` waits without limit.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            while not self._woken_up and not self._closed:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._not_empty.wait(remaining)
            self._woken_up = False
            return True

    def wakeup(self) -> None:
        """Release a thread blocked in ``await_not_empty`` (the consumer's ``wakeup()``)."""
        with self._lock:
            self._woken_up = True
            self._not_empty.notify_all()

    def buffered_partitions(self) -> set[TopicPartition]:
        """Partitions with data queued or being read (the fetch builder skips their nodes)."""
        with self._lock:
            return self._buffered()

    def buffered_fetches(self) -> list[CompletedFetch]:
        """A snapshot of the buffered fetches (queued, and the one being read unless it is
        consumed): cheaper than ``buffered_partitions`` when the caller may stop early."""
        with self._lock:
            fetches = list(self._completed)
            fetches += self._empty
            if self._next_in_line is not None and not self._next_in_line.is_consumed:
                fetches.append(self._next_in_line)
            return fetches

    def retain_all(self, partitions: Set[TopicPartition]) -> None:
        """Drop buffered data for partitions no longer in ``partitions`` (after unassignment)."""
        with self._lock:
            self._completed = _retained(self._completed, partitions)
            self._empty = _retained(self._empty, partitions)
            if self._next_in_line is not None and self._next_in_line.partition not in partitions:
                self._next_in_line.drain()
                self._next_in_line = None

    def clear(self) -> None:
        with self._lock:
            self._completed.clear()
            self._empty.clear()
            if self._next_in_line is not None:
                self._next_in_line.drain()
            self._next_in_line = None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._completed.clear()
            self._empty.clear()
            self._next_in_line = None
            self._not_empty.notify_all()


def _retained(queue: collections.deque[CompletedFetch], partitions: Set[TopicPartition]
              ) -> collections.deque[CompletedFetch]:
    """``queue`` without the fetches of partitions not in ``partitions``, which are drained
    (as Java: their metrics are reported, nothing more comes out)."""
    dropped = [cf for cf in queue if cf.partition not in partitions]
    if not dropped:
        return queue
    for cf in dropped:
        cf.drain()
    log.debug("dropped buffered fetches for %s", [cf.partition for cf in dropped])
    return collections.deque(cf for cf in queue if cf.partition in partitions)
