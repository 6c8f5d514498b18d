"""``wakeup()`` for consumers whose calls block on futures (Java's ``WakeupTrigger``).

Owns the one piece of state ``wakeup()`` shares between the thread that calls it and the
application thread: what a wakeup would interrupt now. It is one of

- nothing: ``wakeup()`` leaves a pending wakeup, raised by the next
  ``maybe_trigger_wakeup()`` or ``set_active_task()``;
- the future an application call is blocked on (``set_active_task`` .. ``clear_task``):
  ``wakeup()`` completes it with ``WakeupException``, so the blocked call raises it; if the
  future completed meanwhile, the wakeup stays pending for the next call instead;
- a pending wakeup;
- disabled (``disable_wakeups``, on close): ``wakeup()`` does nothing from then on.

Every transition happens under one lock, so a wakeup is never lost between a call checking
for one and starting to block. Waking a thread blocked on a fetch buffer is the engine's
part (it calls the buffer's ``wakeup`` after this one's).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Union

from kproto.errors import IllegalStateError, WakeupException


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_WAKEUP = _Marker("WakeupFuture")  # a wakeup came while nothing was blocked
_DISABLED = _Marker("DisabledWakeups")


class WakeupTrigger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: Union[None, _Marker, Future[Any]] = None

    def wakeup(self) -> None:
        """From any thread: interrupt the blocked call, or the next one."""
        with self._lock:
            task = self._pending
            if task is None:
                self._pending = _WAKEUP
            elif isinstance(task, Future):
                try:
                    task.set_exception(WakeupException())
                    self._pending = None
                except InvalidStateError:
                    # It completed meanwhile: the wakeup is for the next call.
                    self._pending = _WAKEUP

    def set_active_task(self, future: Future[Any]) -> Future[Any]:
        """``future`` is what the calling thread blocks on until ``clear_task()``.

        A pending wakeup is raised here, before the caller waits (Java completes the future
        instead; raising keeps the caller from handing a failed future to the background
        thread, which completes it later).
        """
        with self._lock:
            task = self._pending
            if task is None:
                self._pending = future
                return future
            if task is _DISABLED:
                return future
            if task is _WAKEUP:
                self._pending = None
            else:
                raise IllegalStateError("Last active task is still active")
        raise WakeupException()

    def clear_task(self) -> None:
        """The call stopped waiting on its future; a pending wakeup stays pending."""
        with self._lock:
            if isinstance(self._pending, Future):
                self._pending = None

    def maybe_trigger_wakeup(self) -> None:
        """Raise ``WakeupException`` once for each wakeup that came while nothing blocked."""
        with self._lock:
            if self._pending is not _WAKEUP:
                return
            self._pending = None
        raise WakeupException()

    def disable_wakeups(self) -> None:
        """From now on ``wakeup()`` does nothing (the consumer is closing)."""
        with self._lock:
            self._pending = _DISABLED

    def active_task(self) -> Optional[Future[Any]]:
        """The future a call is blocked on, if any (tests use it to wake a blocked call)."""
        task = self._pending
        return task if isinstance(task, Future) else None

    @contextmanager
    def blocking_on(self, future: Future[Any]) -> Iterator[Any]:
        """``set_active_task(future)`` for the body of the ``with``, then ``clear_task()``."""
        self.set_active_task(future)
        try:
            yield future
        finally:
            self.clear_task()
