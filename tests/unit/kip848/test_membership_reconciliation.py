"""KIP-848 Java-parity review: member state machine divergences, sans-IO on a fake clock.

Each test failed against the code before its fix (see the commit that added it); the Java
behaviour it pins is named in its docstring.
"""

from __future__ import annotations

from concurrent.futures import Future

from kproto.consumer.background.abstract_membership_manager import LEAVE_GROUP_MEMBER_EPOCH
from kproto.consumer.background.member_state import MemberState as S
from kproto.structs import TopicPartition as TP

from tests.support.heartbeats import heartbeat_response
from tests.unit.kip848.harness import Harness


class _Commits:
    """auto_commit_before_rebalance: records each call, completes at once."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, deadline_ms: int) -> Future:
        self.calls += 1
        future: Future = Future()
        future.set_result(None)
        return future


def test_with_auto_commit_the_background_loop_does_not_reconcile_even_an_addition() -> None:
    """Java maybeReconcile: ``if (autoCommitEnabled && !canCommit) return`` -- the commit
    before reconciling would otherwise commit records the application is still processing."""
    commits = _Commits()
    h = Harness("alpha", commit=commits)
    h.stable_with({"alpha": [0]})
    calls_after_join = commits.calls
    h.log.clear()
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=2, assignment={"alpha": [0, 1]}))
    assert h.manager.state is S.RECONCILING
    h.manager.poll(h.clock())  # the background loop: maybe_reconcile(can_commit=False)
    assert commits.calls == calls_after_join and h.run_application_callbacks() == 0
    assert h.owned() == [TP("alpha", 0)] and h.manager.state is S.RECONCILING
    h.manager.maybe_reconcile(can_commit=True)  # the application's poll()
    assert commits.calls == calls_after_join + 1
    while h.run_application_callbacks():
        pass
    assert h.owned() == [TP("alpha", 0), TP("alpha", 1)] and h.manager.state is S.ACKNOWLEDGING


def test_without_auto_commit_the_background_loop_still_takes_an_addition() -> None:
    h = Harness("alpha")
    h.stable_with({"alpha": [0]})
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=2, assignment={"alpha": [0, 1]}))
    h.manager.poll(h.clock())
    while h.run_application_callbacks():
        pass
    assert h.owned() == [TP("alpha", 0), TP("alpha", 1)] and h.manager.state is S.ACKNOWLEDGING


def test_fatal_error_while_preparing_to_leave_runs_no_lost_callback() -> None:
    """Java transitionToFatal: a member that was (PREPARE_)LEAVING completes the leave and
    stays FATAL; its partitions are released by the leave, not lost a second time."""
    h = Harness("alpha")
    h.stable_with({"alpha": [0]})
    h.log.clear()
    done = h.manager.leave_group()  # on_partitions_revoked is now pending
    h.manager.transition_to_fatal()
    assert done.done() and h.manager.state is S.FATAL
    while h.run_application_callbacks():
        pass
    assert h.log == [("revoked", [TP("alpha", 0)])]
    assert h.manager.state is S.FATAL and h.owned() == []


def test_fenced_while_preparing_to_leave_takes_the_leave_epoch() -> None:
    """Java transitionToFenced from PREPARE_LEAVING goes through LEAVING (leave epoch, epoch
    listeners told the member has no epoch) to UNSUBSCRIBED, sending no leave heartbeat."""
    epochs: list = []

    class Listener:
        def on_member_epoch_updated(self, epoch, member_id):
            epochs.append(epoch)

        def on_group_assignment_updated(self, partitions):
            pass

    h = Harness("alpha")
    h.manager.register_state_listener(Listener())
    h.stable_with({"alpha": [0]}, epoch=3)
    done = h.manager.leave_group()
    h.manager.transition_to_fenced()
    assert h.manager.state is S.UNSUBSCRIBED and done.done()
    assert h.manager.member_epoch == LEAVE_GROUP_MEMBER_EPOCH and epochs[-1] is None
    while h.run_application_callbacks():
        pass
    assert h.manager.state is S.UNSUBSCRIBED and h.manager.should_skip_heartbeat()


def test_a_failed_revocation_callback_fails_the_reconciliation_and_poll_retries_it() -> None:
    """Java revokePartitions completes exceptionally when onPartitionsRevoked throws: the
    partitions are kept (pending revocation), nothing is assigned or acknowledged, the member
    stays RECONCILING and the next poll() reconciles again."""
    h = Harness("alpha")
    h.stable_with({"alpha": [0, 1]})
    h.log.clear()
    h.listener.fail = "revoked"
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=2, assignment={"alpha": [1]}))
    h.manager.maybe_reconcile(can_commit=True)
    while h.run_application_callbacks():
        pass
    assert h.log == [("revoked", [TP("alpha", 0)])]
    assert h.owned() == [TP("alpha", 0), TP("alpha", 1)] and h.manager.state is S.RECONCILING
    assert not h.manager.is_reconciliation_in_progress()
    h.listener.fail = None
    h.manager.maybe_reconcile(can_commit=True)  # the next poll()
    while h.run_application_callbacks():
        pass
    assert h.log[1:] == [("revoked", [TP("alpha", 0)]), ("assigned", [])]
    assert h.owned() == [TP("alpha", 1)] and h.manager.state is S.ACKNOWLEDGING


def test_a_failed_assignment_callback_is_not_acknowledged() -> None:
    """Java: a failed onPartitionsAssigned fails the reconciliation; no ACKNOWLEDGING."""
    h = Harness("alpha", fail="assigned")
    h.join()
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=1, assignment={"alpha": [0]}))
    h.manager.maybe_reconcile(can_commit=True)
    while h.run_application_callbacks():
        pass
    assert h.manager.state is S.RECONCILING and not h.manager.is_reconciliation_in_progress()
    assert h.manager.current_assignment.is_none()


def test_a_target_changed_during_a_reconciliation_is_reconciled_after_the_ack() -> None:
    """Java (same in kproto): the reconciliation in flight finishes with the assignment it
    started from and is acknowledged; the ack heartbeat then finds the newer target
    unreconciled and the member reconciles again (RECONCILING, not STABLE)."""
    h = Harness("alpha", "beta")
    h.stable_with({"alpha": [0, 1]})
    h.log.clear()
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=2, assignment={"alpha": [1]}))
    h.manager.maybe_reconcile(can_commit=True)  # on_partitions_revoked is pending
    h.manager.on_heartbeat_success(heartbeat_response(h.manager.member_id, epoch=3,
                                                      assignment={"alpha": [1], "beta": [0]}))
    assert h.manager.is_reconciliation_in_progress()
    while h.run_application_callbacks():
        pass
    assert h.owned() == [TP("alpha", 1)] and h.manager.state is S.ACKNOWLEDGING
    h.manager.on_heartbeat_request_generated()  # the ack of [alpha-1]
    assert h.manager.state is S.RECONCILING
    h.manager.maybe_reconcile(can_commit=True)
    while h.run_application_callbacks():
        pass
    assert h.log == [("revoked", [TP("alpha", 0)]), ("assigned", []), ("assigned", [TP("beta", 0)])]
    assert h.owned() == [TP("alpha", 1), TP("beta", 0)] and h.manager.state is S.ACKNOWLEDGING
    h.manager.on_heartbeat_request_generated()
    assert h.manager.state is S.STABLE


def test_fenced_after_the_leave_was_generated_does_not_rejoin() -> None:
    """Java (same in kproto): fencing answered to a member that already left is ignored."""
    h = Harness("alpha")
    h.stable_with({"alpha": [0]})
    done = h.manager.leave_group()
    while h.run_application_callbacks():
        pass
    h.manager.on_heartbeat_request_generated()  # the leave heartbeat went out
    assert h.manager.state is S.UNSUBSCRIBED and done.done()
    h.manager.transition_to_fenced()
    assert h.manager.state is S.UNSUBSCRIBED and h.manager.should_skip_heartbeat()
