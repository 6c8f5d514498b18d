"""``AIOKafkaShareConsumer``: ``KafkaShareConsumer``'s API with ``await`` where it blocks.

Owns the asyncio side of a share-group member (KIP-932): the share engine's application
half (``ShareConsumerImpl``: delivered records, acknowledgements, implicit/explicit
rules) built with a ``LoopNetworkThread`` (no thread), its managers iterated on the loop
by ``LoopDriver``, and the blocking calls (``poll``, ``commit``, ``close``) rewritten as
coroutines over the same steps. ``subscribe`` needs no network and is processed on the
spot; ``acknowledge`` and ``commit_async`` never block.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Iterable, Optional, overload

from kproto.aio.futures import await_event
from kproto.aio.loop_driver import LoopDriver, LoopNetworkThread
from kproto.consumer.share import events as ev
from kproto.consumer.share.acknowledgements import AcknowledgeType, acknowledge_arguments
from kproto.consumer.share.share_consumer_config import share_consumer_config
from kproto.consumer.share.share_consumer_impl import MAX_WAIT_STEP_MS, ShareConsumerImpl
from kproto.errors import ConsumerStoppedError, IllegalArgumentError, IllegalStateError, KafkaError
from kproto.structs import ShareConsumerRecord, TopicIdPartition, TopicPartition

log = logging.getLogger("kproto.aio")


class AIOKafkaShareConsumer:
    """A share-group member on the event loop; see the module docstring."""

    def __init__(self, *topics: str, **configs: Any) -> None:
        configs.pop("loop", None)
        self.config, self.share_config = share_consumer_config(configs)
        # Topics given to the constructor or to subscribe() before start(): start() joins.
        self._initial_topics = list(topics)
        self._core: Optional[ShareConsumerImpl] = None
        self._driver: Optional[LoopDriver] = None
        self._stopped = False

    async def start(self) -> None:
        if self._core is not None:
            return
        if self._stopped:
            raise ConsumerStoppedError("the consumer was stopped")
        core = ShareConsumerImpl(self.config, self.share_config, network_thread_class=LoopNetworkThread)
        resources = core.network_thread.resources
        assert resources is not None  # LoopNetworkThread.start() built them or raised
        self._driver = LoopDriver(asyncio.get_running_loop(), core.network_thread, resources)
        # An event's wakeup() writes the client's wakeup socket, which the loop watches.
        self._core = core
        self._driver.schedule()
        if self._initial_topics:
            self.subscribe(self._initial_topics)

    async def __aenter__(self) -> "AIOKafkaShareConsumer":
        await self.start()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.stop()

    def _running(self) -> ShareConsumerImpl:
        if self._core is None or self._stopped:
            raise ConsumerStoppedError("the consumer is stopped" if self._stopped else "call start() first")
        return self._core

    # --- subscription ---------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for ``topics`` (before ``start()``: ``start()`` joins)."""
        topics = [topics] if isinstance(topics, str) else list(topics)
        if any(not isinstance(t, str) or not t for t in topics):
            raise IllegalArgumentError("topic names must be non-empty strings: {!r}".format(topics))
        if not topics:
            raise IllegalArgumentError("subscribe() needs topics; use unsubscribe() to leave")
        if self._core is None and not self._stopped:
            self._initial_topics = topics
            return
        core = self._running()
        core._subscription = set(topics)
        event = ev.ShareSubscriptionChangeEvent(topics, core._deadline(None))
        resources = core.network_thread.resources
        assert resources is not None and self._driver is not None
        resources.application_event_processor.process(event)
        self._driver.schedule()
        event.future.result(timeout=0)

    def subscription(self) -> set[str]:
        return self._running().subscription()

    # --- records ----------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 0) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        """Settle the previous batch (implicit mode accepts it), then records acquired for
        this member, waiting up to ``timeout_ms``."""
        core = self._running()
        driver = self._driver
        assert driver is not None
        if not core._subscription:
            raise IllegalStateError("Consumer is not subscribed to any topics.")
        deadline = core._deadline(timeout_ms)
        if core._holds_records():
            if core.explicit:
                raise IllegalStateError(
                    "All records must be acknowledged before the next poll in explicit acknowledgement mode: "
                    "{} delivered record(s) were not".format(len(core._delivered)))
            core._accept_delivered()
        core._process_background_events()
        settles = core.fetch_buffer.next_round()
        core.application_event_handler.add(ev.ShareFetchEvent(core._take_acks(), settles=settles))
        asked_at = core._time_ms()
        while True:
            # No await between collecting and returning: what is collected is returned.
            records = core._collect()
            if records:
                if core.fetch_metrics is not None:
                    core.fetch_metrics.record_records(sum(len(batch) for batch in records.values()))
                return records
            remaining = deadline - core._time_ms()
            if remaining <= 0:
                return {}
            await driver.wait_for_step(min(remaining, MAX_WAIT_STEP_MS) / 1000.0)
            if core.fetch_buffer.is_empty() and core._time_ms() - asked_at >= MAX_WAIT_STEP_MS:
                core._process_background_events()
                core.application_event_handler.add(ev.ShareFetchEvent(core._take_acks()))
                asked_at = core._time_ms()

    @overload
    def acknowledge(self, record: ShareConsumerRecord, type: Any = AcknowledgeType.ACCEPT) -> None: ...  # noqa: A002

    @overload
    def acknowledge(self, topic: str, partition: int, offset: int, type: Any) -> None: ...  # noqa: A002

    def acknowledge(self, *args: Any, **kwargs: Any) -> None:
        """``KafkaShareConsumer.acknowledge``'s two forms: a delivered record, or (topic,
        partition, offset, type) for a record whose delivery failed."""
        record, where, kind = acknowledge_arguments(args, kwargs)
        if where is None:
            self._running().acknowledge(record, kind)
        else:
            self._running().acknowledge_offset(*where, kind)

    async def commit(self, timeout_ms: Optional[int] = None) -> dict[TopicIdPartition, Optional[BaseException]]:
        core = self._running()
        deadline = core._deadline(timeout_ms)
        if not core.explicit:
            core._accept_delivered()
        entries = core._take_acks()
        result: dict[TopicIdPartition, Optional[BaseException]] = {}
        if entries:
            event = ev.ShareAcknowledgeSyncEvent(entries, deadline)
            core.application_event_handler.add(event)
            result = await await_event(event.future, deadline, "commit")
        core._process_background_events()
        return result

    def commit_async(self) -> None:
        self._running().commit_async()

    def set_acknowledgement_commit_callback(self, callback: Any) -> None:
        self._running().acknowledgement_commit_callback = callback

    def metrics(self, raw: bool = False) -> Optional[dict[Any, Any]]:
        return self._running().metrics(raw)

    # --- stop -------------------------------------------------------------------------------

    async def stop(self, timeout_ms: Optional[int] = None) -> None:
        """Send the last acknowledgements with each session's closing request (the broker
        releases what this member acquired and did not acknowledge), leave, disconnect."""
        if self._stopped:
            return
        self._stopped = True
        core, driver = self._core, self._driver
        if core is None or driver is None:
            return
        core._closed = True
        deadline = core._deadline(30000 if timeout_ms is None else timeout_ms)
        try:
            if core._subscription is not None:
                if not core.explicit:
                    core._accept_delivered()
                core._delivered.clear()
                core.fetch_buffer.drain()
                close = ev.ShareAcknowledgeOnCloseEvent(core._take_acks(), deadline)
                core.application_event_handler.add(close)
                try:
                    await await_event(close.future, deadline, "closing the share sessions")
                except KafkaError as exc:
                    log.warning("Closing the share sessions: %s", exc)
                leave = ev.ShareLeaveGroupEvent(deadline)
                core.application_event_handler.add(leave)
                try:
                    await await_event(leave.future, deadline, "leaving the share group")
                except KafkaError as exc:
                    log.warning("Leaving the share group: %s", exc)
            core._run_callbacks_quietly()
            core.application_event_handler.add(ev.StopFindCoordinatorOnCloseEvent())
        finally:
            await driver.close(max(0, deadline - core._time_ms()))
            core.fetch_buffer.close()
            core.client.close()
            if core._metrics is not None:
                core._metrics.close()
