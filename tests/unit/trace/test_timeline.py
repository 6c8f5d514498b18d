"""The timeline model, sans-IO: exchanges as the proxy reports them, in, lanes and marks out.

The brokers of the test ground do not exercise everything the page draws (neither the mock
nor Tansu hands out fetch session ids, and no test broker runs share groups), so these
cases feed the model hand-written events of the proxy's format and check what a learner
would read: incremental fetch sessions adding and forgetting partitions, an eager member
giving everything up when it rejoins, and share-group acquisitions.
"""

from __future__ import annotations

from kproto.tools.trace.timeline import build_timeline, compact

_BASE = {"kind": "exchange", "conn": "c1", "client_id": "app", "broker": "b:9092", "node": 1,
         "version": 0, "correlation_id": 0, "latency_ms": 1.0, "req_bytes": 10, "resp_bytes": 10,
         "errors": []}


def _exchange(t: float, api: str, summary: dict, **extra) -> dict:
    event = dict(_BASE, t=t, t_end=t + 0.001, api=api, api_key=0, summary=summary)
    event.update(extra)
    return event


def _texts(model: dict, cls: str) -> list[str]:
    return [m["text"] for m in model["markers"] if m["cls"] == cls]


def test_an_incremental_fetch_session_shows_partitions_added_and_forgotten():
    events = [
        _exchange(1.0, "Fetch", {"session": "0/0", "fetch": ["t-0@0", "t-1@0"], "session_id": 77}),
        _exchange(2.0, "Fetch", {"session": "77/1", "fetch": [], "session_id": 77}),
        _exchange(3.0, "Fetch", {"session": "77/2", "fetch": ["t-2@5"], "forgotten": ["t-0"],
                                 "session_id": 77}),
        _exchange(4.0, "Fetch", {"session": "77/3", "fetch": [], "session_id": 77}),
    ]
    assert _texts(build_timeline(events), "session") == [
        "fetch session 77 epoch 0 +t-0 +t-1",
        "fetch session 77 epoch 2 +t-2 -t-0",
    ]


def test_an_eager_member_loses_everything_when_it_rejoins_and_gains_at_sync():
    member = {"group": "g", "member": "m1"}
    events = [
        _exchange(1.0, "JoinGroup", dict(member, member_id="m1", generation=1, leader="m1",
                                         subscription={"topics": ["t"], "owned": []})),
        _exchange(2.0, "SyncGroup", dict(member, generation=1, assignment=["t-0", "t-1"])),
        _exchange(5.0, "JoinGroup", dict(member, member_id="m1", generation=2, leader="m2",
                                         subscription={"topics": ["t"], "owned": []})),
        _exchange(6.0, "SyncGroup", dict(member, generation=2, assignment=["t-1"])),
    ]
    model = build_timeline(events)
    (lane,) = [i for i, lane in enumerate(model["lanes"]) if lane["kind"] == "member"]
    own = [(m["t"], m["text"]) for m in model["markers"] if m["lane"] == lane and m["cls"] == "own"]
    assert own == [(2.001, "gen 1: +t[0,1]"), (5.0, "rejoin: -t[0,1]"), (6.001, "gen 2: +t[1]")]
    assert [m["text"] for m in model["markers"] if m["lane"] == lane and m["cls"] == "gen"] == [
        "generation 1 (leader)", "generation 2"]
    spans = [(s["t0"], s["t1"], s["partitions"]) for s in model["segments"] if s["lane"] == lane]
    assert spans == [(2.001, 5.0, ["t-0", "t-1"]), (5.0, 6.001, []), (6.001, 6.001, ["t-1"])]


def test_share_group_acquisitions_and_errors_are_marked():
    events = [
        _exchange(1.0, "ShareGroupHeartbeat", {"group": "s", "member": "x", "epoch": 0,
                                               "member_id": "x", "member_epoch": 1,
                                               "assignment": ["t-0"]}),
        _exchange(2.0, "ShareFetch", {"group": "s", "member": "x", "session_epoch": 0,
                                      "acquired": ["t-0 0-9#1", "t-1 "]}),
        _exchange(3.0, "OffsetCommit", {"group": "g", "offsets": ["t-0=10"]},
                  errors=["REBALANCE_IN_PROGRESS"]),
    ]
    model = build_timeline(events)
    assert _texts(model, "share") == ["acquired t-0 0-9#1"]
    assert "epoch 1: +t[0]" in _texts(model, "own")
    assert _texts(model, "bad") == ["OffsetCommit: REBALANCE_IN_PROGRESS"]
    assert [a["bad"] for a in model["arrows"] if a["api"] == "OffsetCommit"] == [False, True]


def test_partitions_are_grouped_per_topic():
    assert compact(["orders-10", "orders-2", "audit-0", "my-topic-1"]) == \
        "orders[2,10] audit[0] my-topic[1]"


def test_normal_handshake_steps_are_drawn_as_steps_and_a_step_without_rejoin_as_trouble():
    events = [
        _exchange(1.0, "ApiVersions", {}, errors=["UNSUPPORTED_VERSION"]),
        _exchange(1.1, "JoinGroup", {"group": "g", "member": "", "member_id": "m-1"},
                  errors=["MEMBER_ID_REQUIRED"]),
        _exchange(1.2, "JoinGroup", {"group": "g", "member": "m-1", "member_id": "m-1",
                                     "generation": 1, "leader": "m-1"}),
        _exchange(2.0, "Heartbeat", {"group": "g", "member": "m-1", "generation": 1},
                  errors=["REBALANCE_IN_PROGRESS"]),
        _exchange(2.1, "JoinGroup", {"group": "g", "member": "m-1", "member_id": "m-1",
                                     "generation": 2, "leader": "m-1"}),
        # Another member told of a rebalance that never joins again: that was trouble.
        _exchange(3.0, "Heartbeat", {"group": "g", "member": "m-2", "generation": 1},
                  errors=["REBALANCE_IN_PROGRESS"]),
    ]
    model = build_timeline(events)
    steps = _texts(model, "step")
    assert [s.split(" (expected")[0] for s in steps] == [
        "ApiVersions: UNSUPPORTED_VERSION", "JoinGroup: MEMBER_ID_REQUIRED",
        "Heartbeat: REBALANCE_IN_PROGRESS"]
    assert _texts(model, "bad") == ["Heartbeat: REBALANCE_IN_PROGRESS (no rejoin followed)"]
    responses = [a for a in model["arrows"] if a["dir"] == "resp"]
    assert [(a["api"], a["bad"], a.get("step")) for a in responses if a["api"] != "JoinGroup"
            or a["label"].endswith("REQUIRED")] == [
        ("ApiVersions", False, True), ("JoinGroup", False, True), ("Heartbeat", False, True),
        ("Heartbeat", True, False)]
    assert _texts(model, "gen") == ["generation 1 (leader)", "generation 2 (leader)"]
