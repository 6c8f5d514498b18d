"""The one rebalance-listener invoker both engines use (Java's ConsumerRebalanceListenerInvoker),
and how each engine surfaces what the listener raised: Java's rules, on a real
SubscriptionState, ConsumerCoordinator and KIP-848 callback events (no broker needed)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from kproto import errors
from kproto.consumer.classic.consumer_protocol import Assignment, encode_assignment
from kproto.consumer.classic.group_membership import Generation
from kproto.consumer.kip848.async_kafka_consumer import invoke_rebalance_callbacks
from kproto.consumer.kip848.events import (ConsumerRebalanceListenerCallbackNeededEvent,
                                           ConsumerRebalanceListenerMethodName)
from kproto.consumer.rebalance_listener_invoker import ConsumerRebalanceListenerInvoker, maybe_wrap_as_kafka_error
from kproto.consumer.subscription_state import SubscriptionState
from kproto.structs import TopicPartition as TP

from tests.support.coordinator_fixture import make  # noqa: F401 - the ConsumerCoordinator fixture


class Listener:
    def __init__(self, raises=None, on=("assigned", "revoked", "lost")):
        self.raises = raises
        self.on = on
        self.calls = []

    def _call(self, name, partitions):
        self.calls.append((name, set(partitions)))
        if self.raises is not None and name in self.on:
            raise self.raises

    def on_partitions_assigned(self, partitions):
        self._call("assigned", partitions)

    def on_partitions_revoked(self, partitions):
        self._call("revoked", partitions)


def invoker_for(listener, recorded=None):
    subs = SubscriptionState()
    subs.subscribe(["t"], listener)
    record = None if recorded is None else (lambda method, ms: recorded.append((method, ms)))
    return ConsumerRebalanceListenerInvoker(subs, lambda: 5, record)


def test_a_listener_error_is_returned_not_raised_and_no_latency_is_recorded():
    recorded = []
    listener = Listener(raises=ValueError("app bug"))
    error = invoker_for(listener, recorded).invoke_partitions_revoked([TP("t", 1), TP("t", 0)])
    assert isinstance(error, ValueError) and listener.calls == [("revoked", {TP("t", 0), TP("t", 1)})]
    assert recorded == []  # Java records the latency of a callback that returned only


def test_the_latency_of_a_callback_that_returned_is_recorded():
    recorded = []
    listener = Listener(raises=ValueError("app bug"), on=("revoked",))
    assert invoker_for(listener, recorded).invoke_partitions_assigned([TP("t", 0)]) is None
    assert recorded == [("on_partitions_assigned", 0)]


def test_a_wakeup_raised_by_the_listener_propagates():
    recorded = []
    with pytest.raises(errors.WakeupException):
        invoker_for(Listener(raises=errors.WakeupException()), recorded).invoke_partitions_assigned([TP("t", 0)])
    assert recorded == []


def test_lost_defaults_to_revoked_and_no_listener_is_no_call():
    listener = Listener()  # duck-typed: no on_partitions_lost
    assert invoker_for(listener).invoke_partitions_lost([TP("t", 0)]) is None
    assert listener.calls == [("revoked", {TP("t", 0)})]
    assert ConsumerRebalanceListenerInvoker(SubscriptionState(), lambda: 0).invoke_partitions_assigned([]) is None


def test_a_kafka_error_is_raised_as_it_is_anything_else_inside_one():
    own = errors.CommitFailedError("from the listener")
    assert maybe_wrap_as_kafka_error(own) is own
    cause = ValueError("app bug")
    wrapped = maybe_wrap_as_kafka_error(cause)
    assert type(wrapped) is errors.KafkaError and wrapped.__cause__ is cause
    assert "User rebalance callback throws an error" in str(wrapped) and "app bug" in str(wrapped)


def test_classic_raises_a_kafka_error_from_the_listener_unwrapped_after_the_assignment(make):  # noqa: F811
    coordinator, subs, listener = make()
    own = errors.CommitFailedError("listener's own")

    def boom(partitions):
        raise own

    listener.on_partitions_assigned = boom
    with pytest.raises(errors.CommitFailedError) as raised:
        coordinator.on_join_complete(Generation(1, "m", "range"), encode_assignment(Assignment([TP("t", 1)])))
    assert raised.value is own and subs.assigned_partitions() == {TP("t", 1)}


def test_classic_raises_the_first_listener_error_of_a_rebalance(make):  # noqa: F811
    coordinator, subs, listener = make(strategy="cooperative-sticky")
    subs.assign_from_subscribed([TP("t", 0), TP("t", 1)])
    first, second = ValueError("on revoke"), ValueError("on assign")

    def revoked(partitions):
        raise first

    def assigned(partitions):
        raise second

    listener.on_partitions_revoked, listener.on_partitions_assigned = revoked, assigned
    with pytest.raises(errors.KafkaError) as raised:
        coordinator.on_join_complete(Generation(4, "m", "cooperative-sticky"),
                                     encode_assignment(Assignment([TP("t", 0), TP("t", 2)])))
    assert raised.value.__cause__ is first  # Java's firstException; both callbacks ran
    assert subs.assigned_partitions() == {TP("t", 0), TP("t", 2)}


def _needed(method):
    return ConsumerRebalanceListenerCallbackNeededEvent(method, [TP("t", 0)])


def test_kip848_completion_carries_the_wrapped_listener_error():
    cause = ValueError("app bug")
    event = _needed(ConsumerRebalanceListenerMethodName.ON_PARTITIONS_REVOKED)
    completed = invoke_rebalance_callbacks(invoker_for(Listener(raises=cause)), event)
    assert isinstance(completed.error, errors.KafkaError) and completed.error.__cause__ is cause
    completed.resume_waiter()  # the background thread fails the reconciliation with it
    assert event.future.exception() is completed.error


def test_kip848_a_wakeup_from_the_listener_fails_the_callback_and_is_raised():
    wakeup = errors.WakeupException()
    event = _needed(ConsumerRebalanceListenerMethodName.ON_PARTITIONS_ASSIGNED)
    completed = invoke_rebalance_callbacks(invoker_for(Listener(raises=wakeup)), event)
    assert completed.error is wakeup and completed.future is event.future
    lost = _needed(ConsumerRebalanceListenerMethodName.ON_PARTITIONS_LOST)
    ok = invoke_rebalance_callbacks(invoker_for(Listener()), lost)
    assert ok.error is None and isinstance(ok.future, Future)
