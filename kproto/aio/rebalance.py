"""aiokafka's rebalance listener and how ``kproto.aio`` runs its callbacks.

Owns ``ConsumerRebalanceListener`` (aiokafka's abstract class: its methods may be
coroutines or plain functions; kafka-python style listeners work too) and
``run_listener_callback``, which answers one KIP-848 callback request: it calls the
listener's method on the loop, awaits it if it returned an awaitable, and sends the
completion event back (with the error a failing callback raised), so the reconciliation
waiting on it goes on. The façade runs each in a task of its own, chained after the
previous one, so callbacks keep their order and a cancelled ``getmany()`` does not
cancel a callback half way (the reconciliation would wait on it forever).
"""

from __future__ import annotations

import abc
import asyncio
import inspect
import logging
from typing import Any, Callable, Optional, Set

from kproto.consumer.kip848 import events as ev
from kproto.consumer.rebalance_listener_invoker import ON_PARTITIONS_LOST, ON_PARTITIONS_REVOKED, maybe_wrap_as_kafka_error
from kproto.structs import TopicPartition

log = logging.getLogger("kproto.aio")


class ConsumerRebalanceListener(abc.ABC):
    """Subclass and pass to ``AIOKafkaConsumer.subscribe(topics, listener=...)`` (aiokafka's
    ``aiokafka.abc.ConsumerRebalanceListener``); methods may be ``async def``."""

    @abc.abstractmethod
    def on_partitions_revoked(self, revoked: Set[TopicPartition]) -> Any:
        """Before partitions are taken away (commit their offsets here)."""

    @abc.abstractmethod
    def on_partitions_assigned(self, assigned: Set[TopicPartition]) -> Any:
        """After partitions were assigned, before their records are fetched."""


async def run_listener_callback(listener: Any, event: ev.ConsumerRebalanceListenerCallbackNeededEvent,
                                previous: Optional["asyncio.Task[Any]"],
                                complete: Callable[[ev.ConsumerRebalanceListenerCallbackCompletedEvent], None]
                                ) -> Optional[BaseException]:
    """Run the callback ``event`` asks for after ``previous``; hand the completion to
    ``complete`` and return the callback's error (None if it returned)."""
    if previous is not None:
        await asyncio.wait([previous])
    method = event.method_name.value
    callback = getattr(listener, method, None) if listener is not None else None
    if callback is None and method == ON_PARTITIONS_LOST and listener is not None:
        callback = getattr(listener, ON_PARTITIONS_REVOKED, None)
    error: Optional[BaseException] = None
    try:
        if callback is not None:
            result = callback(set(event.partitions))
            if inspect.isawaitable(result):
                await result
    except Exception as exc:  # raised from getmany(); the reconciliation fails first
        log.error("User provided listener %s failed on %s for partitions %s: %r",
                  type(listener).__name__, method, list(event.partitions), exc)
        error = maybe_wrap_as_kafka_error(exc)
    finally:
        # Also when cancelled (stop()): the member must not wait on this callback.
        complete(ev.ConsumerRebalanceListenerCallbackCompletedEvent(event.method_name, event.future, error))
    return error
