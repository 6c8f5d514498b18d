"""The background thread: its name, construction errors, and a loop that survives errors.

The thread runs for real with a real (unconnected) NetworkClient; the request managers
here are minimal ones whose only job is to be polled.
"""

from __future__ import annotations

import queue
import threading

import pytest

from kproto.consumer.background.consumer_network_thread import (
    BACKGROUND_THREAD_NAME,
    ConsumerNetworkThread,
    Resources,
)
from kproto.consumer.background.events import ApplicationEventHandler
from kproto.consumer.background.network_client_delegate import NetworkClientDelegate
from kproto.consumer.background.request_manager import PollResult
from kproto.consumer.kafka_consumer import KafkaConsumer
from kproto.consumer.kip848.events import SyncCommitEvent, UnsubscribeEvent
from kproto.errors import KafkaConfigurationError, KafkaError
from kproto.net.client import NetworkClient


class FlakyManager:
    """Raises on its first poll, then counts polls and signals the test."""

    def __init__(self) -> None:
        self.polls = 0
        self.polled_after_failure = threading.Event()

    def poll(self, now_ms: int) -> PollResult:
        self.polls += 1
        if self.polls == 1:
            raise RuntimeError("boom")
        self.polled_after_failure.set()
        return PollResult(10)

    def maximum_time_to_wait(self, now_ms: int) -> int:
        return 1234


class Processor:
    def __init__(self) -> None:
        self.events: list = []

    def process(self, event) -> None:
        self.events.append(event)
        if isinstance(event, UnsubscribeEvent):
            raise KafkaError("cannot unsubscribe here")
        event.future.set_result("done")


def _thread(manager, processor):
    client = NetworkClient(bootstrap_servers="127.0.0.1:1")
    app_queue: "queue.Queue" = queue.Queue()
    thread = ConsumerNetworkThread(
        app_queue, lambda: Resources(NetworkClientDelegate(client, 1000), [manager], processor, client=client))
    return thread, app_queue, client


def test_the_loop_survives_an_exception_and_processes_events() -> None:
    manager, processor = FlakyManager(), Processor()
    thread, app_queue, client = _thread(manager, processor)
    thread.start()
    try:
        thread.wait_for_initialization(timeout_s=30)
        assert thread.name == BACKGROUND_THREAD_NAME and thread.daemon
        assert manager.polled_after_failure.wait(30)
        handler = ApplicationEventHandler(app_queue, thread.wakeup)
        assert handler.add_and_get(SyncCommitEvent(10**15)) == "done"
        # An event whose processing raises fails its future with that error.
        with pytest.raises(KafkaError, match="cannot unsubscribe"):
            handler.add_and_get(UnsubscribeEvent(10**15))
        assert thread.is_alive()
        assert thread.cached_maximum_time_to_wait_ms == 1234
    finally:
        thread.close(timeout_ms=0)
        client.close()
    assert not thread.is_alive()


def test_events_still_pending_at_close_are_failed() -> None:
    class Holding(Processor):
        def __init__(self) -> None:
            super().__init__()
            self.seen = threading.Event()

        def process(self, event) -> None:
            self.events.append(event)  # never completed: the commit "is still in flight"
            self.seen.set()

    manager, processor = FlakyManager(), Holding()
    thread, app_queue, client = _thread(manager, processor)
    thread.start()
    thread.wait_for_initialization(timeout_s=30)
    pending = SyncCommitEvent(10**15)
    ApplicationEventHandler(app_queue, thread.wakeup).add(pending)
    assert processor.seen.wait(30)
    thread.close(timeout_ms=0)
    client.close()
    with pytest.raises(KafkaError, match="closed"):
        pending.future.result(timeout=0)


def test_an_initialization_error_reaches_the_constructor() -> None:
    def failing_initialize():
        raise KafkaConfigurationError("bad settings")

    thread = ConsumerNetworkThread(queue.Queue(), failing_initialize)
    thread.start()
    with pytest.raises(KafkaConfigurationError, match="bad settings"):
        thread.wait_for_initialization(timeout_s=30)
    thread.join(30)
    assert not thread.is_alive()


def test_consumer_construction_error_inside_the_thread_is_raised_by_the_constructor() -> None:
    # Compared with the threads before: a consumer another test failed to close keeps its
    # background thread (same name) alive, and that one is not this constructor's.
    before = {t for t in threading.enumerate() if t.name == BACKGROUND_THREAD_NAME}
    with pytest.raises(KafkaConfigurationError, match="TLS"):
        KafkaConsumer(bootstrap_servers="127.0.0.1:1", group_id="g", group_protocol="consumer",
                      security_protocol="SSL", ssl_cafile="/nonexistent/ca.pem")
    assert {t for t in threading.enumerate() if t.name == BACKGROUND_THREAD_NAME} <= before
