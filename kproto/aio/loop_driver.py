"""Runs a background-thread engine's loop on an asyncio event loop (the event-loop shell).

Owns the sockets' registration with the loop and the scheduling of loop iterations. The
engine's ``ConsumerNetworkThread`` object is never started as a thread: each iteration is
its ``run_once`` (events, request managers, one non-blocking network step of the same
``NetworkClient``), run as a loop callback, with the network step left out when it has
nothing to do (no socket was ready, no deadline passed, nothing staged, nothing the
client's ``poll_due_ms`` reports). Between iterations the driver
waits on the loop, not in ``select``: the client's sockets (``NetworkClient.io_interest``:
each connection's read/write interest and the client's wakeup socket, which an
application event's ``wakeup()`` writes to) are handed to ``loop.add_reader`` /
``add_writer``, and a timer covers the earliest manager or network deadline. Any of them
schedules one iteration (``call_soon``, coalesced). So the heartbeat, fetches and commits
progress whenever the application awaits anything, and a loop blocked by the application
delays them, as in aiokafka.

Coroutines wait for the next iteration with ``wait_for_step``; they never run one
themselves, so iterations never nest. Everything runs on the loop's thread.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import selectors
from typing import Any, Optional

from kproto.consumer.background.consumer_network_thread import ConsumerNetworkThread, Resources
from kproto.consumer.background.events import drain
from kproto.consumer.background.network_client_delegate import UNSENT_RECHECK_MS

log = logging.getLogger("kproto.aio")


class LoopEventQueue(collections.deque):  # type: ignore[type-arg]
    """An event queue both of whose ends run on the loop's thread: ``queue.Queue``'s locks
    and condition (taken per event, and per iteration to find it empty) are not needed.
    ``drain`` empties it in one go."""

    put = collections.deque.append

    def get_nowait(self) -> Any:
        try:
            return self.popleft()
        except IndexError:
            raise queue.Empty from None


class LoopNetworkThread(ConsumerNetworkThread):
    """An engine's loop object for the event-loop shell: ``start()`` builds the resources
    on the spot and starts no thread; ``close()`` leaves the closing to ``LoopDriver``."""

    def start(self) -> None:
        try:
            self.resources = self._initialize()
        except BaseException as exc:
            self.initialization_error = exc
        self._initialized.set()

    def wait_for_initialization(self, timeout_s: Optional[float] = None) -> None:
        if self.initialization_error is not None:
            raise self.initialization_error

    def close(self, timeout_ms: int) -> None:
        self._running = False


class LoopDriver:
    """Drives ``network_thread``'s iterations with ``resources`` on ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, network_thread: ConsumerNetworkThread,
                 resources: Resources) -> None:
        self._loop = loop
        self._thread = network_thread
        self._resources = resources
        network_thread.resources = resources
        self._client = resources.client
        self._delegate = resources.network_client_delegate
        # fd -> (socket object, mask) as registered with the loop.
        self._registered: dict[int, tuple[Any, int]] = {}
        # What the client last asked the loop to watch (io_interest), to skip an unchanged sync.
        self._wanted: Optional[list[tuple[Any, int]]] = None
        self._scheduled: Optional[asyncio.Handle] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._timer_at = float("inf")  # loop time the timer fires at
        self._io_at = 0.0  # loop time io_interest's deadline falls at (0: poll the network now)
        # A socket was ready or a deadline passed since the last network step.
        self._network_due = True
        self._waiters: list[asyncio.Future[None]] = []
        self._stopped = False
        self._closing = False
        self.iterations = 0

    # --- scheduling -------------------------------------------------------------------------

    def schedule(self) -> None:
        """Run one iteration soon (idempotent until it ran)."""
        if self._scheduled is None and not self._stopped:
            self._scheduled = self._loop.call_soon(self._step)

    def _on_io(self) -> None:
        """A registered socket is ready (or the client's wakeup socket was written to)."""
        self._network_due = True
        self.schedule()

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = float("inf")
        self._network_due = True
        self.schedule()

    def _step(self) -> None:
        self._scheduled = None
        if self._stopped:
            return
        delegate = self._delegate
        if self._closing:  # only the network: the managers staged their last requests
            delegate.poll(0)
            self._notify()
            return
        thread, resources = self._thread, self._resources
        due_ms = 0.0
        try:
            now = thread._time_ms()
            wait = thread.poll_request_managers(resources, now)
            # The network step only when it has something to do: a socket was ready, a
            # deadline passed, requests were staged, or the client has work no socket
            # announces (poll_due_ms). Most iterations are an application's prefetch that
            # finds every partition's data still buffered: polling the client then (a
            # select, its timeouts and metadata checks, and io_interest after it) was most
            # of their cost, for nothing.
            if not (self._network_due or delegate.unsent_requests):
                due_ms = self._client.poll_due_ms()
            if due_ms <= 0:
                self._network_due = False
                thread.poll_network(resources, 0, now)
            thread.finish_iteration(resources)
        except Exception:  # as the thread's loop: log and go on
            log.exception("Unexpected error in the consumer's event-loop iteration; continuing")
            wait = UNSENT_RECHECK_MS
            due_ms = 0.0
            self._network_due = True
        self.iterations += 1
        self._arm(wait, due_ms)
        self._notify()

    def _arm(self, manager_wait_ms: float, due_ms: float = 0.0) -> None:
        """Register the sockets the client waits for and time the next iteration: the
        earliest of the managers' and the client's deadlines. The client's side only
        changes in a network step (``due_ms`` 0); otherwise the last one stands, but for
        a metadata refresh asked for since (``due_ms``, the client's ``poll_due_ms``)."""
        now = self._loop.time()
        client = self._client
        polled = due_ms <= 0
        if polled:
            wanted, io_wait_ms = client.io_interest()
            if self._delegate.unsent_requests:
                io_wait_ms = min(io_wait_ms, UNSENT_RECHECK_MS)  # a connection to wait for: look again soon
            if wanted != self._wanted:
                self._sync(wanted)
                self._wanted = wanted
            self._io_at = now + max(io_wait_ms, 0) / 1000.0
        elif due_ms < float("inf"):
            self._io_at = min(self._io_at, now + due_ms / 1000.0)
        at = min(self._io_at, now + max(manager_wait_ms, 0) / 1000.0)
        timer = self._timer
        if timer is not None:
            # An earlier timer stands (firing early only costs an iteration that re-arms);
            # after a network step a later deadline replaces it.
            if at >= self._timer_at and not (polled and at > self._timer_at):
                return
            timer.cancel()
        self._timer_at = at
        self._timer = self._loop.call_at(at, self._on_timer)

    def _sync(self, wanted: list[tuple[Any, int]]) -> None:
        want: dict[int, tuple[Any, int]] = {}
        for sock, mask in wanted:
            fd = sock.fileno()
            if fd >= 0:
                want[fd] = (sock, mask)
        for fd, (sock, mask) in list(self._registered.items()):
            new = want.get(fd)
            if new is None or new[0] is not sock or new[1] != mask:
                # Removed before a new socket may be added under a reused fd number.
                self._unregister(fd, mask)
        for fd, (sock, mask) in want.items():
            if fd in self._registered:
                continue
            if mask & selectors.EVENT_READ:
                self._loop.add_reader(fd, self._on_io)
            if mask & selectors.EVENT_WRITE:
                self._loop.add_writer(fd, self._on_io)
            self._registered[fd] = (sock, mask)

    def _unregister(self, fd: int, mask: int) -> None:
        del self._registered[fd]
        if mask & selectors.EVENT_READ:
            self._loop.remove_reader(fd)
        if mask & selectors.EVENT_WRITE:
            self._loop.remove_writer(fd)

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _release(waiter)

    # --- for the façade -------------------------------------------------------------------

    async def wait_for_step(self, timeout_s: float) -> None:
        """Return after the next iteration, or after ``timeout_s`` (or once stopped)."""
        if self._stopped:
            raise asyncio.InvalidStateError("the consumer's loop driver is stopped")
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        # A timer of its own rather than asyncio.wait(), which builds a callback, a set
        # and a timeout handle per wait. Cancelling the caller cancels only the waiter.
        timeout = self._loop.call_later(max(timeout_s, 0), _release, waiter)
        try:
            await waiter
        finally:
            timeout.cancel()

    async def close(self, timeout_ms: int) -> None:
        """Stage the managers' last requests (the leave heartbeat, closing fetch sessions)
        and do network steps until they are written and answered, or ``timeout_ms`` passes
        (at least one step, as the thread's close); then unregister everything.

        As Java's consumer (``AbstractFetcher.maybeCloseFetchSessions``), the answer to a
        request closing a fetch session is waited for: Kafka answers a connection's requests
        in order, so behind a long-polling fetch that is up to ``fetch_max_wait_ms``; without
        it the session would stay in the broker's cache until evicted."""
        delegate = self._resources.network_client_delegate
        deadline = self._loop.time() + timeout_ms / 1000.0
        try:
            self._closing = True
            self._thread.stage_close_requests(self._resources)
            delegate.poll(0)
            while self._close_pending(delegate) and self._loop.time() < deadline:
                self._arm(UNSENT_RECHECK_MS)
                await self.wait_for_step(min(0.1, deadline - self._loop.time()))
        finally:
            self.stop()

    def _close_pending(self, delegate: Any) -> bool:
        client = self._client
        return (bool(delegate.unsent_requests) or client.pending_request_count() > 0 or client.has_pending_output()
                or client.in_flight_request_count() > 0)

    def stop(self) -> None:
        """Stop iterating and take every socket off the loop (idempotent)."""
        self._stopped = True
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = float("inf")
        for fd, (_sock, mask) in list(self._registered.items()):
            self._unregister(fd, mask)
        self._wanted = None
        self._notify()  # waiters return; their next call finds the consumer stopped
        self._thread.reaper.reap_incomplete(drain(self._thread.application_event_queue))


def _release(waiter: "asyncio.Future[None]") -> None:
    if not waiter.done():
        waiter.set_result(None)
