"""The background thread of a background-thread engine (Java's ``ConsumerNetworkThread``).

Owns the loop that drives everything behind the application's back. Each ``run_once``:

1. drains the application-event queue and processes each event (completable events are
   handed to the reaper so they fail at their deadline);
2. polls every request manager, in the order of Java's ``RequestManagers.entries()``
   (coordinator, commit, heartbeat, membership, offsets, topic metadata, fetch), and
   stages their requests;
3. does one network step, blocking at most until the earliest manager deadline;
4. surfaces errors of the network step (a metadata update naming unauthorized or
   invalid topics becomes an ErrorEvent, raised by the application's next call);
5. caches the smallest ``maximum_time_to_wait`` for the application thread;
6. reaps expired completable events.

An exception in one iteration is logged and the loop goes on. Resources (network client,
managers) are built inside the thread by ``initialize``; an error there reaches the
constructor of the consumer through ``wait_for_initialization``. The thread is a daemon
named ``consumer_background_thread``. On close it runs the managers until their last
requests (the leave heartbeat, closing fetch sessions) are sent or the close timeout
passes, then fails every event still pending.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from kproto.consumer.background.events import CompletableApplicationEvent, CompletableEventReaper, EventQueue, drain
from kproto.consumer.background.request_manager import MAX_WAIT_MS
from kproto.clock import monotonic_ms
from kproto.errors import KafkaError

if TYPE_CHECKING:
    from kproto.net.client import NetworkClient

log = logging.getLogger("kproto.kip848")

BACKGROUND_THREAD_NAME = "consumer_background_thread"
# The longest single network step, so close() and new events are never kept waiting long
# even if a wakeup is lost.
MAX_POLL_TIMEOUT_MS = 5000


class Resources:
    """What ``initialize`` builds inside the thread."""

    def __init__(self, network_client_delegate: Any, request_managers: Sequence[Any],
                 application_event_processor: Any, *, client: NetworkClient,
                 close_requests: Callable[[], list[Any]] = lambda: [], membership_manager: Any = None,
                 surface_errors: Callable[[], None] = lambda: None) -> None:
        self.client = client
        self.membership_manager = membership_manager
        self.network_client_delegate = network_client_delegate
        self.request_managers = list(request_managers)
        self.application_event_processor = application_event_processor
        self.close_requests = close_requests
        # Hands errors of the network step (metadata errors) to the application thread.
        self.surface_errors = surface_errors


class ConsumerNetworkThread(threading.Thread):
    def __init__(self, application_event_queue: EventQueue, initialize: Callable[[], Resources],
                 time_ms: Callable[[], int] = monotonic_ms) -> None:
        super().__init__(name=BACKGROUND_THREAD_NAME, daemon=True)
        self.application_event_queue = application_event_queue
        self._initialize = initialize
        self._time_ms = time_ms
        self.reaper = CompletableEventReaper()
        self.resources: Optional[Resources] = None
        self.initialization_error: Optional[BaseException] = None
        self._initialized = threading.Event()
        self._running = True
        self._close_timeout_ms = 0
        self.cached_maximum_time_to_wait_ms = MAX_WAIT_MS

    # --- lifecycle ------------------------------------------------------------------------

    def wait_for_initialization(self, timeout_s: Optional[float] = None) -> None:
        """Block until the thread built its resources; re-raise what failed there."""
        if not self._initialized.wait(timeout_s):
            raise KafkaError("the consumer background thread did not start")
        if self.initialization_error is not None:
            # The thread sets the event just before it returns: wait for that return, so a
            # consumer whose constructor failed leaves no background thread behind (without
            # the join the thread was still alive when the constructor raised, rarely).
            self.join()
            raise self.initialization_error

    def run(self) -> None:
        try:
            self.resources = self._initialize()
        except BaseException as exc:  # handed to the constructor, which raises it
            self.initialization_error = exc
            self._initialized.set()
            return
        self._initialized.set()
        try:
            while self._running:
                try:
                    self.run_once()
                except Exception:
                    log.exception("Unexpected error in the consumer background thread; continuing")
        finally:
            self._cleanup()

    def close(self, timeout_ms: int) -> None:
        """Stop the loop (after the close requests went out, at most ``timeout_ms``)."""
        self._close_timeout_ms = timeout_ms
        self._running = False
        self.wakeup()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout_ms / 1000.0 + MAX_POLL_TIMEOUT_MS / 1000.0)

    def wakeup(self) -> None:
        resources = self.resources
        if resources is not None:
            resources.network_client_delegate.wakeup()

    # --- the loop -------------------------------------------------------------------------

    def run_once(self, max_block_ms: Optional[int] = None) -> int:
        """One iteration; returns ms until the managers want the next one.

        ``max_block_ms`` caps the network step's wait: an event-loop shell (``kproto.aio``)
        passes 0 and waits for the sockets on its loop instead of in ``select``; it runs
        the three parts itself (``poll_request_managers``, ``poll_network``,
        ``finish_iteration``), skipping the network step when nothing is due there."""
        resources = self.resources
        assert resources is not None  # set before the loop starts (initialize_resources)
        now = self._time_ms()
        poll_wait = self.poll_request_managers(resources, now)
        block = max(0, poll_wait) if max_block_ms is None else max(0, min(poll_wait, max_block_ms))
        self.poll_network(resources, block, now)
        self.finish_iteration(resources)
        return poll_wait

    def poll_request_managers(self, resources: Resources, now: int) -> int:
        """Process the application events, then poll every request manager and stage its
        requests; returns ms until the managers want the next iteration."""
        self._process_application_events(resources)
        delegate = resources.network_client_delegate
        poll_wait = MAX_POLL_TIMEOUT_MS
        for manager in resources.request_managers:
            result = manager.poll(now)
            if result.unsent_requests:
                delegate.add_all(result)
            if result.time_until_next_poll_ms < poll_wait:
                poll_wait = result.time_until_next_poll_ms
        return poll_wait

    def poll_network(self, resources: Resources, block_ms: int, now: int) -> None:
        """The network step (sends, one ``select``, responses), then hand its errors on."""
        resources.network_client_delegate.poll(block_ms, now)
        resources.surface_errors()

    def finish_iteration(self, resources: Resources) -> None:
        """Cache the managers' ``maximum_time_to_wait`` for the application thread and reap
        expired completable events."""
        now = self._time_ms()
        wait = MAX_WAIT_MS
        for manager in resources.request_managers:
            manager_wait = manager.maximum_time_to_wait(now)
            if manager_wait < wait:
                wait = manager_wait
        self.cached_maximum_time_to_wait_ms = wait
        self.reaper.reap(now)

    def _process_application_events(self, resources: Resources) -> None:
        for event in drain(self.application_event_queue):
            if isinstance(event, CompletableApplicationEvent):
                self.reaper.add(event)
            try:
                resources.application_event_processor.process(event)
            except Exception as exc:
                log.warning("Error processing %s: %s", type(event).__name__, exc)
                future = getattr(event, "future", None)
                if future is not None and not future.done():
                    future.set_exception(exc)

    def _cleanup(self) -> None:
        resources = self.resources
        try:
            if resources is not None:
                self._run_at_close(resources)
        except Exception:
            log.exception("Error while closing the consumer background thread")
        finally:
            self.reaper.reap_incomplete(drain(self.application_event_queue))
            log.debug("The consumer background thread has closed")

    def stage_close_requests(self, resources: Resources) -> None:
        """Process the last events and stage every manager's last requests (the leave
        heartbeat, closing fetch sessions); the caller polls until they are sent."""
        delegate = resources.network_client_delegate
        self._process_application_events(resources)
        now = self._time_ms()
        for manager in resources.request_managers:
            delegate.add_all(manager.poll(now))
        for manager in resources.request_managers:
            poll_on_close = getattr(manager, "poll_on_close", None)  # Java's RequestManager.pollOnClose
            if poll_on_close is not None:
                delegate.add_all(poll_on_close(now))
        delegate.add_all(resources.close_requests())

    def _run_at_close(self, resources: Resources) -> None:
        """Let the managers send their last requests (the leave heartbeat) before exiting."""
        deadline = self._time_ms() + self._close_timeout_ms
        delegate = resources.network_client_delegate
        self.stage_close_requests(resources)
        # At least one network poll, as Java's sendUnsentRequests: close(timeout_ms=0) still
        # writes the leave heartbeat to a ready coordinator connection.
        while delegate.has_pending_requests():
            remaining = max(0, deadline - self._time_ms())
            delegate.poll(min(remaining, 100))
            if remaining <= 0:
                break
