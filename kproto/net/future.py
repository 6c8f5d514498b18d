"""Future: the result of a request that completes later, with callbacks and errbacks.

The network client hands one back for every request it sends (as Java's
``RequestFuture`` and kafka-python's ``Future``). It completes exactly once, from
whichever thread drives ``NetworkClient.poll()``; callbacks run on that thread, in the
order they were added, and a callback added after completion runs at once. A callback
that raises is logged and does not stop the others.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

log = logging.getLogger("kproto.net")


class Future:
    """A value or an exception that arrives later. Thread-safe completion."""

    __slots__ = ("is_done", "value", "exception", "_callbacks", "_errbacks", "_lock")

    def __init__(self) -> None:
        self.is_done = False
        self.value: Any = None
        self.exception: BaseException | None = None
        self._callbacks: list[Callable[[Any], Any]] = []
        self._errbacks: list[Callable[[BaseException], Any]] = []
        self._lock = threading.Lock()

    def succeeded(self) -> bool:
        return self.is_done and self.exception is None

    def failed(self) -> bool:
        return self.is_done and self.exception is not None

    def retriable(self) -> bool:
        """Whether the failure says the same request may succeed if retried."""
        return bool(getattr(self.exception, "retriable", False))

    def success(self, value: Any) -> Future:
        with self._lock:
            if self.is_done:
                raise RuntimeError("future already completed")
            self.value = value
            self.is_done = True
            callbacks = self._callbacks
            self._callbacks, self._errbacks = [], []
        for fn in callbacks:
            _call(fn, value)
        return self

    def failure(self, exception: BaseException | type[BaseException]) -> Future:
        if isinstance(exception, type):
            exception = exception()
        with self._lock:
            if self.is_done:
                raise RuntimeError("future already completed")
            self.exception = exception
            self.is_done = True
            errbacks = self._errbacks
            self._callbacks, self._errbacks = [], []
        for fn in errbacks:
            _call(fn, exception)
        return self

    def add_callback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Call ``fn(*args, value, **kwargs)`` on success."""
        if args or kwargs:
            fn = _partial(fn, args, kwargs)
        with self._lock:
            if not self.is_done:
                self._callbacks.append(fn)
                return self
        if self.exception is None:
            _call(fn, self.value)
        return self

    def add_errback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Call ``fn(*args, exception, **kwargs)`` on failure."""
        if args or kwargs:
            fn = _partial(fn, args, kwargs)
        with self._lock:
            if not self.is_done:
                self._errbacks.append(fn)
                return self
        if self.exception is not None:
            _call(fn, self.exception)
        return self

    def add_both(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        self.add_callback(fn, *args, **kwargs)
        return self.add_errback(fn, *args, **kwargs)

    def chain(self, other: Future) -> Future:
        """Complete ``other`` the same way this one completes."""
        self.add_callback(other.success)
        return self.add_errback(other.failure)

    def __repr__(self) -> str:
        state = "pending" if not self.is_done else (
            "failed: {!r}".format(self.exception) if self.exception is not None else "done")
        return "<Future {}>".format(state)


def _partial(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Callable[[Any], Any]:
    return lambda result: fn(*args, result, **kwargs)


def _call(fn: Callable[[Any], Any], arg: Any) -> None:
    try:
        fn(arg)
    except Exception:  # a faulty callback must not break the others or the network loop
        log.exception("future callback %r failed", fn)
