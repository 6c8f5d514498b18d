"""What the two background-thread engines share (KIP-848's ``AsyncKafkaConsumer`` and the
share group's ``ShareConsumerImpl``): one home for their application-side plumbing.

Owns starting the network thread with its event queues, handler and wakeup trigger; turning
a call's timeout into a deadline on the engine's clock; running background events (callbacks,
errors) while closing without letting an error stop the close; and releasing the thread,
fetch buffer, network client and metrics at the end of ``close()``. Java repeats these in
both classes; each engine here keeps only what differs (its events, its resources, its
close steps). A third shell (the asyncio consumer) reuses this too: see DESIGN.md.
"""

from __future__ import annotations

import logging
import queue
from typing import Any, Callable, Generic, Optional, Protocol, TypeVar

from kproto.consumer.background.consumer_network_thread import ConsumerNetworkThread, Resources
from kproto.consumer.background.events import ApplicationEventHandler
from kproto.consumer.background.wakeup_trigger import WakeupTrigger
from kproto.errors import AuthenticationError, KafkaError
from kproto.metrics.metrics import Metrics
from kproto.net.client import NetworkClient

# How long close() waits when the application gives no timeout (Java's DEFAULT_CLOSE_TIMEOUT_MS).
DEFAULT_CLOSE_TIMEOUT_MS = 30000


class _Buffer(Protocol):
    def wakeup(self) -> None: ...
    def close(self) -> None: ...


B = TypeVar("B", bound=_Buffer)


class BackgroundEngine(Generic[B]):
    """Base of the background-thread engines (``B``: the engine's fetch buffer); see the
    module docstring.

    A subclass sets ``_time_ms``, ``default_api_timeout_ms``, ``fetch_buffer``, ``_metrics``
    and ``_log`` before calling ``_start_network_thread``, and implements
    ``_process_background_events``.
    """

    _log: logging.Logger
    _time_ms: Callable[[], int]
    default_api_timeout_ms: int
    fetch_buffer: B
    _metrics: Optional[Metrics]

    def _start_network_thread(self, initialize: Callable[[], Resources],
                              network_thread_class: type[ConsumerNetworkThread] = ConsumerNetworkThread
                              ) -> Resources:
        """Start the network thread (its resources built on it by ``initialize``) and wait
        until they are; a failure there is raised here, with the engine marked closed.
        ``network_thread_class``: the event-loop shell (``kproto.aio``) passes one whose
        ``start()`` builds the resources inline and starts no thread."""
        self.application_event_queue: "queue.Queue[Any]" = queue.Queue()
        self.background_event_queue: "queue.Queue[Any]" = queue.Queue()
        self.network_thread = network_thread_class(self.application_event_queue, initialize, self._time_ms)
        self.application_event_handler = ApplicationEventHandler(
            self.application_event_queue, self.network_thread.wakeup, self._time_ms)
        self._wakeup_trigger = WakeupTrigger()
        self._closed = False
        self.network_thread.start()
        try:
            self.network_thread.wait_for_initialization()
        except BaseException:
            self._closed = True
            raise
        resources = self.network_thread.resources
        assert resources is not None  # initialized, or wait_for_initialization raised
        self.client: NetworkClient = resources.client
        return resources

    def _process_background_events(self) -> None:
        raise NotImplementedError

    def _deadline(self, timeout_ms: Optional[int]) -> int:
        """The deadline of a call given ``timeout_ms`` (``default_api_timeout_ms`` if None)."""
        timeout = self.default_api_timeout_ms if timeout_ms is None else timeout_ms
        if timeout < 0:
            raise KafkaError("timeout_ms must be >= 0, not {}".format(timeout))
        return self._time_ms() + timeout

    def _close_deadline(self, timeout_ms: Optional[int]) -> int:
        return self._deadline(DEFAULT_CLOSE_TIMEOUT_MS if timeout_ms is None else timeout_ms)

    def _run_callbacks_quietly(self) -> None:
        """Background events while closing: close() still completes; an error is logged."""
        try:
            self._process_background_events()
        except Exception as exc:
            # An authentication failure is reported by several managers and raised by any
            # call that needs a broker, so the application has most likely seen it already
            # (the CLI printed it as its one line): no warning for a leftover copy.
            self._log.log(logging.INFO if isinstance(exc, AuthenticationError) else logging.WARNING,
                          "Error while closing: %s", exc)

    def _release(self, deadline: int) -> None:
        """The last step of close(), whatever happened before it: stop the network thread
        (waiting at most until ``deadline``), then the fetch buffer, the client, the metrics."""
        self.network_thread.close(max(0, deadline - self._time_ms()))
        self.fetch_buffer.close()
        self.client.close()
        if self._metrics is not None:
            self._metrics.close()
