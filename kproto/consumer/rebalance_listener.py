"""``ConsumerRebalanceListener``: the callbacks group management runs around a rebalance.

Owns the listener's interface, kafka-python compatible (an abstract base class with
``on_partitions_revoked(revoked)`` and ``on_partitions_assigned(assigned)``), plus
Java's ``onPartitionsLost`` as ``on_partitions_lost(lost)``, which by default calls
``on_partitions_revoked`` (Java's default). Both engines call these on the application
thread inside ``poll()`` (or ``close()``/``unsubscribe()``), with a set of
``TopicPartition``. Engines also accept any object with these method names (duck
typing, as kafka-python does).

``AsyncConsumerRebalanceListener`` is kafka-python's variant with ``async def`` methods:
the consumer runs each to completion before the rebalance goes on (see
``kproto.consumer.rebalance_listener_invoker``), so a listener written for kafka-python's
consumer behaves the same here.
"""

from __future__ import annotations

import abc
from typing import Set

from kproto.structs import TopicPartition


class ConsumerRebalanceListener(abc.ABC):
    """Subclass and pass to ``KafkaConsumer.subscribe(topics, listener=...)``."""

    @abc.abstractmethod
    def on_partitions_revoked(self, revoked: Set[TopicPartition]) -> None:
        """Called before partitions are taken away (commit processed offsets here).

        Under the eager protocol this sees every owned partition at the start of a
        rebalance; under cooperative rebalancing only the partitions that move.
        """

    @abc.abstractmethod
    def on_partitions_assigned(self, assigned: Set[TopicPartition]) -> None:
        """Called after a rebalance with the partitions newly given to this consumer."""

    def on_partitions_lost(self, lost: Set[TopicPartition]) -> None:
        """Called when partitions were lost without a chance to commit (the member was
        fenced or timed out); other members may already own them. Default: treat as revoked."""
        self.on_partitions_revoked(lost)


class AsyncConsumerRebalanceListener(abc.ABC):
    """``ConsumerRebalanceListener`` with coroutine methods (kafka-python's name): for a
    listener that awaits I/O, e.g. an asynchronous database client. The consumer awaits
    each callback inside ``poll()`` on an event loop it keeps for its life."""

    @abc.abstractmethod
    async def on_partitions_revoked(self, revoked: Set[TopicPartition]) -> None:
        """As ``ConsumerRebalanceListener.on_partitions_revoked``, awaited."""

    @abc.abstractmethod
    async def on_partitions_assigned(self, assigned: Set[TopicPartition]) -> None:
        """As ``ConsumerRebalanceListener.on_partitions_assigned``, awaited."""

    async def on_partitions_lost(self, lost: Set[TopicPartition]) -> None:
        """As ``ConsumerRebalanceListener.on_partitions_lost``; default: treat as revoked."""
        await self.on_partitions_revoked(lost)
