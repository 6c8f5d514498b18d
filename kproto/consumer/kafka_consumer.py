"""The public ``KafkaConsumer`` façade: thread confinement and delegation to an engine.

As in Java's ``KafkaConsumer``, the façade holds one ``ConsumerDelegate`` built by
``create_consumer_delegate`` from ``group_protocol`` ("classic" -> the classic engine,
"consumer" -> the KIP-848 engine) and forwards every call to it. The method names,
arguments and return values are kafka-python's, so switching a program from
kafka-python to kproto is a change of import.

A consumer is used from one thread. Every public method except ``wakeup()`` and
``metrics()`` reaches the engine through a light ownership "lock"
(``kproto.consumer.thread_confinement``) that raises ``ConcurrentModificationError``
instead of blocking when another thread holds it, and hands the engine over typed as a
``ConsumerDelegate``, so each forwarded call is checked against the protocol.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Optional, Protocol

from kproto.consumer.config import DEFAULT_CONFIG as _DEFAULT_CONFIG, ConsumerConfig
from kproto.consumer.thread_confinement import ThreadConfinement
from kproto.errors import IllegalArgumentError
from kproto.structs import ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

if TYPE_CHECKING:
    from kproto.consumer.engine_config import EngineConfig

log = logging.getLogger("kproto.consumer")


class ConsumerDelegate(Protocol):
    """What an engine implements; the façade forwards each public method to it."""

    def subscribe(self, topics: Iterable[str] = (), pattern: Optional[str] = None,
                  listener: Any = None) -> None: ...
    def unsubscribe(self) -> None: ...
    def subscription(self) -> Optional[set[str]]: ...
    def assign(self, partitions: Iterable[TopicPartition]) -> None: ...
    def assignment(self) -> frozenset[TopicPartition]: ...
    def poll(self, timeout_ms: int, max_records: Optional[int],
             update_offsets: bool) -> dict[TopicPartition, list[ConsumerRecord]]: ...
    def seek(self, partition: TopicPartition, offset: int) -> None: ...
    def seek_to_beginning(self, partitions: tuple[TopicPartition, ...]) -> None: ...
    def seek_to_end(self, partitions: tuple[TopicPartition, ...]) -> None: ...
    def position(self, partition: TopicPartition, timeout_ms: Optional[int]) -> Optional[int]: ...
    def highwater(self, partition: TopicPartition) -> Optional[int]: ...
    def current_lag(self, partition: TopicPartition) -> Optional[int]: ...
    def committed(self, partition: TopicPartition, metadata: bool,
                  timeout_ms: Optional[int]) -> Any: ...
    def commit(self, offsets: Optional[Mapping[TopicPartition, OffsetAndMetadata]],
               timeout_ms: Optional[int]) -> None: ...
    def commit_async(self, offsets: Optional[Mapping[TopicPartition, OffsetAndMetadata]],
                     callback: Optional[Callable[..., Any]]) -> Any: ...
    def pause(self, partitions: tuple[TopicPartition, ...]) -> None: ...
    def resume(self, partitions: tuple[TopicPartition, ...]) -> None: ...
    def paused(self) -> frozenset[TopicPartition]: ...
    def beginning_offsets(self, partitions: Iterable[TopicPartition],
                          timeout_ms: Optional[int]) -> dict[TopicPartition, int]: ...
    def end_offsets(self, partitions: Iterable[TopicPartition],
                    timeout_ms: Optional[int]) -> dict[TopicPartition, int]: ...
    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                          timeout_ms: Optional[int]) -> dict[TopicPartition, Optional[OffsetAndTimestamp]]: ...
    def partitions_for_topic(self, topic: str) -> Optional[set[int]]: ...
    def topics(self) -> set[str]: ...
    def bootstrap(self, timeout_ms: Optional[int], refresh: bool) -> None: ...
    def bootstrap_connected(self) -> bool: ...
    def group_metadata(self) -> ConsumerGroupMetadata: ...
    def metrics(self, raw: bool) -> Optional[dict[Any, Any]]: ...
    def wakeup(self) -> None: ...
    def close(self, autocommit: bool, timeout_ms: Optional[int]) -> None: ...


def create_consumer_delegate(config: ConsumerConfig, settings: EngineConfig) -> ConsumerDelegate:
    """Java's ConsumerDelegateCreator: pick the engine from ``group_protocol``."""
    if settings.group_protocol == "consumer":
        from kproto.consumer.kip848.async_kafka_consumer import AsyncKafkaConsumer
        return AsyncKafkaConsumer(config, settings=settings)
    from kproto.consumer.classic.classic_kafka_consumer import ClassicKafkaConsumer
    return ClassicKafkaConsumer(config, settings=settings)


class KafkaConsumer:
    """Consume records from Kafka: a drop-in for kafka-python's ``KafkaConsumer``.

    ``KafkaConsumer(*topics, **configs)``: topics given here are subscribed at once.
    Configuration keys and defaults are kafka-python's (see ``kproto.consumer.config``),
    plus ``group_protocol`` ("classic" or "consumer"), as in the Java client.
    """

    #: Every setting with its default, as kafka-python's class attribute (code written for
    #: it filters its settings by these keys): the dict each new consumer's settings start
    #: from, so changing a default here changes it for the consumers made after, as there.
    DEFAULT_CONFIG = _DEFAULT_CONFIG

    def __init__(self, *topics: str, **configs: Any) -> None:
        from kproto.consumer.engine_config import EngineConfig

        self.config = ConsumerConfig(configs)
        self._settings = EngineConfig.from_config(self.config)
        self._delegate: ConsumerDelegate = create_consumer_delegate(self.config, self._settings)
        # Every call but wakeup() and metrics() reaches the engine through it.
        self._confinement = ThreadConfinement(self._delegate, "KafkaConsumer")
        self._iterator: Optional[Iterator[ConsumerRecord]] = None
        if topics:
            try:
                self.subscribe(topics)
            except BaseException:
                self.close()  # no sockets or threads left behind by a failed constructor
                raise

    # -- subscription and assignment ----------------------------------------------------

    def subscribe(self, topics: Iterable[str] = (), pattern: Optional[str] = None,
                  listener: Any = None) -> None:
        """Subscribe to a list of topics or a regex pattern (group management)."""
        if isinstance(topics, str):
            topics = [topics]
        with self._confinement as engine:
            engine.subscribe(tuple(topics), pattern, listener)
        self._iterator = None  # records buffered for iteration are stale now

    def unsubscribe(self) -> None:
        """Drop the subscription (or manual assignment); leaves the group if in one."""
        with self._confinement as engine:
            engine.unsubscribe()
        self._iterator = None  # records buffered for iteration are stale now

    def subscription(self) -> Optional[set[str]]:
        """The subscribed topic names, or None when not subscribed."""
        with self._confinement as engine:
            return engine.subscription()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manually assign partitions (no group management)."""
        with self._confinement as engine:
            engine.assign(list(partitions))
        self._iterator = None  # records buffered for iteration are stale now

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this consumer: an immutable snapshot, the
        same object until the assignment changes (cheap to call in a loop)."""
        with self._confinement as engine:
            return engine.assignment()

    # -- consuming ----------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: Optional[int] = None,
             update_offsets: bool = True) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Fetch records; returns ``{TopicPartition: [ConsumerRecord, ...]}``.

        ``update_offsets=False`` (kafka-python) returns records without advancing positions:
        the caller moves them with ``seek()``, else the same records come again. Corrupt
        fetched data raises ``CorruptRecordError`` (``topic``, ``partition``, ``offset``)
        once the records before it were returned, until the caller seeks past it.
        """
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)) or not timeout_ms >= 0:
            raise IllegalArgumentError("timeout_ms must be a non-negative number of milliseconds, "
                                       "not {!r}".format(timeout_ms))
        if max_records is not None and (isinstance(max_records, bool) or not isinstance(max_records, int)
                                        or max_records < 1):
            raise IllegalArgumentError("max_records must be a positive integer, not {!r}".format(max_records))
        # int ms for the engines; "forever" (inf) is capped at Java's largest timer.
        with self._confinement as engine:
            return engine.poll(int(min(timeout_ms, 2**31 - 1)), max_records, update_offsets)

    def __iter__(self) -> "KafkaConsumer":
        return self

    def __next__(self) -> ConsumerRecord:
        """The next record; StopIteration after ``consumer_timeout_ms`` without one (kafka-python)."""
        if self._confinement.closed:
            raise StopIteration("KafkaConsumer closed")
        timeout_ms = self._settings.consumer_timeout_ms
        deadline = None if timeout_ms == float("inf") else time.monotonic() + timeout_ms / 1000
        while True:
            if self._iterator is not None:
                try:
                    return next(self._iterator)
                except StopIteration:
                    self._iterator = None
            remaining = 1000 if deadline is None else int(max(0.0, deadline - time.monotonic()) * 1000)
            batch = self.poll(timeout_ms=min(remaining, 1000))
            if batch:
                self._iterator = iter([r for records in batch.values() for r in records])
                continue
            if deadline is not None and time.monotonic() >= deadline:
                raise StopIteration

    # -- positions ----------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Set the position of an assigned partition."""
        with self._confinement as engine:
            engine.seek(partition, offset)
        self._iterator = None  # records buffered for iteration are stale now

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Reset positions to the earliest offset (all assigned partitions if none given)."""
        with self._confinement as engine:
            engine.seek_to_beginning(partitions)
        self._iterator = None  # records buffered for iteration are stale now

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Reset positions to the latest offset (all assigned partitions if none given)."""
        with self._confinement as engine:
            engine.seek_to_end(partitions)
        self._iterator = None  # records buffered for iteration are stale now

    def position(self, partition: TopicPartition, timeout_ms: Optional[int] = None) -> Optional[int]:
        """The offset of the next record that will be fetched for ``partition``."""
        with self._confinement as engine:
            return engine.position(partition, timeout_ms)

    def highwater(self, partition: TopicPartition) -> Optional[int]:
        """The last known high watermark of ``partition`` (None before a fetch returned)."""
        with self._confinement as engine:
            return engine.highwater(partition)

    def current_lag(self, partition: TopicPartition) -> Optional[int]:
        """Java's ``currentLag``: records between the position and the end the last fetch
        reported (the high watermark; the last stable offset under ``read_committed``).

        None until a fetch of the partition has answered; never does network I/O.
        Raises ``IllegalStateError`` if the partition is not assigned.
        """
        with self._confinement as engine:
            return engine.current_lag(partition)

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching from these partitions until resumed."""
        with self._confinement as engine:
            engine.pause(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        """Resume fetching from paused partitions."""
        with self._confinement as engine:
            engine.resume(partitions)

    def paused(self) -> frozenset[TopicPartition]:
        """The partitions paused with ``pause()``: an immutable snapshot."""
        with self._confinement as engine:
            return engine.paused()

    # -- offsets ------------------------------------------------------------------------

    def committed(self, partition: TopicPartition, metadata: bool = False,
                  timeout_ms: Optional[int] = None) -> Any:
        """The last committed offset of ``partition`` (OffsetAndMetadata if ``metadata``)."""
        with self._confinement as engine:
            return engine.committed(partition, metadata, timeout_ms)

    def commit(self, offsets: Optional[Mapping[TopicPartition, OffsetAndMetadata]] = None,
               timeout_ms: Optional[int] = None) -> None:
        """Commit offsets (the consumed positions by default), blocking until done."""
        with self._confinement as engine:
            engine.commit(offsets, timeout_ms)

    def commit_async(self, offsets: Optional[Mapping[TopicPartition, OffsetAndMetadata]] = None,
                     callback: Optional[Callable[..., Any]] = None) -> Any:
        """Commit offsets without blocking; ``callback(offsets, response_or_error)``."""
        with self._confinement as engine:
            return engine.commit_async(offsets, callback)

    def beginning_offsets(self, partitions: Iterable[TopicPartition],
                          timeout_ms: Optional[int] = None) -> dict[TopicPartition, int]:
        """The earliest offsets of the given partitions."""
        with self._confinement as engine:
            return engine.beginning_offsets(list(partitions), timeout_ms)

    def end_offsets(self, partitions: Iterable[TopicPartition],
                    timeout_ms: Optional[int] = None) -> dict[TopicPartition, int]:
        """The end offsets (offset of the next record to be written) of the partitions."""
        with self._confinement as engine:
            return engine.end_offsets(list(partitions), timeout_ms)

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                          timeout_ms: Optional[int] = None) -> dict[TopicPartition, Optional[OffsetAndTimestamp]]:
        """The earliest offsets whose timestamps are >= the given ones."""
        with self._confinement as engine:
            return engine.offsets_for_times(dict(timestamps), timeout_ms)

    # -- metadata -----------------------------------------------------------------------

    def partitions_for_topic(self, topic: str) -> Optional[set[int]]:
        """The partition numbers of ``topic``, or None if it is unknown."""
        with self._confinement as engine:
            return engine.partitions_for_topic(topic)

    def topics(self) -> set[str]:
        """The names of the topics the cluster has."""
        with self._confinement as engine:
            return engine.topics()

    def bootstrap(self, timeout_ms: Optional[int] = None, refresh: bool = False) -> None:
        """Block until cluster metadata has arrived (kafka-python's ``bootstrap``).

        Metadata otherwise comes lazily with the first call that needs it. With ``refresh``
        a new update is awaited even if one arrived before. ``timeout_ms=None`` waits
        ``default_api_timeout_ms`` (kafka-python waits forever); raises
        ``KafkaTimeoutError`` when no broker answered in time.
        """
        with self._confinement as engine:
            engine.bootstrap(timeout_ms, refresh)

    def bootstrap_connected(self) -> bool:
        """Whether a connection to a bootstrap server is established."""
        with self._confinement as engine:
            return engine.bootstrap_connected()

    def group_metadata(self) -> ConsumerGroupMetadata:
        """A snapshot of this consumer's group membership: group, generation (a KIP-848
        member's epoch), member id, instance id and kafka-python's ``state``."""
        with self._confinement as engine:
            return engine.group_metadata()

    def metrics(self, raw: bool = False) -> Optional[dict[Any, Any]]:
        """Consumer metrics, Java's names (https://kafka.apache.org/documentation/#consumer_monitoring).

        kafka-python's shape: ``{group: {name: value}}`` (a name shared by client-wide and
        per-topic/per-partition metrics gives the client-wide value), or with ``raw=True``
        the registry's ``{MetricName: KafkaMetric}`` (tags included). None when
        ``metrics_enabled=False``; empty after ``close()`` (the registry is cleared).
        Callable from any thread, as Java's (a monitoring thread reads them while another
        polls): it bypasses the thread confinement; the registry has its own locks.
        """
        return self._delegate.metrics(raw)

    # -- lifecycle ----------------------------------------------------------------------

    def wakeup(self) -> None:
        """Interrupt a blocking call from another thread: it raises WakeupException."""
        self._delegate.wakeup()

    def close(self, autocommit: bool = True, timeout_ms: Optional[int] = None) -> None:
        """Commit (if auto-commit is on and ``autocommit``), leave the group, close sockets."""
        if self._confinement.closed:
            return
        self._confinement.acquire()
        try:
            self._delegate.close(autocommit, timeout_ms)
        finally:
            self._confinement.closed = True
            self._confinement.release()

    def __enter__(self) -> "KafkaConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
