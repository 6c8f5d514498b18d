"""Runs the rebalance listener's callbacks for both engines (Java's
``ConsumerRebalanceListenerInvoker``).

Owns how one callback is called, on the application thread: the listener is the one the
``SubscriptionState`` holds (any object with the method names, as kafka-python allows;
``on_partitions_lost`` defaults to ``on_partitions_revoked``), its latency is recorded
when metrics are on and it returned, and its outcome is Java's:

- a ``WakeupException`` (or ``KeyboardInterrupt``, Java's ``InterruptException``) raised by
  the listener propagates;
- any other exception is logged and returned, so the caller finishes the rebalance step
  first: the classic coordinator raises it once the assignment is applied, the KIP-848
  engine fails the reconciliation that waits on the callback and raises it from ``poll()``.

What is raised to the application is ``maybe_wrap_as_kafka_error(error)``: a ``KafkaError``
as it is, anything else inside one.

A callback that returns an awaitable (``async def``, as kafka-python's
``AsyncConsumerRebalanceListener`` has them) is run to completion before the rebalance step
goes on, on an event loop the invoker keeps for the consumer's life (a listener may keep
objects bound to it from one callback to the next), on the same application thread: a
coroutine left unawaited would skip the callback silently, e.g. the commit of processed
offsets before a revocation. Inside a running event loop the blocking consumer cannot wait
for it; that is an error naming ``kproto.aio``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from kproto.errors import KafkaError, WakeupException

if TYPE_CHECKING:
    from kproto.consumer.subscription_state import SubscriptionState

log = logging.getLogger("kproto.consumer")

ON_PARTITIONS_REVOKED = "on_partitions_revoked"
ON_PARTITIONS_ASSIGNED = "on_partitions_assigned"
ON_PARTITIONS_LOST = "on_partitions_lost"

REBALANCE_CALLBACK_ERROR = "User rebalance callback throws an error"


def maybe_wrap_as_kafka_error(error: BaseException, message: str = REBALANCE_CALLBACK_ERROR) -> KafkaError:
    """``error`` if it is a KafkaError, else a KafkaError naming it, with it as the cause
    (Java's ``ConsumerUtils.maybeWrapAsKafkaException``)."""
    if isinstance(error, KafkaError):
        return error
    wrapped = KafkaError("{}: {!r}".format(message, error))
    wrapped.__cause__ = error
    return wrapped


class ConsumerRebalanceListenerInvoker:
    """``invoke_partitions_assigned/revoked/lost(partitions)``: None, or the listener's error."""

    def __init__(self, subscriptions: SubscriptionState, time_ms: Callable[[], float],
                 record_listener: Optional[Callable[[str, float], None]] = None) -> None:
        self._subscriptions = subscriptions
        self._loop: Optional[asyncio.AbstractEventLoop] = None  # for async callbacks, made on first use
        self._time_ms = time_ms
        # (method name, latency ms), when metrics are on; read at each call, since an
        # engine may attach its metrics after building the invoker.
        self._record_listener = record_listener

    def invoke_partitions_assigned(self, partitions: Iterable[Any]) -> Optional[Exception]:
        return self._invoke(ON_PARTITIONS_ASSIGNED, partitions)

    def invoke_partitions_revoked(self, partitions: Iterable[Any]) -> Optional[Exception]:
        return self._invoke(ON_PARTITIONS_REVOKED, partitions)

    def invoke_partitions_lost(self, partitions: Iterable[Any]) -> Optional[Exception]:
        return self._invoke(ON_PARTITIONS_LOST, partitions)

    def invoke(self, method: str, partitions: Iterable[Any]) -> Optional[Exception]:
        """The callback named ``method`` (one of the ``ON_PARTITIONS_*`` names)."""
        if method not in (ON_PARTITIONS_ASSIGNED, ON_PARTITIONS_REVOKED, ON_PARTITIONS_LOST):
            raise ValueError("not a rebalance listener method: {!r}".format(method))
        return self._invoke(method, partitions)

    def _invoke(self, method: str, partitions: Iterable[Any]) -> Optional[Exception]:
        listener = self._subscriptions.rebalance_listener
        if listener is None:
            return None
        callback = getattr(listener, method, None)
        if callback is None and method == ON_PARTITIONS_LOST:
            callback = getattr(listener, ON_PARTITIONS_REVOKED, None)  # Java's default for lost
        if callback is None:
            return None
        partitions = set(partitions)
        started = self._time_ms()
        try:
            result = callback(partitions)
            if inspect.isawaitable(result):
                self._run_to_completion(result)
        except (WakeupException, KeyboardInterrupt):
            raise
        except Exception as exc:  # returned: the caller completes its rebalance step first
            log.error("User provided listener %s failed on %s for partitions %s: %r",
                      type(listener).__name__, method, sorted(partitions), exc)
            return exc
        # Only a callback that returned is timed (Java's): a failed one has no latency to report.
        if self._record_listener is not None:
            self._record_listener(method, self._time_ms() - started)
        return None

    def _run_to_completion(self, awaitable: Any) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no loop runs on this thread: ours may
        else:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never awaited: no "was never awaited" warning on top of the error
            raise KafkaError(
                "the rebalance listener is asynchronous and the consumer was polled inside a running "
                "event loop, which the blocking KafkaConsumer cannot wait in: use kproto.aio's "
                "AIOKafkaConsumer, or poll from a thread of its own")
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(awaitable)

    def close(self) -> None:
        """Close the event loop of async callbacks, if one was made (the consumer's close)."""
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.close()
