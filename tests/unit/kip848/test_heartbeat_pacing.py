"""How often a KIP-848 member heartbeats when every answer changes nothing, in every member
state, sans-IO on a fake clock.

The network thread polls the heartbeat manager again as soon as an answer arrives. A state
that asks for a heartbeat "now" on every answer therefore sends one per round trip: a
member JOINING whose join the coordinator answered with an epoch and no assignment (as
librdkafka's mock does while another member still owns the partitions) sent about 1,200 a
second. Here the coordinator answers each heartbeat in the millisecond it was sent, and the
loop runs every millisecond: the member may send only the immediate heartbeat of its state
(a join, an acknowledgement, a leave) and then one per interval.
"""

from __future__ import annotations

import pytest

from kproto.consumer.background.member_state import MemberState as S
from kproto.errors import ErrorCode

from tests.unit.kip848.heartbeat_engine import BACKOFF_MS, Engine
from tests.support.heartbeats import heartbeat_response

INTERVAL_MS = 3000
DURATION_MS = 10_000


def _run(e: Engine, duration_ms: int = DURATION_MS) -> list[int]:
    """A busy network loop answering every heartbeat at once with an answer that changes
    nothing (no error, the member's own epoch, no assignment); returns the send times."""
    sent_at = []
    manager = e.h.manager
    end = e.clock() + duration_ms
    while e.clock() < end:
        now = e.clock()
        manager.poll(now)  # what the network thread polls too (add-only reconciliations)
        for unsent in e.heartbeat.poll(now).unsent_requests:
            sent_at.append(now)
            epoch = unsent.request.build(1)[0].member_epoch
            unsent.complete(heartbeat_response(manager.member_id, epoch=epoch, interval_ms=INTERVAL_MS), now)
        e.clock.advance(1)
    return sent_at


def _joining(e: Engine) -> None:
    e.find_coordinator()
    e.h.join()


def _stable(e: Engine) -> None:
    e.stable({"alpha": [0, 1]}, interval_ms=INTERVAL_MS)


def _reconciling(e: Engine) -> None:
    # A revocation waits for the application's poll(), which never comes here.
    _stable(e)
    e.clock.advance(INTERVAL_MS)
    e.answer(e.one_heartbeat(), assignment={"alpha": [1]}, interval_ms=INTERVAL_MS)


def _acknowledging(e: Engine) -> None:
    e.find_coordinator()
    e.h.join()
    e.answer(e.one_heartbeat(), assignment={"alpha": [0]}, interval_ms=INTERVAL_MS)
    e.h.manager.maybe_reconcile(can_commit=True)
    e.h.run_application_callbacks()


def _prepare_leaving(e: Engine) -> None:
    # on_partitions_revoked has not run yet (the application thread runs it).
    _stable(e)
    e.h.manager.leave_group()


def _leaving(e: Engine) -> None:
    _prepare_leaving(e)
    e.h.run_application_callbacks()


def _fenced(e: Engine) -> None:
    # on_partitions_lost has not run yet: no heartbeat until it has.
    _stable(e)
    e.clock.advance(INTERVAL_MS)
    e.answer(e.one_heartbeat(), error_code=ErrorCode.FENCED_MEMBER_EPOCH)


def _fatal(e: Engine) -> None:
    _stable(e)
    e.clock.advance(INTERVAL_MS)
    e.answer(e.one_heartbeat(), error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _stale(e: Engine) -> None:
    _stable(e)
    e.clock.advance(e.heartbeat.max_poll_interval_ms)
    e.one_heartbeat()  # the leave of an expired poll timer


def _unsubscribed(e: Engine) -> None:
    e.find_coordinator()


# state -> (how to get there, the immediate heartbeats that state sends)
STATES = {
    S.JOINING: (_joining, 1),
    S.RECONCILING: (_reconciling, 0),
    S.ACKNOWLEDGING: (_acknowledging, 1),
    S.STABLE: (_stable, 0),
    S.PREPARE_LEAVING: (_prepare_leaving, 0),
    S.LEAVING: (_leaving, 1),
    S.FENCED: (_fenced, 0),
    S.FATAL: (_fatal, 0),
    S.STALE: (_stale, 0),
    S.UNSUBSCRIBED: (_unsubscribed, 0),
}


def test_every_member_state_is_covered() -> None:
    assert set(STATES) == set(S)


@pytest.mark.parametrize("state", list(STATES), ids=lambda s: s.name)
def test_an_answer_that_changes_nothing_is_not_followed_by_a_heartbeat_before_the_interval(state: S) -> None:
    e = Engine("alpha")
    setup, immediate = STATES[state]
    setup(e)
    assert e.h.manager.state is state
    sent_at = _run(e)
    heartbeating = not e.h.manager.should_skip_heartbeat() or state is S.LEAVING
    paced = DURATION_MS // INTERVAL_MS if heartbeating else 0
    assert len(sent_at) <= immediate + paced, (state, sent_at)
    gaps = [b - a for a, b in zip(sent_at, sent_at[1:])]
    assert all(gap >= BACKOFF_MS for gap in gaps), gaps


def test_the_heartbeat_after_an_empty_join_answer_waits_for_the_interval_it_gave() -> None:
    """The issue's case: the join answered with epoch 0 and no assignment."""
    e = Engine("alpha")
    _joining(e)
    join = e.one_heartbeat()
    e.clock.advance(5)
    e.answer(join, epoch=0, interval_ms=INTERVAL_MS)
    assert e.h.manager.state is S.JOINING
    e.clock.advance(BACKOFF_MS)
    # The interval runs from the answer; the network thread and poll() may sleep till then.
    result = e.heartbeat.poll(e.clock())
    assert result.unsent_requests == [] and result.time_until_next_poll_ms == INTERVAL_MS - BACKOFF_MS
    assert e.heartbeat.maximum_time_to_wait(e.clock()) == INTERVAL_MS - BACKOFF_MS
    e.clock.advance(INTERVAL_MS - BACKOFF_MS - 1)
    assert e.heartbeats() == []
    e.clock.advance(1)
    again = e.one_heartbeat().request
    # Still joining: the full state again, with epoch 0.
    assert again.member_epoch == 0 and again.subscribed_topic_names == ["alpha", "beta", "gamma"]


def test_a_rejoin_after_fencing_is_immediate_again() -> None:
    e = Engine("alpha")
    _joining(e)
    e.answer(e.one_heartbeat(), epoch=0, interval_ms=INTERVAL_MS)
    e.clock.advance(INTERVAL_MS)
    e.answer(e.one_heartbeat(), error_code=ErrorCode.UNKNOWN_MEMBER_ID)
    e.h.run_application_callbacks()
    assert e.h.manager.state is S.JOINING
    e.clock.advance(BACKOFF_MS)
    assert e.one_heartbeat().request.member_epoch == 0  # the new join: no interval to wait
