"""SubscriptionState: exclusivity, the fetch-state transition table, positions, resets."""

from __future__ import annotations

import re

import pytest

from kproto.consumer.subscription_state import (
    AutoOffsetResetStrategy, FetchPosition, FetchState, LeaderAndEpoch, SubscriptionState,
    SubscriptionType, TopicPartitionState,
)
from kproto.errors import IllegalArgumentError, IllegalStateError, NoOffsetForPartitionError
from kproto.structs import IsolationLevel, OffsetAndMetadata, TopicPartition
from tests.threads import TestThread

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
OTHER = TopicPartition("u", 0)

LEGAL = {
    FetchState.INITIALIZING: {FetchState.FETCHING, FetchState.AWAIT_RESET, FetchState.AWAIT_VALIDATION},
    FetchState.FETCHING: {FetchState.FETCHING, FetchState.AWAIT_RESET, FetchState.AWAIT_VALIDATION},
    FetchState.AWAIT_RESET: {FetchState.FETCHING, FetchState.AWAIT_RESET},
    FetchState.AWAIT_VALIDATION: {FetchState.FETCHING, FetchState.AWAIT_RESET, FetchState.AWAIT_VALIDATION},
}


def _state_in(fetch_state: FetchState) -> TopicPartitionState:
    state = TopicPartitionState()
    if fetch_state is FetchState.FETCHING:
        state.transition_state(FetchState.FETCHING, FetchPosition(5))
    elif fetch_state is FetchState.AWAIT_RESET:
        state.reset(AutoOffsetResetStrategy.EARLIEST)
    elif fetch_state is FetchState.AWAIT_VALIDATION:
        state.transition_state(FetchState.AWAIT_VALIDATION, FetchPosition(5, 1, LeaderAndEpoch(1, 2)))
    assert state.fetch_state is fetch_state
    return state


@pytest.mark.parametrize("source", list(FetchState))
@pytest.mark.parametrize("target", list(FetchState))
def test_transition_table(source, target):
    state = _state_in(source)
    position = FetchPosition(7, 1, LeaderAndEpoch(1, 2))
    if target in LEGAL[source]:
        state.transition_state(target, position)
        assert state.fetch_state is target
        # Position is kept exactly when the target state requires one.
        assert state.position == (position if target.requires_position else None)
    else:
        with pytest.raises(IllegalStateError, match="illegal fetch state transition"):
            state.transition_state(target, position)
        assert state.fetch_state is source


def test_position_required():
    with pytest.raises(IllegalStateError):
        TopicPartitionState().transition_state(FetchState.FETCHING, None)


@pytest.mark.parametrize("first, second", [
    (lambda s: s.subscribe(["t"]), lambda s: s.assign_from_user([TP0])),
    (lambda s: s.assign_from_user([TP0]), lambda s: s.subscribe(["t"])),
    (lambda s: s.subscribe(["t"]), lambda s: s.subscribe_pattern("t.*")),
    (lambda s: s.subscribe_pattern("t.*"), lambda s: s.assign_from_user([TP0])),
    (lambda s: s.subscribe_pattern("t.*", broker_evaluated=True), lambda s: s.subscribe_pattern("t.*")),
])
def test_subscription_types_exclusive(first, second):
    subs = SubscriptionState()
    first(subs)
    with pytest.raises(IllegalStateError, match="Subscription to topics, partitions and pattern are mutually exclusive"):
        second(subs)
    subs.unsubscribe()
    assert subs.subscription_type is SubscriptionType.NONE
    second(subs)  # allowed again after unsubscribe


def test_subscribe_and_assign_from_subscribed():
    subs = SubscriptionState()
    listener = object()
    assert subs.subscribe(["t", "u"], listener) is True
    assert subs.subscribe(["u", "t"], listener) is False
    assert subs.subscription() == {"t", "u"} and subs.rebalance_listener is listener
    with pytest.raises(IllegalArgumentError):
        subs.subscribe(["t", ""])
    subs.assign_from_subscribed([TP0, OTHER])
    assert subs.assigned_partitions() == {TP0, OTHER}
    with pytest.raises(IllegalArgumentError, match="non-subscribed topic"):
        subs.assign_from_subscribed([TopicPartition("x", 0)])
    # A retained partition keeps its position across a reassignment.
    subs.seek(TP0, 42)
    subs.assign_from_subscribed([TP0, TP1])
    assert subs.position(TP0) == FetchPosition(42)
    assert subs.fetch_state(TP1) is FetchState.INITIALIZING


def test_pattern_subscription():
    subs = SubscriptionState()
    subs.subscribe_pattern(re.compile(r"orders-\d+"))
    assert subs.matches_subscribed_pattern("orders-1") and not subs.matches_subscribed_pattern("orders-x")
    assert subs.subscribe_from_pattern(["orders-1"]) is True
    subs.assign_from_subscribed([TopicPartition("orders-1", 0)])
    with pytest.raises(IllegalArgumentError):
        subs.subscribe_pattern("[")
    manual = SubscriptionState()
    manual.assign_from_user([TP0])
    with pytest.raises(IllegalArgumentError):
        manual.assign_from_subscribed([TP0])


def test_fetchable_partitions_excludes_paused_revoking_and_positionless():
    subs = SubscriptionState()
    subs.assign_from_user([TP0, TP1, OTHER])
    assert subs.fetchable_partitions() == []
    for tp in (TP0, TP1, OTHER):
        subs.seek(tp, 0)
    assert subs.fetchable_partitions() == [TP0, TP1, OTHER]
    subs.pause(TP1)
    assert subs.paused_partitions() == {TP1}
    subs.mark_pending_revocation([OTHER])
    assert subs.fetchable_partitions() == [TP0]
    subs.resume(TP1)
    assert subs.fetchable_partitions(lambda tp: tp.partition == 1) == [TP1]
    subs.request_offset_reset(TP0)
    assert TP0 not in subs.fetchable_partitions()


def test_pending_on_assigned_callback():
    subs = SubscriptionState()
    subs.subscribe(["t"])
    subs.assign_from_subscribed_awaiting_callback([TP0, TP1], added=[TP1])
    subs.seek(TP0, 1)
    subs.seek(TP1, 1)
    assert subs.fetchable_partitions() == [TP0]
    subs.enable_partitions_awaiting_callback([TP1])
    assert subs.fetchable_partitions() == [TP0, TP1]


def test_seek_and_positions():
    subs = SubscriptionState()
    subs.assign_from_user([TP0])
    with pytest.raises(IllegalStateError):
        subs.seek(OTHER, 1)
    with pytest.raises(IllegalArgumentError):
        subs.seek(TP0, -1)
    with pytest.raises(IllegalStateError, match="valid current position"):
        subs.update_position(TP0, FetchPosition(3))
    assert subs.position_or_none(OTHER) is None and subs.position_or_none(TP0) is None
    subs.seek(TP0, 10)
    assert subs.position_or_none(TP0) == FetchPosition(10)
    assert subs.has_valid_position(TP0) and subs.has_all_fetch_positions()
    subs.update_position(TP0, FetchPosition(12, 3))
    assert subs.all_consumed() == {TP0: OffsetAndMetadata(12, "", 3)}
    # An unvalidated position with both epochs awaits validation and is not consumed yet.
    subs.seek_unvalidated(TP0, FetchPosition(20, 4, LeaderAndEpoch(1, 5)))
    assert subs.awaiting_validation(TP0) and not subs.has_valid_position(TP0)
    assert subs.all_consumed() == {}
    assert subs.partitions_needing_validation(0) == {TP0}
    subs.complete_validation(TP0)
    assert subs.valid_position(TP0) == FetchPosition(20, 4, LeaderAndEpoch(1, 5))
    # Without epochs there is nothing to validate.
    subs.seek_unvalidated(TP0, FetchPosition(21))
    assert subs.has_valid_position(TP0)


def test_resets_with_backoff_and_strategies():
    subs = SubscriptionState("earliest")
    subs.assign_from_user([TP0, TP1])
    assert subs.initializing_partitions() == {TP0, TP1}
    subs.reset_initializing_positions()
    assert subs.partitions_needing_reset(0) == {TP0, TP1}
    assert subs.reset_strategy(TP0) is AutoOffsetResetStrategy.EARLIEST
    subs.request_offset_reset(TP1, "latest")
    subs.set_next_allowed_retry([TP0], 100)
    assert subs.partitions_needing_reset(50) == {TP1}
    assert subs.partitions_needing_reset(100) == {TP0, TP1}
    # A ListOffsets answer for a strategy that changed meanwhile is dropped.
    subs.maybe_seek_unvalidated(TP1, FetchPosition(9), AutoOffsetResetStrategy.EARLIEST)
    assert subs.is_offset_reset_needed(TP1)
    subs.maybe_seek_unvalidated(TP1, FetchPosition(9), AutoOffsetResetStrategy.LATEST)
    assert subs.position(TP1) == FetchPosition(9)
    assert AutoOffsetResetStrategy.EARLIEST.timestamp == -2 and AutoOffsetResetStrategy.LATEST.timestamp == -1
    with pytest.raises(IllegalArgumentError):
        subs.request_offset_reset(TP0, "middle")


def test_reset_policy_none_names_partitions():
    subs = SubscriptionState("none")
    subs.assign_from_user([TP0])
    with pytest.raises(NoOffsetForPartitionError, match="t-0"):
        subs.reset_initializing_positions()


def test_leader_change_triggers_validation():
    subs = SubscriptionState()
    subs.assign_from_user([TP0])
    subs.seek_validated(TP0, FetchPosition(10, 2, LeaderAndEpoch(1, 2)))
    assert subs.maybe_validate_position_for_current_leader(TP0, LeaderAndEpoch(1, 2)) is False
    assert subs.maybe_validate_position_for_current_leader(TP0, LeaderAndEpoch(None, None)) is False
    assert subs.maybe_validate_position_for_current_leader(TP0, LeaderAndEpoch(2, 3)) is True
    assert subs.position(TP0).current_leader == LeaderAndEpoch(2, 3)


def test_leaders_of_all_positions_checked_again_only_after_a_change():
    # Every poll asks; the check is skipped while neither the metadata (its update count)
    # nor any position changed, as Java's validatePositionsOnMetadataChange.
    subs = SubscriptionState()
    subs.assign_from_user([TP0, TP1])
    subs.seek_validated(TP0, FetchPosition(10))  # a user seek: no leader known yet
    subs.seek_validated(TP1, FetchPosition(20, 2, LeaderAndEpoch(1, 2)))
    leaders = {TP0: LeaderAndEpoch(1, 2), TP1: LeaderAndEpoch(1, 2)}
    subs.maybe_validate_positions_for_current_leaders(leaders.get, 7)
    assert subs.position(TP0).current_leader == LeaderAndEpoch(1, 2)
    assert subs.fetch_state(TP1) is FetchState.FETCHING
    # the same metadata version and no position change: not checked (the new leader is
    # what a metadata update would bring, with a new version)
    leaders[TP1] = LeaderAndEpoch(3, 4)
    subs.maybe_validate_positions_for_current_leaders(leaders.get, 7)
    assert subs.position(TP1).current_leader == LeaderAndEpoch(1, 2)
    subs.maybe_validate_positions_for_current_leaders(leaders.get, 8)
    assert subs.position(TP1).current_leader == LeaderAndEpoch(3, 4)
    assert subs.fetch_state(TP1) is FetchState.AWAIT_VALIDATION
    # a seek (a transition) makes the next call check again, the version unchanged
    subs.seek_validated(TP0, FetchPosition(11))
    subs.maybe_validate_positions_for_current_leaders(leaders.get, 8)
    assert subs.position(TP0).current_leader == LeaderAndEpoch(1, 2)
    # so does a position update that changes the leader it names
    subs.update_position(TP0, FetchPosition(12))
    subs.maybe_validate_positions_for_current_leaders(leaders.get, 8)
    assert subs.position(TP0).current_leader == LeaderAndEpoch(1, 2)
    # without a version (metadata that does not count updates) every call checks
    subs.seek_validated(TP1, FetchPosition(30, 2, LeaderAndEpoch(3, 4)))
    subs.maybe_validate_positions_for_current_leaders(leaders.get, 8)
    leaders[TP1] = LeaderAndEpoch(5, 6)
    subs.maybe_validate_positions_for_current_leaders(leaders.get)
    assert subs.position(TP1).current_leader == LeaderAndEpoch(5, 6)


def test_has_all_fetch_positions_follows_assignment_and_transitions():
    subs = SubscriptionState()
    subs.assign_from_user([TP0])
    assert not subs.has_all_fetch_positions()
    subs.seek(TP0, 5)
    assert subs.has_all_fetch_positions()
    subs.assign_from_user([TP0, TP1])
    assert not subs.has_all_fetch_positions()
    subs.seek(TP1, 1)
    assert subs.has_all_fetch_positions()
    subs.request_offset_reset(TP1)
    assert not subs.has_all_fetch_positions()


@pytest.mark.parametrize("policy, end_offset, epoch, expect", [
    ("earliest", 8, 2, "moved"),          # truncated below position: reposition
    ("none", 8, 2, "truncation"),         # no policy: report the divergent offset
    ("earliest", 15, 2, "valid"),         # log reaches past the position
    ("earliest", -1, -1, "reset"),        # undefined epoch: reset per policy
    ("none", -1, -1, "truncation-unknown"),
])
def test_maybe_complete_validation(policy, end_offset, epoch, expect):
    subs = SubscriptionState(policy)
    subs.assign_from_user([TP0])
    position = FetchPosition(10, 2, LeaderAndEpoch(1, 3))
    subs.seek_unvalidated(TP0, position)
    result = subs.maybe_complete_validation(TP0, position, end_offset, epoch)
    if expect == "moved":
        assert result is None and subs.valid_position(TP0).offset == 8
    elif expect == "truncation":
        assert result.divergent_offset == OffsetAndMetadata(8, "", 2) and result.fetch_position == position
    elif expect == "valid":
        assert result is None and subs.valid_position(TP0) == position
    elif expect == "reset":
        assert result is None and subs.is_offset_reset_needed(TP0)
    else:
        assert result.divergent_offset is None


def test_stale_validation_answer_ignored():
    subs = SubscriptionState()
    subs.assign_from_user([TP0])
    position = FetchPosition(10, 2, LeaderAndEpoch(1, 3))
    subs.seek_unvalidated(TP0, position)
    subs.seek_unvalidated(TP0, FetchPosition(50, 2, LeaderAndEpoch(1, 3)))
    assert subs.maybe_complete_validation(TP0, position, 3, 2) is None
    assert subs.awaiting_validation(TP0) and subs.position(TP0).offset == 50


def test_watermarks_lag_and_read_replica():
    subs = SubscriptionState()
    subs.assign_from_user([TP0])
    subs.seek(TP0, 5)
    subs.update_high_watermark(TP0, 20)
    subs.update_last_stable_offset(TP0, 15)
    subs.update_log_start_offset(TP0, 2)
    subs.update_high_watermark(OTHER, 99)  # not assigned: ignored
    assert subs.partition_lag(TP0, IsolationLevel.READ_UNCOMMITTED) == 15
    assert subs.partition_lag(TP0, IsolationLevel.READ_COMMITTED) == 10
    assert subs.log_start_offset(TP0) == 2
    subs.update_preferred_read_replica(TP0, 3, expiration_ms=1000)
    assert subs.preferred_read_replica(TP0, 999) == 3
    assert subs.preferred_read_replica(TP0, 1001) is None


def test_assignment_changes_and_metadata_topics():
    subs = SubscriptionState()
    assert subs.assign_from_user([TP0, OTHER]) is True
    first = subs.assignment_id()
    assert subs.assign_from_user([OTHER, TP0]) is False
    assert subs.metadata_topics() == {"t", "u"}
    subs.assign_from_user([TP0])
    assert subs.assignment_id() > first
    grouped = SubscriptionState()
    grouped.subscribe(["t"])
    assert grouped.group_subscribe(["t", "x"]) is True
    assert grouped.metadata_topics() == {"t", "x"}


def test_concurrent_updates_are_consistent():
    subs = SubscriptionState()
    partitions = [TopicPartition("t", p) for p in range(8)]
    subs.assign_from_user(partitions)
    for tp in partitions:
        subs.seek(tp, 0)

    def advance(tp):
        for offset in range(1, 300):
            subs.update_position(tp, FetchPosition(offset))
            subs.fetchable_partitions()

    threads = [TestThread(target=advance, args=(tp,)) for tp in partitions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {om.offset for om in subs.all_consumed().values()} == {299}


def test_combined_reads_agree_with_the_single_ones():
    subs = SubscriptionState()
    subs.assign_from_user([TP0, TP1, OTHER])
    assert subs.fetchable_position(TP0) is None and subs.valid_position_or_none(TP0) is None
    for tp in (TP0, TP1, OTHER):
        subs.seek(tp, 7)
    subs.pause(TP1)
    subs.update_preferred_read_replica(OTHER, 4, expiration_ms=1000)
    assert subs.fetchable_position(TP0) == FetchPosition(7)
    assert subs.fetchable_position(TP1) is None  # paused
    assert subs.valid_position_or_none(TP1) == FetchPosition(7)  # paused, still a valid position
    assert subs.fetchable_position(TopicPartition("t", 9)) is None
    assert subs.fetchable_positions() == [(TP0, FetchPosition(7), None), (OTHER, FetchPosition(7), 4)]
    assert subs.fetchable_positions({TP0}) == [(OTHER, FetchPosition(7), 4)]
    subs.request_offset_reset(TP0)
    assert subs.valid_position_or_none(TP0) is None and subs.fetchable_position(TP0) is None

    assert subs.lags_and_leads([TP1], IsolationLevel.READ_UNCOMMITTED) == [(TP1, None, None)]
    subs.update_fetched_offsets(TP1, 20, 2, 15)
    subs.update_fetched_offsets(TP1, -1, -1, -1)  # unknown: kept
    assert (subs.high_watermark(TP1), subs.log_start_offset(TP1), subs.last_stable_offset(TP1)) == (20, 2, 15)
    assert subs.lags_and_leads([TP1], IsolationLevel.READ_UNCOMMITTED) == [(TP1, 13, 5)]
    assert subs.lags_and_leads([TP1], IsolationLevel.READ_COMMITTED) == [(TP1, 8, 5)]
    assert subs.partition_lag(TP1, IsolationLevel.READ_UNCOMMITTED) == 13
    # Unassigned partitions are left out; the rest keep their order.
    assert subs.lags_and_leads([OTHER, TopicPartition("t", 9), TP1], IsolationLevel.READ_UNCOMMITTED) == [
        (OTHER, None, None), (TP1, 13, 5)]
    subs.update_fetched_offsets(TopicPartition("t", 9), 1, 1, 1)  # unassigned: ignored


def test_paused_partitions_follow_pause_resume_and_assignment():
    subs = SubscriptionState()
    subs.assign_from_user([TP0, TP1])
    subs.pause(TP0)
    subs.pause(TP1)
    subs.resume(TP1)
    assert subs.paused_partitions() == {TP0}
    with pytest.raises(IllegalStateError):
        subs.pause(OTHER)
    subs.assign_from_user([TP0, OTHER])  # TP0 keeps its state, paused
    assert subs.paused_partitions() == {TP0} and subs.is_paused(TP0)
    subs.assign_from_user([OTHER])
    assert subs.paused_partitions() == set()
    subs.pause(OTHER)
    subs.unsubscribe()
    assert subs.paused_partitions() == set()


def test_lock_free_reads_never_miss_a_partition_while_the_fetch_order_moves():
    # The collector moves partitions to the end of the fetch order (pop and re-insert):
    # the lock-free reads must never see a partition missing meanwhile.
    subs = SubscriptionState()
    partitions = [TopicPartition("t", p) for p in range(50)]
    subs.assign_from_user(partitions)
    for tp in partitions:
        subs.seek(tp, 3)
    done = []

    def move():
        for _ in range(200):
            for tp in partitions:
                subs.move_partition_to_end(tp)
        done.append(True)

    mover = TestThread(target=move)
    mover.start()
    misses = 0
    while not done:
        for tp in partitions:
            if not subs.is_assigned(tp) or subs.position(tp) != FetchPosition(3) or not subs.has_valid_position(tp):
                misses += 1
        assert len(subs.assigned_partitions()) == 50
    mover.join()
    assert misses == 0


def test_assigned_and_paused_partitions_are_shared_immutable_snapshots():
    subs = SubscriptionState()
    subs.assign_from_user([TP0, TP1])
    assigned = subs.assigned_partitions()
    assert assigned == {TP0, TP1}
    # One object for every caller until the assignment changes: no copy per call ...
    subs.seek(TP0, 4)
    subs.move_partition_to_end(TP0)
    subs.pause(TP1)
    assert subs.assigned_partitions() is assigned
    # ... and no caller can change the consumer's state through it.
    with pytest.raises(AttributeError):
        assigned.add(OTHER)  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        assigned.discard(TP0)  # type: ignore[attr-defined]
    assert subs.assigned_partitions() == {TP0, TP1} and subs.is_assigned(TP0)
    paused = subs.paused_partitions()
    assert paused == {TP1} and subs.paused_partitions() is paused
    with pytest.raises(AttributeError):
        paused.clear()  # type: ignore[attr-defined]
    assert subs.is_paused(TP1)
    # A new assignment publishes a new snapshot; the old one still says what it said.
    subs.assign_from_user([TP1, OTHER])
    assert subs.assigned_partitions() == {TP1, OTHER} and assigned == {TP0, TP1}
    assert subs.assigned_partitions() is not assigned
    assert subs.paused_partitions() == {TP1} and paused == {TP1}
    subs.resume(TP1)
    assert subs.paused_partitions() == set() and paused == {TP1}
    subs.unsubscribe()
    assert subs.assigned_partitions() == set() and subs.paused_partitions() == set()
    # An unchanged manual assignment keeps its snapshot.
    subs.assign_from_user([TP0])
    again = subs.assigned_partitions()
    assert subs.assign_from_user([TP0]) is False and subs.assigned_partitions() is again
