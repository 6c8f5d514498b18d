"""The event machinery shared by every background-thread engine (Java's ``internals.events``
base classes).

Owns the two event hierarchies' roots and their plumbing:

- ``ApplicationEvent`` (application thread -> background thread), with
  ``CompletableApplicationEvent`` for blocking API calls: it carries a future the caller
  waits on and a deadline after which the ``CompletableEventReaper`` fails it;
- ``BackgroundEvent`` (background thread -> application thread), and ``ErrorEvent``: an
  error to raise from the next API call;
- ``ApplicationEventHandler`` (``add`` enqueues and wakes the network thread, ``add_and_get``
  also waits on the event's future) and ``BackgroundEventHandler``, both over an
  ``EventQueue``: a ``queue.Queue`` between two threads, a plain deque where both ends run
  on one thread (``kproto.aio``).

Events are plain data; what they do is decided by the processor on the receiving thread.
An engine's own event types (the KIP-848 consumer's: ``kproto.consumer.kip848.events``)
subclass these.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Optional, Protocol

from kproto.clock import monotonic_ms
from kproto.errors import KafkaError, KafkaTimeoutError

_ids = itertools.count(1)


# --- application events (application thread -> background thread) ----------------------


class ApplicationEvent:
    """Something the application thread asks the background thread to do."""

    def __init__(self) -> None:
        self.id = next(_ids)

    def _fields(self) -> str:
        return ", ".join("{}={!r}".format(k, v) for k, v in vars(self).items()
                         if k not in ("id", "future") and not k.startswith("_"))

    def __repr__(self) -> str:
        return "{}(id={}, {})".format(type(self).__name__, self.id, self._fields())


class CompletableApplicationEvent(ApplicationEvent):
    """An event a blocking call waits on: ``future`` completes by ``deadline_ms`` or is reaped."""

    def __init__(self, deadline_ms: int) -> None:
        super().__init__()
        self.deadline_ms = deadline_ms
        self.future: Future[Any] = Future()


# --- background events (background thread -> application thread) -----------------------


class BackgroundEvent:
    """Something the background thread hands to the application thread."""

    def __init__(self) -> None:
        self.id = next(_ids)

    def __repr__(self) -> str:
        fields = ", ".join("{}={!r}".format(k, v) for k, v in vars(self).items()
                           if k not in ("id", "future"))
        return "{}(id={}, {})".format(type(self).__name__, self.id, fields)


class CompletableBackgroundEvent(BackgroundEvent):
    def __init__(self, deadline_ms: Optional[int] = None) -> None:
        super().__init__()
        self.deadline_ms = deadline_ms
        self.future: Future[Any] = Future()


class ErrorEvent(BackgroundEvent):
    """An error to raise from the application's next consumer call."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error


# --- handlers and the reaper -------------------------------------------------------------


class EventQueue(Protocol):
    """What the handlers and ``drain`` need of an event queue (``queue.Queue`` has it)."""

    def put(self, item: Any) -> None: ...

    def get_nowait(self) -> Any: ...


def drain(q: EventQueue) -> list[Any]:
    """Everything currently in ``q``, without blocking (Java's ``drainTo``)."""
    if isinstance(q, collections.deque):
        # A one-thread queue (kproto.aio's LoopEventQueue): no lock to take per item, and
        # no queue.Empty raised to find the end, once per iteration of the loop.
        drained = list(q)
        q.clear()
        return drained
    items = []
    while True:
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            return items


class CompletableEventReaper:
    """Fails completable events whose deadline passed (Java's ``CompletableEventReaper``).

    The background thread ``add``s every completable event it processes and calls
    ``reap(now_ms)`` once per loop; ``reap_incomplete`` on close fails everything left,
    including events still sitting in the application queue.
    """

    def __init__(self) -> None:
        self._tracked: list[Any] = []

    def add(self, event: Any) -> None:
        self._tracked.append(event)

    def reap(self, now_ms: int) -> int:
        """Fail expired, incomplete events with KafkaTimeoutError; forget completed ones."""
        expired = 0
        remaining = []
        for event in self._tracked:
            if event.future.done():
                continue
            if now_ms >= event.deadline_ms:
                _fail(event.future, KafkaTimeoutError(
                    "{} could not be completed before its deadline".format(type(event).__name__)))
                expired += 1
            else:
                remaining.append(event)
        self._tracked = remaining
        return expired

    def reap_incomplete(self, pending: Iterable[Any] = ()) -> int:
        """Fail every tracked event and every completable one in ``pending`` (on close)."""
        failed = 0
        for event in itertools.chain(self._tracked, pending):
            future = getattr(event, "future", None)
            if isinstance(future, Future) and not future.done():
                _fail(future, KafkaError("The consumer is closed"))
                failed += 1
        self._tracked = []
        return failed

    def size(self) -> int:
        return len(self._tracked)

    def contains(self, event: Any) -> bool:
        return any(e is event for e in self._tracked)


def _fail(future: Future[Any], error: BaseException) -> None:
    try:
        future.set_exception(error)
    except concurrent.futures.InvalidStateError:
        pass  # completed concurrently by the other thread: its outcome stands


class ApplicationEventHandler:
    """The application thread's end of the application-event queue.

    ``wakeup`` is called after every ``add`` so a network thread blocked in its network
    step picks the event up at once.
    """

    def __init__(self, application_event_queue: EventQueue,
                 wakeup: Callable[[], None] = lambda: None,
                 time_ms: Callable[[], int] = monotonic_ms) -> None:
        self.queue = application_event_queue
        self._wakeup = wakeup
        self._time_ms = time_ms

    def add(self, event: ApplicationEvent) -> None:
        self.queue.put(event)
        self._wakeup()

    def add_and_get(self, event: CompletableApplicationEvent) -> Any:
        """Enqueue ``event`` and wait for its result until its deadline.

        Raises the exception the background thread failed it with, or KafkaTimeoutError.
        """
        self.add(event)
        return wait_for(event.future, event.deadline_ms, self._time_ms)


def wait_for(future: Future[Any], deadline_ms: int, time_ms: Callable[[], int] = monotonic_ms) -> Any:
    """``future.result()`` bounded by ``deadline_ms``; a timeout is KafkaTimeoutError.

    The reaper normally fails the future at its deadline; the bound here keeps the caller
    from hanging if the background thread cannot run it.
    """
    # Clamped: a "forever" deadline must not overflow the lock's timeout.
    remaining_s = min(max(0, deadline_ms - time_ms()) / 1000.0, threading.TIMEOUT_MAX)
    try:
        return future.result(timeout=remaining_s)
    except concurrent.futures.TimeoutError:
        raise KafkaTimeoutError("Timed out waiting for the background thread") from None


class BackgroundEventHandler:
    """The background thread's end of the background-event queue."""

    def __init__(self, background_event_queue: EventQueue,
                 wake_application: Callable[[], None] = lambda: None) -> None:
        self.queue = background_event_queue
        # The application thread may be blocked waiting for fetched data: a callback to
        # run or an error to raise must not wait for that wait to time out.
        self._wake_application = wake_application

    def add(self, event: BackgroundEvent) -> None:
        self.queue.put(event)
        self._wake_application()
