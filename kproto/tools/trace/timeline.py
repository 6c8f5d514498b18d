"""A trace turned into what the timeline page draws: lanes, arrows, markers, segments.

Owns :func:`build_timeline`. Input: events in time order (the proxy's ``exchange``/``open``/
``close``/``undecodable`` and kproto's own ``kind: "kproto"`` events). Output: a JSON-able
dict the page renders without further protocol knowledge:

- ``lanes``: one per group member (``group / member``: the story, on top), per kproto
  consumer's inner events, per broker (by upstream address) and per client connection;
- ``arrows``: each request (client lane -> broker lane, at its send time) and response
  (back, at its arrival), with the API, errors (``bad``) and the index of its details;
- ``segments``: on member lanes, what the member owns over time (classic: from SyncGroup
  answers, ended by a JoinGroup that reports fewer owned partitions; KIP-848: from the
  partitions a ConsumerGroupHeartbeat reports owned), each labelled with the generation or
  epoch and the partitions gained (``+``) and lost (``-``);
- ``markers``: generations and epochs given, target assignments, fetch sessions (id, epoch,
  partitions added/removed), commits, share-group acquisitions, undecodable frames, and
  kproto's inner transitions; errors that mean trouble (``bad``) apart from the errors that
  are steps of a normal handshake (``step``: version negotiation, ``MEMBER_ID_REQUIRED``,
  ``REBALANCE_IN_PROGRESS`` followed by the member's rejoin; one the member does not follow
  with a JoinGroup turns ``bad``), TLS connections and bytes skipped in a capture.
"""

from __future__ import annotations

from typing import Any, Optional

from kproto.tools.trace.summaries import expected_step

__all__ = ["build_timeline", "compact"]


def compact(partitions: list[str]) -> str:
    """``["t-0", "t-1", "u-3"]`` as ``t[0,1] u[3]`` (long topic names once per topic)."""
    by_topic: dict[str, list[str]] = {}
    for text in partitions:
        topic, _, number = text.rpartition("-")
        by_topic.setdefault(topic, []).append(number)
    return " ".join("{}[{}]".format(topic, ",".join(sorted(numbers, key=_number)))
                    for topic, numbers in by_topic.items())


def _number(text: str) -> int:
    return int(text) if text.isdigit() else -1


class _Builder:
    def __init__(self) -> None:
        self.lanes: list[dict[str, Any]] = []
        self.lane_ids: dict[tuple[str, ...], int] = {}
        self.arrows: list[dict[str, Any]] = []
        self.markers: list[dict[str, Any]] = []
        self.segments: list[dict[str, Any]] = []
        self.details: list[dict[str, Any]] = []
        self.conn_client: dict[str, str] = {}  # conn -> client_id
        self.member_client: dict[str, str] = {}  # member id -> client_id
        self.owned: dict[int, tuple[float, list[str], str]] = {}  # member lane -> open segment
        self.sessions: dict[str, tuple[int, set[str]]] = {}  # conn -> (session id, partitions)
        self.generation: dict[int, Any] = {}  # member lane -> last generation/epoch marked
        # (group, member) -> step markers and arrows waiting for the member to join again.
        self.awaiting_rejoin: dict[tuple[str, str], list[tuple[dict[str, Any], Optional[dict[str, Any]]]]] = {}

    def lane(self, key: tuple[str, ...], label: str, kind: str) -> int:
        index = self.lane_ids.get(key)
        if index is None:
            index = self.lane_ids[key] = len(self.lanes)
            self.lanes.append({"label": label, "kind": kind})
        return index

    def broker_lane(self, event: dict[str, Any]) -> int:
        node = event.get("node")
        label = ("broker {} ({})".format(node, event["broker"]) if node is not None
                 else "broker {}".format(event["broker"]))
        index = self.lane(("broker", event["broker"]), label, "broker")
        if node is not None:
            self.lanes[index]["label"] = label  # learnt later than the first connection
        return index

    def conn_lane(self, event: dict[str, Any]) -> int:
        conn = event["conn"]
        client_id = event.get("client_id") or self.conn_client.get(conn)
        if client_id:
            self.conn_client[conn] = client_id
        index = self.lane(("conn", conn), conn, "client")
        self.lanes[index]["label"] = "{} {} -> {}".format(client_id or "?", conn, event.get("broker", ""))
        return index

    def member_lane(self, group: str, member: str, client_id: Optional[str]) -> int:
        if client_id:
            self.member_client[member] = client_id
        client_id = client_id or self.member_client.get(member)
        index = self.lane(("member", group, member), "", "member")
        self.lanes[index]["label"] = "{}group {} member {}".format(
            client_id + " in " if client_id else "", group, member[:24])
        return index

    def marker(self, lane: int, t: float, text: str, cls: str = "", detail: Optional[int] = None) -> None:
        self.markers.append({"lane": lane, "t": t, "text": text, "cls": cls, "detail": detail})

    def own(self, lane: int, t: float, partitions: list[str], label: str, detail: Optional[int],
            leaving: bool = False) -> None:
        """The member owns ``partitions`` from ``t`` (a new segment when they change)."""
        previous = self.owned.get(lane)
        before = previous[1] if previous else []
        if previous is not None and previous[1] == partitions:
            return
        if previous is not None:
            self.segments.append({"lane": lane, "t0": previous[0], "t1": t, "text": previous[2],
                                  "partitions": previous[1]})
        gained = [p for p in partitions if p not in before]
        lost = [p for p in before if p not in partitions]
        change = (["+" + compact(gained)] if gained else []) + (["-" + compact(lost)] if lost else [])
        if change:
            self.marker(lane, t, "{}: {}".format(label, " ".join(change)), "own", detail)
        if leaving:  # out of the group: no segment until it joins again
            self.owned.pop(lane, None)
            return
        self.owned[lane] = (t, partitions, "{}: {}".format(label, compact(partitions) or "nothing"))

    def finish(self, t_end: float) -> None:
        # A "step" the member never followed with a rejoin was trouble after all.
        for pairs in self.awaiting_rejoin.values():
            for marker, arrow in pairs:
                marker["cls"] = "bad"
                marker["text"] = marker["text"].split(" (expected: ")[0] + " (no rejoin followed)"
                if arrow is not None:
                    arrow["step"], arrow["bad"] = False, True
        for lane, (t0, partitions, text) in self.owned.items():
            self.segments.append({"lane": lane, "t0": t0, "t1": t_end, "text": text,
                                  "partitions": partitions, "open": True})


def build_timeline(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The page's model of ``events`` (any order: they are sorted by time here)."""
    b = _Builder()
    t_last = 0.0
    for event in sorted(events, key=lambda e: e.get("t", 0.0)):
        kind = event.get("kind")
        t_last = max(t_last, event.get("t_end") or event.get("t") or 0.0)
        if kind == "exchange":
            _exchange(b, event)
        elif kind == "undecodable":
            detail = len(b.details)
            b.details.append(event)
            text = "TLS: encrypted" if event.get("tls") else "undecodable {} ({} bytes)".format(
                event["direction"], event["bytes"])
            b.marker(b.conn_lane(event), event["t"], text, "bad", detail)
        elif kind == "kproto":
            _kproto(b, event)
        elif kind == "skipped":
            detail = len(b.details)
            b.details.append(event)
            b.marker(b.conn_lane(event), event["t"], "skipped {} {} bytes".format(event["bytes"], event["direction"]),
                     "close", detail)
        elif kind == "close":
            lane = b.lane_ids.get(("conn", event["conn"]))
            if lane is not None:
                b.marker(lane, event["t"], "closed: " + event.get("reason", ""), "close")
    b.finish(t_last)
    times = [a["t"] for a in b.arrows] + [m["t"] for m in b.markers]
    order = sorted(range(len(b.lanes)), key=lambda i: (
        {"member": 0, "kproto": 1, "broker": 2, "client": 3}[b.lanes[i]["kind"]], i))
    remap = {old: new for new, old in enumerate(order)}
    for item in b.arrows:
        item["from"], item["to"] = remap[item["from"]], remap[item["to"]]
    for item in b.markers + b.segments:
        item["lane"] = remap[item["lane"]]
    return {"lanes": [b.lanes[i] for i in order], "arrows": b.arrows, "markers": b.markers,
            "segments": b.segments, "details": b.details,
            "t0": min(times) if times else 0.0, "t1": t_last}


def _exchange(b: _Builder, e: dict[str, Any]) -> None:
    client, broker = b.conn_lane(e), b.broker_lane(e)
    detail = len(b.details)
    b.details.append(e)
    # Version negotiation, MEMBER_ID_REQUIRED and REBALANCE_IN_PROGRESS are steps of a
    # normal handshake (summaries.EXPECTED_STEPS), drawn apart from errors that mean trouble.
    step = expected_step(e)
    s = e.get("summary") or {}
    member = s.get("member_id") if e["api"] == "JoinGroup" else s.get("member")
    if step is not None and e["api"] != "ApiVersions" and not (s.get("group") and member):
        step = None  # a rebalance step is one only for a member seen to join again
    bad = step is None and bool(e.get("errors") or e.get("request_error") or e.get("response_error"))
    label = "{} v{}".format(e["api"], e["version"])
    b.arrows.append({"t": e["t"], "from": client, "to": broker, "api": e["api"], "label": label,
                     "bad": bool(e.get("request_error")), "detail": detail, "dir": "req"})
    if not e.get("one_way") and not e.get("unanswered"):
        b.arrows.append({"t": e["t_end"], "from": broker, "to": client, "api": e["api"],
                         "label": label + (" " + ",".join(e["errors"]) if e.get("errors") else ""),
                         "bad": bad, "step": step is not None, "detail": detail, "dir": "resp"})
    api, t, t_end, client_id = e["api"], e["t"], e["t_end"], e.get("client_id")
    if e.get("errors"):
        text = "{}: {}".format(api, ",".join(e["errors"]))
        if step is None:
            b.marker(client, t_end, text, "bad", detail)
        else:
            b.marker(client, t_end, text + " (expected: " + step + ")", "step", detail)
            if api != "ApiVersions" and member:
                # A step only if the member joins again: held until its next JoinGroup.
                b.awaiting_rejoin.setdefault((s["group"], member), []).append(
                    (b.markers[-1], b.arrows[-1] if b.arrows[-1].get("step") else None))
    if api == "JoinGroup" and s.get("group"):
        if s.get("member"):
            b.awaiting_rejoin.pop((s["group"], s["member"]), None)  # it did join again
        member = s.get("member_id") or s.get("member")
        if member:
            lane = b.member_lane(s["group"], member, client_id)
            owned = (s.get("subscription") or {}).get("owned")
            if owned is not None and lane in b.owned:
                b.own(lane, t, owned, "rejoin", detail)  # eager members give all up here
            if not e.get("errors"):
                b.marker(lane, t_end, "generation {}{}".format(
                    s.get("generation"), " (leader)" if s.get("leader") == member else ""),
                    "gen", detail)
    elif api == "SyncGroup" and s.get("group") and s.get("member"):
        lane = b.member_lane(s["group"], s["member"], client_id)
        if s.get("assignment") is not None and not e.get("errors"):
            b.own(lane, t_end, s["assignment"], "gen {}".format(s.get("generation")), detail)
    elif api in ("ConsumerGroupHeartbeat", "ShareGroupHeartbeat") and s.get("group"):
        member = s.get("member_id") or s.get("member")
        if member:
            lane = b.member_lane(s["group"], member, client_id)
            if s.get("owned") is not None and api == "ConsumerGroupHeartbeat":
                b.own(lane, t, s["owned"], "epoch {}".format(s.get("epoch")), detail)
            elif (s.get("epoch") or 0) < 0 and lane in b.owned:  # -1/-2: leaving the group
                b.own(lane, t, [], "left", detail, leaving=True)
            epoch = s.get("member_epoch")
            if epoch is not None and b.generation.get(lane) != epoch and not e.get("errors"):
                b.generation[lane] = epoch
                b.marker(lane, t_end, "epoch {}".format(epoch), "gen", detail)
            if s.get("assignment") is not None:
                b.marker(lane, t_end, "target: {}".format(compact(s["assignment"]) or "nothing"),
                         "target", detail)
                if api == "ShareGroupHeartbeat":  # share members own what they are given
                    b.own(lane, t_end, s["assignment"], "epoch {}".format(epoch), detail)
    elif api == "LeaveGroup" and s.get("group"):
        for member in s.get("members") or []:
            lane = b.member_lane(s["group"], member, client_id)
            b.marker(lane, t, "leaves", "gen", detail)
            b.own(lane, t, [], "left", detail, leaving=True)
    elif api == "OffsetCommit":
        b.marker(client, t, "commit " + ", ".join(s.get("offsets") or []), "commit", detail)
    elif api == "Fetch":
        _fetch_session(b, e, client, detail)
    elif api == "ShareFetch" and any(" " in a and a.split(" ", 1)[1] for a in s.get("acquired") or []):
        b.marker(client, t_end, "acquired " + "; ".join(a for a in s["acquired"] if a.split(" ", 1)[1]),
                 "share", detail)


def _fetch_session(b: _Builder, e: dict[str, Any], lane: int, detail: int) -> None:
    s = e.get("summary") or {}
    if "session" not in s:
        return
    session_id, epoch = (int(x) for x in s["session"].split("/"))
    wanted = {p.split("@")[0] for p in s.get("fetch") or []}
    forgotten = set(s.get("forgotten") or [])
    known_id, known = b.sessions.get(e["conn"], (None, set()))
    if epoch in (0, -1):  # a full fetch request lists every partition
        partitions = wanted
    else:
        partitions = (known | wanted) - forgotten
    added, removed = sorted(partitions - known), sorted(known - partitions)
    new_id = s.get("session_id", session_id) or 0
    if added or removed or new_id != known_id:
        text = "fetch session {} epoch {}".format(new_id, epoch) if new_id or session_id \
            else "sessionless fetch"
        if added:
            text += " +" + " +".join(added)
        if removed:
            text += " -" + " -".join(removed)
        b.marker(lane, e["t"], text, "session", detail)
    b.sessions[e["conn"]] = (new_id, partitions)


def _kproto(b: _Builder, e: dict[str, Any]) -> None:
    member = e.get("member_id")
    source = e.get("source") or (b.member_client.get(member) if member else None) or member \
        or e.get("thread") or "kproto"
    lane = b.lane(("kproto", source), "kproto inner: {}".format(source), "kproto")
    name = e.get("event", "?")
    if name in ("member_state",):
        text = "{} -> {}".format(e.get("previous"), e.get("state"))
    elif name == "member_epoch":
        text = "epoch {}".format(e.get("epoch"))
    elif name == "fetch_state":
        text = "{} {} -> {}".format(e.get("partition"), e.get("previous"), e.get("state"))
    elif name == "assignment":
        text = "assignment " + " ".join(["+" + p for p in e.get("added", [])] +
                                        ["-" + p for p in e.get("removed", [])])
    elif name == "reconcile":
        parts = ["reconcile " + str(e.get("step"))]
        for key, sign in (("added", "+"), ("revoked", "-")):
            if e.get(key):
                parts.append(" ".join(sign + p for p in e[key]))
        text = " ".join(parts)
    else:
        text = "{} {}".format(name, e.get("action", ""))
    detail = len(b.details)
    b.details.append(e)
    b.marker(lane, e["t"], text, "inner", detail)
