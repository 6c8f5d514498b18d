"""Application/background events, the completable-event reaper and the event handlers."""

from __future__ import annotations

import queue

import pytest

from kproto.consumer.background.application_event_processor import ApplicationEventProcessor
from kproto.consumer.background.events import (
    ApplicationEvent,
    ApplicationEventHandler,
    BackgroundEventHandler,
    CompletableEventReaper,
    ErrorEvent,
    drain,
)
from kproto.consumer.background.request_manager import RequestState
from kproto.consumer.background.timer import Timer
from kproto.consumer.kip848 import events as ev
from kproto.consumer.kip848.application_event_processor import ConsumerApplicationEventProcessor
from kproto.consumer.kip848.events import AsyncPollEvent, FetchCommittedOffsetsEvent, SyncCommitEvent, UnsubscribeEvent
from kproto.errors import CommitFailedError, IllegalStateError, KafkaError, KafkaTimeoutError
from kproto.structs import TopicPartition as TP

from tests.support.clock import FakeClock
from tests.threads import TestThread


def test_reaper_fails_only_expired_incomplete_events() -> None:
    clock = FakeClock()
    reaper = CompletableEventReaper()
    early = SyncCommitEvent(clock() + 100)
    late = FetchCommittedOffsetsEvent([TP("a", 0)], clock() + 500)
    done = UnsubscribeEvent(clock() + 50)
    for event in (early, late, done):
        reaper.add(event)
    done.future.set_result(None)
    assert reaper.reap(clock.advance(99)) == 0 and reaper.size() == 2
    assert reaper.reap(clock.advance(1)) == 1
    with pytest.raises(KafkaTimeoutError):
        early.future.result(timeout=0)
    assert not late.future.done() and reaper.contains(late) and not reaper.contains(early)
    assert done.future.result(timeout=0) is None  # a completed event keeps its result


def test_reaper_on_close_fails_tracked_and_queued_events() -> None:
    reaper = CompletableEventReaper()
    tracked = SyncCommitEvent(10**12)
    queued = UnsubscribeEvent(10**12)
    reaper.add(tracked)
    assert reaper.reap_incomplete([queued, AsyncPollEvent(10**12, 0)]) == 2
    for event in (tracked, queued):
        with pytest.raises(KafkaError, match="closed"):
            event.future.result(timeout=0)


def test_add_and_get_returns_what_the_background_thread_completes() -> None:
    app_queue: "queue.Queue" = queue.Queue()
    wakeups = []
    handler = ApplicationEventHandler(app_queue, wakeup=lambda: wakeups.append(1))

    def background() -> None:
        event = app_queue.get()
        event.future.set_result({TP("a", 0): 42})

    thread = TestThread(target=background, name="fake-background", daemon=True)
    thread.start()
    event = FetchCommittedOffsetsEvent([TP("a", 0)], deadline_ms=10**15)
    assert handler.add_and_get(event) == {TP("a", 0): 42}
    assert wakeups == [1]
    thread.join()


def test_add_and_get_raises_the_background_error_and_times_out_at_the_deadline() -> None:
    clock = FakeClock()
    app_queue: "queue.Queue" = queue.Queue()
    handler = ApplicationEventHandler(app_queue, time_ms=clock)
    failed = SyncCommitEvent(clock() + 1000)
    failed.future.set_exception(CommitFailedError("rebalanced"))
    with pytest.raises(CommitFailedError):
        handler.add_and_get(failed)
    # Nobody processes this one and its deadline has passed: no hang.
    with pytest.raises(KafkaTimeoutError):
        handler.add_and_get(SyncCommitEvent(clock()))
    assert len(drain(app_queue)) == 2


def test_async_poll_event_stages() -> None:
    event = AsyncPollEvent(deadline_ms=100, poll_time_ms=0)
    assert not event.is_reconciliation_check_complete() and not event.is_validate_positions_complete()
    event.mark_reconciliation_check_complete()
    assert event.is_reconciliation_check_complete() and not event.is_complete()
    event.complete_exceptionally(CommitFailedError("x"))
    assert event.is_validate_positions_complete() and isinstance(event.error(), CommitFailedError)


def test_background_event_handler_delivers_in_order() -> None:
    q: "queue.Queue" = queue.Queue()
    handler = BackgroundEventHandler(q)
    first, second = ErrorEvent(KafkaError("a")), ErrorEvent(KafkaError("b"))
    handler.add(first)
    handler.add(second)
    assert drain(q) == [first, second] and drain(q) == []


def test_timer_on_a_fake_clock() -> None:
    timer = Timer(1000, 300)
    timer.update(1299)
    assert timer.remaining_ms() == 1 and not timer.is_expired()
    timer.update(1350)
    assert timer.is_expired() and timer.is_expired_by() == 50
    timer.update(10)  # a clock reading from the past does not move the timer back
    assert timer.is_expired()
    timer.reset(100)
    assert timer.remaining_ms() == 100 and timer.deadline_ms == 1450


def test_request_state_backoff_grows_and_resets() -> None:
    state = RequestState("test", retry_backoff_ms=100, retry_backoff_max_ms=1000, jitter=0)
    assert state.can_send_request(0)
    state.on_send_attempt(0)
    assert not state.can_send_request(5000) and state.request_in_flight()
    backoffs = []
    now = 0
    for _ in range(6):
        state.on_failed_attempt(now)
        backoffs.append(state.remaining_backoff_ms(now))
        assert not state.can_send_request(now + backoffs[-1] - 1)
        now += backoffs[-1]
        assert state.can_send_request(now)
        state.on_send_attempt(now)
    assert backoffs == [100, 200, 400, 800, 1000, 1000]
    state.on_successful_attempt(now)
    assert state.remaining_backoff_ms(now) == 0 and state.can_send_request(now)


def test_every_consumer_application_event_has_a_handler_in_the_table() -> None:
    # The table is explicit (Java's switch): a new event type without an entry fails here,
    # not when a user first calls the API that submits it.
    processor = ConsumerApplicationEventProcessor(None, None, fetch_request_manager=None,
                                                  offsets_request_manager=None)
    defined = {c for c in vars(ev).values() if isinstance(c, type) and issubclass(c, ApplicationEvent)
               and c.__module__ == ev.__name__}
    bases = {ev.CommitEvent, ev.SubscriptionChangeEvent}  # never submitted themselves
    assert processor.handled_types() == defined - bases


def test_the_processor_dispatches_by_exact_type_and_refuses_unknown_events() -> None:
    class Pause(ApplicationEvent):
        pass

    class Resume(Pause):
        pass

    seen = []
    processor = ApplicationEventProcessor({Pause: seen.append})
    processor.process(Pause())
    with pytest.raises(IllegalStateError, match="no handler for application event Resume"):
        processor.process(Resume())
    assert [type(e) for e in seen] == [Pause]
