"""The KIP-848 member state machine and reconciliation, sans-IO on a fake clock.

The membership manager runs with a real SubscriptionState; the application thread's part
(running listener callbacks and sending the completion back) is played by the harness.
"""

from __future__ import annotations

from concurrent.futures import Future
from itertools import product

import pytest

from kproto.consumer.background.abstract_membership_manager import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
)
from kproto.consumer.background.member_state import MemberState
from kproto.errors import IllegalStateError
from kproto.structs import TopicPartition as TP

from tests.support.heartbeats import TOPIC_IDS, heartbeat_response
from tests.unit.kip848.harness import Harness

S = MemberState
# The legal transitions, written out independently of the implementation's table.
LEGAL = {
    (S.UNSUBSCRIBED, S.JOINING), (S.UNSUBSCRIBED, S.PREPARE_LEAVING), (S.UNSUBSCRIBED, S.FATAL),
    (S.JOINING, S.RECONCILING), (S.JOINING, S.ACKNOWLEDGING), (S.JOINING, S.STABLE),
    (S.JOINING, S.FENCED), (S.JOINING, S.PREPARE_LEAVING), (S.JOINING, S.FATAL),
    (S.RECONCILING, S.RECONCILING), (S.RECONCILING, S.ACKNOWLEDGING), (S.RECONCILING, S.STABLE),
    (S.RECONCILING, S.FENCED), (S.RECONCILING, S.PREPARE_LEAVING), (S.RECONCILING, S.FATAL),
    (S.ACKNOWLEDGING, S.STABLE), (S.ACKNOWLEDGING, S.RECONCILING), (S.ACKNOWLEDGING, S.FENCED),
    (S.ACKNOWLEDGING, S.PREPARE_LEAVING), (S.ACKNOWLEDGING, S.FATAL),
    (S.STABLE, S.RECONCILING), (S.STABLE, S.FENCED), (S.STABLE, S.PREPARE_LEAVING), (S.STABLE, S.FATAL),
    (S.FENCED, S.JOINING), (S.FENCED, S.UNSUBSCRIBED), (S.FENCED, S.FATAL),
    (S.PREPARE_LEAVING, S.LEAVING), (S.PREPARE_LEAVING, S.UNSUBSCRIBED), (S.PREPARE_LEAVING, S.FATAL),
    (S.LEAVING, S.UNSUBSCRIBED), (S.LEAVING, S.STALE), (S.LEAVING, S.FATAL),
    (S.STALE, S.JOINING), (S.STALE, S.UNSUBSCRIBED), (S.STALE, S.FATAL),
}


@pytest.mark.parametrize("source,target", [(a, b) for a, b in product(S, S) if a is not b])
def test_transition_table(source: MemberState, target: MemberState) -> None:
    manager = Harness().manager
    manager._state = source  # put the machine in the source state directly
    if (source, target) in LEGAL:
        manager.transition_to(target)
        assert manager.state is target
    else:
        with pytest.raises(IllegalStateError, match="{} to {}".format(source.name, target.name)):
            manager.transition_to(target)
        assert manager.state is source


def test_fatal_is_terminal() -> None:
    manager = Harness().manager
    manager._state = S.FATAL
    for target in S:
        if target is not S.FATAL:
            with pytest.raises(IllegalStateError):
                manager.transition_to(target)
    manager.transition_to_joining()  # refused quietly, as in Java
    assert manager.state is S.FATAL


def test_join_then_empty_assignment_acknowledges_and_becomes_stable() -> None:
    h = Harness("alpha")
    h.join()
    assert h.manager.state is S.JOINING and h.manager.member_epoch == JOIN_GROUP_MEMBER_EPOCH
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=1, assignment={}))
    assert h.manager.state is S.RECONCILING and h.manager.member_epoch == 1
    h.manager.maybe_reconcile(can_commit=True)
    h.run_application_callbacks()
    # on_partitions_assigned runs even for an empty assignment (the classic behaviour).
    assert h.log == [("assigned", [])]
    assert h.manager.state is S.ACKNOWLEDGING
    h.manager.on_heartbeat_request_generated()
    assert h.manager.state is S.STABLE


def test_reconciliation_runs_in_the_seed_order() -> None:
    order: list = []
    commits: list = []
    h = Harness("alpha", "beta", listener_log=order)

    def commit_before_rebalance(deadline_ms: int) -> Future:
        # What the commit manager sees: revoked partitions already stop fetching.
        order.append(("commit", sorted(tp for tp in h.subscriptions.assigned_partitions()
                                       if h.subscriptions.is_pending_revocation(tp))))
        future: Future = Future()
        commits.append(future)
        return future

    h.stable_with({"alpha": [0, 1]})
    h.manager._auto_commit_before_rebalance = commit_before_rebalance
    order.clear()

    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=2,
                                                      assignment={"alpha": [1], "beta": [0]}))
    assert h.manager.state is S.RECONCILING
    h.manager.maybe_reconcile(can_commit=True)
    # The commit is in flight: no callback may run before it completes.
    assert order == [("commit", [TP("alpha", 0)])] and not commits[0].done()
    assert h.run_application_callbacks() == 0
    assert h.subscriptions.is_pending_revocation(TP("alpha", 0))
    commits[-1].set_result(None)
    h.run_application_callbacks()  # on_partitions_revoked
    # The new assignment is taken only after the revocation completed.
    assert h.owned() == [TP("alpha", 1), TP("beta", 0)]
    h.run_application_callbacks()  # on_partitions_assigned
    assert order == [("commit", [TP("alpha", 0)]), ("revoked", [TP("alpha", 0)]),
                     ("assigned", [TP("beta", 0)])]
    assert h.manager.state is S.ACKNOWLEDGING
    h.manager.on_heartbeat_request_generated()
    assert h.manager.state is S.STABLE


def test_added_partitions_are_unfetchable_until_on_partitions_assigned_returns() -> None:
    h = Harness("alpha")
    h.join()
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, assignment={"alpha": [0]}))
    h.manager.maybe_reconcile(can_commit=True)
    tp = TP("alpha", 0)
    h.subscriptions.seek(tp, 5)  # even with a position, it must wait for the callback
    assert not h.subscriptions.is_fetchable(tp)
    h.run_application_callbacks()
    assert h.subscriptions.is_fetchable(tp)


def test_revocation_waits_for_the_application_poll() -> None:
    h = Harness("alpha")
    h.stable_with({"alpha": [0, 1]})
    h.log.clear()
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=2, assignment={"alpha": [1]}))
    h.manager.poll(h.clock())  # the background loop may not revoke: records may be in flight
    assert h.run_application_callbacks() == 0 and h.owned() == [TP("alpha", 0), TP("alpha", 1)]
    assert not h.subscriptions.is_pending_revocation(TP("alpha", 0))
    h.manager.maybe_reconcile(can_commit=True)  # the AsyncPollEvent's reconciliation check
    while h.run_application_callbacks():
        pass
    assert h.log == [("revoked", [TP("alpha", 0)]), ("assigned", [])]
    assert h.owned() == [TP("alpha", 1)]


def test_assignment_of_an_unknown_topic_id_waits_for_metadata() -> None:
    h = Harness("alpha")
    h.stable_with({"alpha": [0]})
    h.log.clear()
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=2,
                                                      assignment={"alpha": [0], "gamma": [0, 1]}))
    h.manager.maybe_reconcile(can_commit=True)
    assert h.metadata.update_requests == 1
    # The resolvable part equals what is owned: acknowledged while gamma waits.
    assert h.manager.state is S.ACKNOWLEDGING and h.run_application_callbacks() == 0
    h.manager.on_heartbeat_request_generated()
    assert h.manager.state is S.RECONCILING  # the target still has unresolved partitions
    h.manager.poll(h.clock())
    assert h.owned() == [TP("alpha", 0)] and h.metadata.update_requests == 1  # at most once per backoff
    h.clock.advance(100)
    h.manager.poll(h.clock())
    assert h.owned() == [TP("alpha", 0)] and h.metadata.update_requests == 2
    h.metadata.learn("gamma")
    h.manager.poll(h.clock())  # adding partitions may run from the background loop
    h.run_application_callbacks()
    assert h.log == [("assigned", [TP("gamma", 0), TP("gamma", 1)])]
    assert h.owned() == [TP("alpha", 0), TP("gamma", 0), TP("gamma", 1)]
    assert h.manager.state is S.ACKNOWLEDGING


@pytest.mark.parametrize("reason", ["UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH"])
def test_fenced_member_loses_partitions_and_rejoins_fresh(reason: str) -> None:
    h = Harness("alpha")
    h.stable_with({"alpha": [0, 1]}, epoch=7)
    member_id = h.manager.member_id
    h.log.clear()
    h.manager.transition_to_fenced()
    assert h.manager.state is S.FENCED and h.manager.member_epoch == JOIN_GROUP_MEMBER_EPOCH
    assert h.owned() == [TP("alpha", 0), TP("alpha", 1)]  # released only once the callback ran
    h.run_application_callbacks()
    assert h.log == [("lost", [TP("alpha", 0), TP("alpha", 1)])]
    assert h.owned() == []
    assert h.manager.state is S.JOINING and h.manager.member_epoch == 0
    assert h.manager.member_id == member_id  # KIP-1082: the id lives as long as the member
    assert h.manager.current_assignment.is_none()


def test_fence_during_reconciliation_aborts_it() -> None:
    h = Harness("alpha")
    h.join()
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, assignment={"alpha": [0]}))
    h.manager.maybe_reconcile(can_commit=True)  # on_partitions_assigned is now pending
    h.manager.transition_to_fenced()
    while h.run_application_callbacks():
        pass
    assert h.manager.state is S.JOINING
    assert h.owned() == []
    assert not h.manager.is_reconciliation_in_progress()


def test_callback_failure_leaves_the_member_reconciling_without_an_ack() -> None:
    # As Java: a failed reconciliation is not acknowledged; the member stays RECONCILING
    # (the next poll retries; the broker fences it if it never completes).
    h = Harness("alpha", fail="revoked")
    h.stable_with({"alpha": [0, 1]})
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=2, assignment={"alpha": [1]}))
    h.manager.maybe_reconcile(can_commit=True)
    while h.run_application_callbacks():
        pass
    assert h.owned() == [TP("alpha", 0), TP("alpha", 1)] and h.manager.state is S.RECONCILING


@pytest.mark.parametrize("instance_id,epoch", [(None, LEAVE_GROUP_MEMBER_EPOCH),
                                               ("static-1", LEAVE_GROUP_STATIC_MEMBER_EPOCH)])
def test_leave_group_revokes_then_sends_leave_epoch(instance_id, epoch) -> None:
    h = Harness("alpha", instance_id=instance_id)
    h.stable_with({"alpha": [0]})
    h.log.clear()
    done = h.manager.leave_group()
    assert h.manager.state is S.PREPARE_LEAVING and not done.done()
    h.run_application_callbacks()
    assert h.log == [("revoked", [TP("alpha", 0)])]
    assert h.manager.state is S.LEAVING and h.manager.member_epoch == epoch
    assert h.manager.should_heartbeat_now()
    h.manager.on_heartbeat_request_generated()
    assert h.manager.state is S.UNSUBSCRIBED and done.done()
    assert h.subscriptions.subscription() == set()


def test_expired_poll_timer_leaves_goes_stale_and_rejoins_on_poll() -> None:
    h = Harness("alpha")
    h.stable_with({"alpha": [0]}, epoch=3)
    h.log.clear()
    h.manager.transition_to_sending_leave_group(due_to_expired_poll_timer=True)
    assert h.manager.state is S.LEAVING and h.manager.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
    h.manager.on_heartbeat_request_generated()  # the leave heartbeat went out
    assert h.manager.state is S.STALE and h.manager.should_skip_heartbeat()
    h.run_application_callbacks()
    assert h.log == [("lost", [TP("alpha", 0)])] and h.owned() == []
    assert h.manager.state is S.STALE
    h.manager.maybe_rejoin_stale_member()  # the next application poll()
    assert h.manager.state is S.JOINING and h.manager.member_epoch == 0


def test_member_listeners_see_epochs_and_assignments() -> None:
    seen: list = []

    class Listener:
        def on_member_epoch_updated(self, epoch, member_id):
            seen.append(("epoch", epoch))

        def on_group_assignment_updated(self, partitions):
            seen.append(("assignment", sorted(partitions)))

    h = Harness("alpha")
    h.manager.register_state_listener(Listener())
    h.stable_with({"alpha": [0]}, epoch=4)
    h.manager.transition_to_fenced()
    h.run_application_callbacks()
    assert seen == [("epoch", 4), ("assignment", [TP("alpha", 0)]), ("epoch", None), ("assignment", [])]


def test_fatal_releases_partitions_and_stops_heartbeats() -> None:
    h = Harness("alpha")
    h.stable_with({"alpha": [0]})
    h.log.clear()
    h.manager.transition_to_fatal()
    h.run_application_callbacks()
    assert h.log == [("lost", [TP("alpha", 0)])]
    assert h.manager.state is S.FATAL and h.manager.should_skip_heartbeat()


def test_response_ignored_while_leaving_and_new_assignment_ignored_while_preparing() -> None:
    h = Harness("alpha")
    h.stable_with({"alpha": [0]})
    h.manager.leave_group()
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=9, assignment={"alpha": [1]}))
    assert h.manager.member_epoch == 9  # the epoch is still tracked while preparing
    # ... but not the new target assignment.
    assert h.manager.current_target_assignment.partitions == {TOPIC_IDS["alpha"]: frozenset({0})}
    assert h.manager.state is S.PREPARE_LEAVING
