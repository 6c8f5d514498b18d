"""One thread at a time in a consumer façade (Java's ``acquire()``/``release()`` light lock).

Owns which thread is inside a consumer call right now, and whether the consumer is closed.
A second thread entering while one is inside gets ``ConcurrentModificationError`` at once
instead of blocking: a consumer is not safe for multi-threaded access, and only
``wakeup()`` (which does not enter) may come from another thread. Re-entrant, so a call may
make another call on the same thread.

Both façades (``KafkaConsumer``, ``KafkaShareConsumer``) reach their engine only through
one: ``with confinement as engine: engine.poll(...)`` is Java's ``acquireAndEnsureOpen()``
… ``release()``, and hands back the engine under its own type, so the type checker checks
every forwarded call against the engine's signature.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Generic, Optional, TypeVar

from kproto.errors import ConcurrentModificationError, IllegalStateError

E = TypeVar("E")


class ThreadConfinement(Generic[E]):
    """Java's light CAS lock around a façade's engine: one owning thread, re-entrant, never blocks.

    The lock itself is the ownership token, held from the outermost ``acquire`` to its
    ``release`` (Java's compare-and-set of the owner): taking it without blocking is the
    CAS; a thread that fails to take it is the owner re-entering or an intruder. So a call
    costs one lock operation each way, not a critical section around a check.
    """

    __slots__ = ("_lock", "_owner", "_depth", "_what", "_engine", "closed")

    def __init__(self, engine: E, what: str = "KafkaConsumer") -> None:
        self._lock = threading.Lock()
        self._owner: Optional[int] = None
        self._depth = 0
        self._what = what  # the façade's class, for the error message
        self._engine = engine
        # Set by the façade's close(); entering afterwards raises IllegalStateError.
        self.closed = False

    def acquire(self) -> None:
        if self._lock.acquire(False):
            self._owner = threading.get_ident()
            self._depth = 1
        elif self._owner == threading.get_ident():
            # Only the owner changes _owner/_depth while it holds the lock.
            self._depth += 1
        else:
            raise ConcurrentModificationError(
                "{} is not safe for multi-threaded access: it is in use by "
                "another thread (only wakeup() may be called from other threads)".format(self._what))

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()

    def __enter__(self) -> E:
        """The engine, for this thread only, while the consumer is open (Java's ``acquireAndEnsureOpen``)."""
        self.acquire()
        if self.closed:
            self.release()
            raise IllegalStateError("This consumer has already been closed.")
        return self._engine

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.release()
