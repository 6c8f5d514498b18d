"""The public ``KafkaShareConsumer`` façade (KIP-932 share groups, Java's ``KafkaShareConsumer``).

A share group is a queue over topics: its members read the same partitions, each record
is acquired by one member at a time and acknowledged one by one. The façade validates the
configuration (``kproto.consumer.share.share_consumer_config``), confines the consumer to
one thread as ``KafkaConsumer`` does (``ConcurrentModificationError`` instead of
blocking; only ``wakeup()`` may come from another thread), checks arguments, and forwards
to the engine (``kproto.consumer.share.share_consumer_impl.ShareConsumerImpl``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, overload

from kproto.consumer.share.acknowledgements import AcknowledgeType, acknowledge_arguments
from kproto.consumer.thread_confinement import ThreadConfinement
from kproto.errors import IllegalArgumentError
from kproto.structs import ShareConsumerRecord, TopicIdPartition, TopicPartition

AcknowledgementCommitCallback = Callable[[dict[TopicIdPartition, set[int]], Optional[BaseException]], Any]


class KafkaShareConsumer:
    """Read records from Kafka as a member of a share group.

    ``KafkaShareConsumer(*topics, group_id=..., **configs)``: topics given here are
    subscribed at once. Settings are ``KafkaConsumer``'s client, security and fetch
    settings (``bootstrap_servers``, ``client_id``, ``max_poll_records``, ``fetch_*``,
    ``security_protocol``, ``sasl_*``, ``ssl_*``, deserializers, ...) plus
    ``share_acknowledgement_mode`` ("implicit": every record returned by a ``poll`` is
    accepted by the next ``poll``/``commit``/``close``; "explicit": the application calls
    ``acknowledge`` for each) and ``share_acquire_mode``.
    """

    def __init__(self, *topics: str, **configs: Any) -> None:
        from kproto.consumer.share.share_consumer_config import share_consumer_config
        from kproto.consumer.share.share_consumer_impl import ShareConsumerImpl

        self.config, self.share_config = share_consumer_config(configs)
        self._delegate = ShareConsumerImpl(self.config, self.share_config)
        # Every call but wakeup() reaches the engine through it.
        self._confinement = ThreadConfinement(self._delegate, "KafkaShareConsumer")
        if topics:
            try:
                self.subscribe(topics)
            except BaseException:
                self.close()
                raise

    # -- subscription -------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for ``topics`` (replacing any earlier subscription);
        an empty list unsubscribes."""
        if isinstance(topics, str):
            topics = [topics]
        topics = list(topics)
        for topic in topics:
            if not isinstance(topic, str) or not topic.strip():
                raise IllegalArgumentError("Topic collection to subscribe to cannot contain null or empty topic")
        with self._confinement as engine:
            engine.subscribe(topics)

    def unsubscribe(self) -> None:
        """Acknowledge (implicit mode) and close the share sessions, then leave the group."""
        with self._confinement as engine:
            engine.unsubscribe()

    def subscription(self) -> set[str]:
        with self._confinement as engine:
            return engine.subscription()

    # -- records --------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        """Records acquired for this member, at most ``max_poll_records``, by partition.

        Settles the previous batch first: implicit mode accepts what was not acknowledged;
        explicit mode raises ``IllegalStateError`` if a record was left unacknowledged."""
        if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 0:
            raise IllegalArgumentError("timeout_ms must be an int >= 0, not {!r}".format(timeout_ms))
        with self._confinement as engine:
            return engine.poll(timeout_ms)

    @overload
    def acknowledge(self, record: ShareConsumerRecord, type: Any = AcknowledgeType.ACCEPT) -> None: ...  # noqa: A002

    @overload
    def acknowledge(self, topic: str, partition: int, offset: int, type: Any) -> None: ...  # noqa: A002

    def acknowledge(self, *args: Any, **kwargs: Any) -> None:
        """Explicit mode, Java's two overloads; sent with the next ``poll``, ``commit`` or ``close``.

        ``acknowledge(record, type=ACCEPT)``: one delivered record (ACCEPT, RELEASE, REJECT
        or RENEW). ``acknowledge(topic, partition, offset, type)``: a record whose delivery
        failed, unless acknowledged so before the next ``poll``/``commit``: ``poll`` raised
        a ``RecordDeserializationError`` for it (released by default; e.g. REJECT for a
        poison record) or a ``CorruptRecordError`` listing it in ``offsets`` (a corrupt
        batch: rejected by default; e.g. RELEASE to have it delivered again); any other
        offset is an ``IllegalStateError``."""
        record, where, kind = acknowledge_arguments(args, kwargs)
        with self._confinement as engine:
            if where is None:
                engine.acknowledge(record, kind)
            else:
                engine.acknowledge_offset(*where, kind)

    def commit(self, timeout_ms: Optional[int] = None) -> dict[TopicIdPartition, Optional[BaseException]]:
        """Send the acknowledgements made so far and wait: ``{partition: None or the error}``."""
        with self._confinement as engine:
            return engine.commit(timeout_ms)

    def commit_async(self) -> None:
        """Send the acknowledgements made so far; the acknowledgement commit callback gets
        the outcome during a later call."""
        with self._confinement as engine:
            engine.commit_async()

    def set_acknowledgement_commit_callback(self, callback: Optional[AcknowledgementCommitCallback]) -> None:
        """``callback(offsets: {TopicIdPartition: {offset, ...}}, error or None)``, run on this
        thread from ``poll``, ``commit`` and ``close`` once the broker answered."""
        if callback is not None and not callable(callback):
            raise IllegalArgumentError("the acknowledgement commit callback must be callable")
        with self._confinement as engine:
            engine.acknowledgement_commit_callback = callback

    # -- the rest ---------------------------------------------------------------------------

    def acquisition_lock_timeout_ms(self) -> Optional[int]:
        """How long the broker locks the records the last ``poll`` returned for this member
        (ms, from the ShareFetch answer: the share group's ``share.record.lock.duration.ms``);
        None before any record was returned or when the broker did not say (Java's
        ``acquisitionLockTimeoutMs()``)."""
        with self._confinement as engine:
            return engine.acquisition_lock_timeout_ms()

    def metrics(self, raw: bool = False) -> Optional[dict[Any, Any]]:
        with self._confinement as engine:
            return engine.metrics(raw)

    def wakeup(self) -> None:
        """From any thread: the blocked (or next) ``poll``/``commit`` raises WakeupException."""
        self._delegate.wakeup()

    def close(self, timeout_ms: Optional[int] = None) -> None:
        """Acknowledge (implicit mode), release what was acquired and not acknowledged,
        leave the group; waits at most ``timeout_ms`` (30 s by default)."""
        if self._confinement.closed:
            return
        self._confinement.acquire()
        try:
            self._confinement.closed = True
            self._delegate.close(timeout_ms)
        finally:
            self._confinement.release()

    def __enter__(self) -> "KafkaShareConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
