"""Runs a background-thread engine's loop on an asyncio event loop (the event-loop shell).

Owns the sockets' registration with the loop and the scheduling of loop iterations. The
engine's ``ConsumerNetworkThread`` object is never started as a thread: each iteration is
its ``run_once(max_block_ms=0)`` (events, request managers, one non-blocking network step
of the same ``NetworkClient``), run as a loop callback. Between iterations the driver
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
import logging
import selectors
from typing import Any, Optional

from kproto.consumer.background.consumer_network_thread import ConsumerNetworkThread, Resources
from kproto.consumer.background.events import drain
from kproto.consumer.background.network_client_delegate import UNSENT_RECHECK_MS

log = logging.getLogger("kproto.aio")


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
        # fd -> (socket object, mask) as registered with the loop.
        self._registered: dict[int, tuple[Any, int]] = {}
        self._scheduled: Optional[asyncio.Handle] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._waiters: list[asyncio.Future[None]] = []
        self._stopped = False
        self._closing = False
        self.iterations = 0

    # --- scheduling -------------------------------------------------------------------------

    def schedule(self) -> None:
        """Run one iteration soon (idempotent until it ran)."""
        if self._scheduled is None and not self._stopped:
            self._scheduled = self._loop.call_soon(self._step)

    def _step(self) -> None:
        self._scheduled = None
        if self._stopped:
            return
        if self._closing:  # only the network: the managers staged their last requests
            self._resources.network_client_delegate.poll(0)
            self._notify()
            return
        try:
            wait = self._thread.run_once(max_block_ms=0)
        except Exception:  # as the thread's loop: log and go on
            log.exception("Unexpected error in the consumer's event-loop iteration; continuing")
            wait = UNSENT_RECHECK_MS
        self.iterations += 1
        self._arm(wait)
        self._notify()

    def _arm(self, manager_wait_ms: float) -> None:
        wanted, io_wait_ms = self._client.io_interest()
        wait = min(manager_wait_ms, io_wait_ms)
        if self._resources.network_client_delegate.unsent_requests:
            wait = min(wait, UNSENT_RECHECK_MS)  # a connection to wait for: look again soon
        self._sync(wanted)
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(max(wait, 0) / 1000.0, self.schedule)

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
                self._loop.add_reader(fd, self.schedule)
            if mask & selectors.EVENT_WRITE:
                self._loop.add_writer(fd, self.schedule)
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
            if not waiter.done():
                waiter.set_result(None)

    # --- for the façade -------------------------------------------------------------------

    async def wait_for_step(self, timeout_s: float) -> None:
        """Return after the next iteration, or after ``timeout_s``."""
        if self._stopped:
            raise asyncio.InvalidStateError("the consumer's loop driver is stopped")
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait([waiter], timeout=max(timeout_s, 0))
        finally:
            if not waiter.done():
                waiter.cancel()

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
        for fd, (_sock, mask) in list(self._registered.items()):
            self._unregister(fd, mask)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.cancel()
        self._waiters = []
        self._thread.reaper.reap_incomplete(drain(self._thread.application_event_queue))
