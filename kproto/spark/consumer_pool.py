"""The task consumers a Python worker keeps between tasks: ``InternalKafkaConsumerPool``.

Spark's Kafka source does not open a consumer per task: each executor keeps its consumers
in a pool keyed by (group id, topic partition) (``InternalKafkaConsumerPool`` behind
``KafkaDataConsumer.acquire``/``release``), so a stream's next micro-batch reads a
partition on the connection, fetch session and fetched data the previous task left. Per
task that saves the connection set-up (ApiVersions, Metadata), the fetch session's full
first Fetch and its close, and the records already fetched past the task's range end.

This pool does the same for kproto's tasks in one Python worker process (PySpark reuses
its workers between tasks by default, ``spark.python.worker.reuse``). Its rules are
Spark's:

- a key is the consumer's settings and its one topic partition; a borrowed consumer is
  lent to one task at a time, and a key may have several (tasks of one partition's
  ``minPartitions`` splits running at once);
- a task that ends normally returns its consumer (``release``); a task that fails closes
  it and every idle consumer of its key (``invalidate``, Spark's ``invalidateKey``: the
  next task starts on a fresh one);
- consumers idle longer than ``idle_timeout_ms`` (Spark's ``spark.kafka.consumer.cache.timeout``,
  5 minutes) are closed, and beyond ``capacity`` idle consumers (Spark's
  ``spark.kafka.consumer.cache.capacity``, 64) the longest idle are.

No evictor thread: expiry is checked whenever a consumer is borrowed or returned (a
worker that runs no task holds its idle consumers until its next task or its exit; the
broker's ``connections.max.idle.ms`` closes their connections meanwhile, and a consumer
reconnects when next used). Time comes from the ``clock`` given (seconds, monotonic).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from typing import Callable, Generic, Hashable, Optional, Protocol, TypeVar

from kproto.consumer.kafka_consumer import KafkaConsumer

log = logging.getLogger("kproto.spark")

#: Spark's defaults for its consumer pool.
DEFAULT_CAPACITY = 64
DEFAULT_IDLE_TIMEOUT_MS = 5 * 60 * 1000
# How long closing an evicted consumer may take (it closes its fetch session): evictions
# run inside a task, which must not wait long for a broker that has gone away.
_CLOSE_TIMEOUT_MS = 1000


class Closeable(Protocol):
    def close(self, autocommit: bool = ..., timeout_ms: Optional[int] = ...) -> None: ...


C = TypeVar("C", bound=Closeable)


class InternalKafkaConsumerPool(Generic[C]):
    """Idle consumers by key, lent one task at a time (see the module docstring)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = capacity
        self.idle_timeout_ms = idle_timeout_ms
        self._clock = clock
        self._lock = threading.Lock()
        # Idle consumers, oldest release first: (key, consumer, released at).
        self._idle: list[tuple[Hashable, C, float]] = []
        self.created = 0  # consumers the factory made
        self.reused = 0  # borrows served from the idle ones

    def borrow(self, key: Hashable, factory: Callable[[], C]) -> C:
        """The most recently returned idle consumer of ``key``, else a new one."""
        with self._lock:
            expired = self._expired_locked()
            found: Optional[C] = None
            for i in range(len(self._idle) - 1, -1, -1):
                if self._idle[i][0] == key:
                    found = self._idle.pop(i)[1]
                    self.reused += 1
                    break
        _close_all(expired)
        if found is not None:
            return found
        consumer = factory()
        with self._lock:
            self.created += 1
        return consumer

    def release(self, key: Hashable, consumer: C) -> None:
        """Return a consumer whose task ended normally."""
        with self._lock:
            self._idle.append((key, consumer, self._clock()))
            expired = self._expired_locked()
            while len(self._idle) > self.capacity:
                expired.append(self._idle.pop(0)[1])
        _close_all(expired)

    def invalidate(self, key: Hashable, consumer: Optional[C] = None) -> None:
        """A task of ``key`` failed: close its consumer and every idle one of ``key``."""
        with self._lock:
            closing = [c for k, c, _ in self._idle if k == key]
            self._idle = [entry for entry in self._idle if entry[0] != key]
        if consumer is not None:
            closing.append(consumer)
        _close_all(closing)

    def idle_count(self, key: Optional[Hashable] = None) -> int:
        """Idle consumers (of ``key``, or all)."""
        with self._lock:
            return sum(1 for k, _, _ in self._idle if key is None or k == key)

    def close(self) -> None:
        """Close every idle consumer (the worker is exiting)."""
        with self._lock:
            closing = [c for _, c, _ in self._idle]
            self._idle = []
        _close_all(closing)

    def _expired_locked(self) -> list[C]:
        deadline = self._clock() - self.idle_timeout_ms / 1000.0
        idle = self._idle
        count = 0
        while count < len(idle) and idle[count][2] <= deadline:
            count += 1
        if not count:
            return []
        expired = [c for _, c, _ in idle[:count]]
        del idle[:count]
        return expired


def _close_all(consumers: list[C]) -> None:
    for consumer in consumers:
        try:
            consumer.close(autocommit=False, timeout_ms=_CLOSE_TIMEOUT_MS)
        except Exception:  # a consumer past use: closing it must not fail the task
            log.debug("closing a pooled consumer failed", exc_info=True)


#: The pool of this process's task consumers (``kproto.spark.reader.read_range``).
POOL: InternalKafkaConsumerPool[KafkaConsumer] = InternalKafkaConsumerPool()
atexit.register(POOL.close)
