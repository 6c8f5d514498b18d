"""WakeupTrigger (Java's): what a wakeup() interrupts depends on what the caller is doing."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from kproto.consumer.background.wakeup_trigger import WakeupTrigger
from kproto.errors import IllegalStateError, WakeupException


def test_a_wakeup_with_nothing_blocked_is_raised_once_by_the_next_check() -> None:
    trigger = WakeupTrigger()
    trigger.maybe_trigger_wakeup()  # nothing pending: no-op
    trigger.wakeup()
    trigger.wakeup()  # a second one before the check is the same wakeup
    with pytest.raises(WakeupException):
        trigger.maybe_trigger_wakeup()
    trigger.maybe_trigger_wakeup()


def test_a_pending_wakeup_is_raised_before_the_call_blocks() -> None:
    trigger = WakeupTrigger()
    trigger.wakeup()
    future: Future = Future()
    with pytest.raises(WakeupException):
        trigger.set_active_task(future)
    assert not future.done() and trigger.active_task() is None
    trigger.set_active_task(future)  # consumed: the next call blocks
    assert trigger.active_task() is future


def test_a_wakeup_fails_the_future_the_call_blocks_on() -> None:
    trigger = WakeupTrigger()
    future: Future = Future()
    with trigger.blocking_on(future):
        trigger.wakeup()
        assert isinstance(future.exception(timeout=0), WakeupException)
    assert trigger.active_task() is None
    trigger.maybe_trigger_wakeup()  # delivered through the future, not left pending


def test_a_wakeup_after_the_future_completed_is_kept_for_the_next_call() -> None:
    trigger = WakeupTrigger()
    future: Future = Future()
    trigger.set_active_task(future)
    future.set_result("done")
    trigger.wakeup()
    assert future.result(timeout=0) == "done"
    trigger.clear_task()
    with pytest.raises(WakeupException):
        trigger.maybe_trigger_wakeup()


def test_a_second_active_task_is_a_bug() -> None:
    trigger = WakeupTrigger()
    trigger.set_active_task(Future())
    with pytest.raises(IllegalStateError):
        trigger.set_active_task(Future())


def test_disabled_wakeups_interrupt_nothing() -> None:
    trigger = WakeupTrigger()
    trigger.wakeup()
    trigger.disable_wakeups()  # a pending one is dropped too
    trigger.maybe_trigger_wakeup()
    future: Future = Future()
    with trigger.blocking_on(future):
        trigger.wakeup()
    assert not future.done()
    trigger.maybe_trigger_wakeup()
