"""What matters in each request/response pair: a small dict of fields per API, and errors.

Owns :func:`summarize` (the per-API choice of fields a learner looks at: partitions and
offsets for Fetch, member id/epoch/assignment for the group APIs, leader epochs and end
offsets for OffsetForLeaderEpoch, ...; every other API gets its plain fields and its lists
item by item, so no API's line is empty), :func:`error_names`
(every non-zero ``error_code`` of a response, by Kafka's name) and :func:`partitions_of`.
Topic ids (KIP-848 assignments, Fetch v13+) are shown by name once a Metadata answer on any
connection has named them (``TopicNames``). Values are plain JSON (strings, numbers, lists).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Optional

from kproto import messages
from kproto.errors import KafkaError, for_code

__all__ = ["TopicNames", "summarize", "error_names", "decode_assignment", "decode_subscription",
           "expected_step", "EXPECTED_STEPS"]

_INT16 = struct.Struct(">h")


class TopicNames:
    """Topic id -> name, learned from Metadata answers."""

    def __init__(self) -> None:
        self.by_id: dict[uuid.UUID, str] = {}

    def learn(self, metadata_response: Any) -> None:
        for topic in getattr(metadata_response, "topics", None) or []:
            topic_id = getattr(topic, "topic_id", None)
            if topic_id and topic.name and topic_id.int:
                self.by_id[topic_id] = topic.name

    def name(self, topic: Optional[str], topic_id: Any = None) -> str:
        if topic:
            return topic
        if topic_id is None:
            return "?"
        return self.by_id.get(topic_id) or str(topic_id)[:8]


# Error codes that are steps of a normal exchange, not trouble, by API: what they mean there.
# REBALANCE_IN_PROGRESS is a step when the member then rejoins (the timeline checks that).
EXPECTED_STEPS: dict[tuple[str, str], str] = {
    ("ApiVersions", "UNSUPPORTED_VERSION"):
        "version negotiation: the broker names the versions it speaks, the client asks again",
    ("JoinGroup", "MEMBER_ID_REQUIRED"):
        "KIP-394: the broker hands out a member id and the member joins again with it",
    ("Heartbeat", "REBALANCE_IN_PROGRESS"): "a rebalance began: the member joins again",
    ("SyncGroup", "REBALANCE_IN_PROGRESS"): "a rebalance began: the member joins again",
    ("OffsetCommit", "REBALANCE_IN_PROGRESS"): "a rebalance began: the member joins again",
}


def expected_step(event: dict[str, Any]) -> Optional[str]:
    """What an exchange's errors mean when every one is a normal step (None otherwise)."""
    errors = event.get("errors") or []
    if not errors or event.get("request_error") or event.get("response_error"):
        return None
    meanings = [EXPECTED_STEPS.get((event.get("api", ""), e)) for e in errors]
    return None if None in meanings else meanings[0]


def error_names(message: Any) -> list[str]:
    """Kafka's names of the non-zero error codes anywhere in a response (in tree order)."""
    found: list[str] = []
    _collect_errors(message, found)
    return found


def _collect_errors(obj: Any, found: list[str]) -> None:
    for name in obj._fields:
        value = getattr(obj, name)
        if name.endswith("error_code") and isinstance(value, int) and value != 0:
            text = for_code(value).message
            if text not in found:
                found.append(text)
        elif isinstance(value, list):
            for item in value:
                if hasattr(item, "_fields"):
                    _collect_errors(item, found)
        elif hasattr(value, "_fields"):
            _collect_errors(value, found)


def _consumer_protocol(cls: Any, data: Any) -> Any:
    if not data or len(data) < 2:
        return None
    version = _INT16.unpack_from(data, 0)[0]
    top = cls._first_version + len(cls._decoders) - 1
    try:
        return cls.decode(memoryview(data)[2:], min(max(version, 0), top), allow_trailing=True)
    except KafkaError:
        return None


def decode_assignment(data: Any) -> Optional[list[str]]:
    """A classic ConsumerProtocol assignment's partitions as ``topic-p`` (None if not one)."""
    decoded = _consumer_protocol(messages.ConsumerProtocolAssignment, data)
    if decoded is None:
        return None
    return sorted("{}-{}".format(tp.topic, p) for tp in decoded.assigned_partitions
                  for p in tp.partitions)


def decode_subscription(data: Any) -> Optional[dict[str, Any]]:
    """Topics, and (version 1+) the partitions the member says it still owns."""
    decoded = _consumer_protocol(messages.ConsumerProtocolSubscription, data)
    if decoded is None:
        return None
    out: dict[str, Any] = {"topics": list(decoded.topics)}
    if _INT16.unpack_from(data, 0)[0] >= 1:
        out["owned"] = sorted("{}-{}".format(tp.topic, p) for tp in decoded.owned_partitions
                              for p in tp.partitions)
    return out


def _tps(topics: Any, names: TopicNames, detail: Any = None, topic_attr: str = "topic",
         part_attr: str = "partition", parts_attr: str = "partitions") -> list[str]:
    out = []
    for t in topics or []:
        tname = names.name(getattr(t, topic_attr, None), getattr(t, "topic_id", None))
        for p in getattr(t, parts_attr):
            if isinstance(p, int):
                out.append("{}-{}".format(tname, p))
                continue
            text = "{}-{}".format(tname, getattr(p, part_attr))
            if detail is not None:
                text += detail(p)
            out.append(text)
    return out


def summarize(api_key: int, request: Any, response: Any, names: TopicNames) -> dict[str, Any]:
    """The fields that matter for this API (either side may be None: not decoded)."""
    fn = _SUMMARIES.get(api_key, _generic)
    out: dict[str, Any] = {}
    try:
        fn(request, response, names, out)
    except (AttributeError, TypeError, ValueError):
        pass  # a field this version lacks: show what was gathered
    return out


# Fields a one-line view leaves out: errors are listed apart, the rest is noise.
_QUIET = {"throttle_time_ms", "error_message", "records", "replica_id", "include_authorized_operations",
          "cluster_authorized_operations", "authorized_operations", "replica_state"}
_MAX_ITEMS = 12


def _scalar(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "{}B".format(len(value))
    if isinstance(value, uuid.UUID):
        return str(value)[:8]
    return value


def _is_struct(value: Any) -> bool:
    return hasattr(value, "_fields")


def _brief(item: Any, names: TopicNames) -> str:
    """One struct of a list in a few words: ``topic-p(k=v,...)`` for a topic's partitions,
    ``k=v,...`` of its plain fields otherwise."""
    fields = [f for f in item._fields if f not in _QUIET and not f.endswith("error_code")]
    topic = next((f for f in ("topic", "name", "topic_name") if f in fields
                  and isinstance(getattr(item, f), str)), None)
    parts = next((f for f in ("partitions", "partition_indexes", "partition_data",
                              "partition_responses") if f in fields), None)
    if (topic is not None or "topic_id" in fields) and parts is not None:
        tname = names.name(getattr(item, topic) if topic else None, getattr(item, "topic_id", None))
        out = []
        for p in getattr(item, parts) or []:
            if isinstance(p, int):
                out.append("{}-{}".format(tname, p))
                continue
            index = next((getattr(p, f) for f in ("partition", "partition_index", "index")
                          if f in p._fields), "?")
            detail = ",".join("{}={}".format(f, _scalar(getattr(p, f))) for f in p._fields
                              if f not in ("partition", "partition_index", "index")
                              and f not in _QUIET and not f.endswith("error_code")
                              and not isinstance(getattr(p, f), list) and not _is_struct(getattr(p, f)))
            out.append("{}-{}({})".format(tname, index, detail) if detail else "{}-{}".format(tname, index))
        return " ".join(out)
    return ",".join("{}={}".format(f, _scalar(getattr(item, f))) for f in fields
                    if not isinstance(getattr(item, f), list) and not _is_struct(getattr(item, f)))


def _generic(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    """Any API without a summary of its own: its plain top-level fields, and each list of
    structs item by item (a topic's partitions as ``topic-p``), errors left to ERRORS."""
    for message, suffix in ((req, ""), (resp, "_out")):
        if message is None:
            continue
        for name in message._fields:
            if name in _QUIET or name.endswith("error_code"):
                continue
            value = getattr(message, name)
            key = name + suffix if name in out else name
            if isinstance(value, list):
                if value and _is_struct(value[0]):
                    briefs = [b for b in (_brief(v, names) for v in value[:_MAX_ITEMS]) if b]
                    out[key] = briefs + (["+{} more".format(len(value) - _MAX_ITEMS)]
                                         if len(value) > _MAX_ITEMS else [])
                elif value:
                    out[key] = [_scalar(v) for v in value[:_MAX_ITEMS]]
            elif _is_struct(value):
                out[key] = _brief(value, names)
            elif value is not None:
                out[key] = _scalar(value)


def _offset_for_leader_epoch(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["epochs"] = _tps(req.topics, names, lambda p: " epoch={}{}".format(
            p.leader_epoch, " (current {})".format(p.current_leader_epoch)
            if p.current_leader_epoch >= 0 else ""))
    if resp is not None:
        out["end_offsets"] = _tps(resp.topics, names, lambda p: " epoch={} @{}".format(
            p.leader_epoch, p.end_offset))


def _fetch(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["session"] = "{}/{}".format(req.session_id, req.session_epoch)
        out["fetch"] = _tps(req.topics, names, lambda p: "@{}".format(p.fetch_offset))
        forgotten = _tps(req.forgotten_topics_data, names)
        if forgotten:
            out["forgotten"] = forgotten
    if resp is not None:
        out["session_id"] = resp.session_id
        out["data"] = _tps(resp.responses, names, lambda p: " hw={} {}B".format(
            p.high_watermark, len(p.records) if p.records is not None else 0),
            part_attr="partition_index")


def _produce(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["acks"] = req.acks
        out["produce"] = _tps(req.topic_data, names, lambda p: " {}B".format(
            len(p.records) if p.records is not None else 0), topic_attr="name", part_attr="index",
            parts_attr="partition_data")
    if resp is not None:
        out["base_offsets"] = _tps(resp.responses, names, lambda p: "@{}".format(p.base_offset),
                                   topic_attr="name", part_attr="index",
                                   parts_attr="partition_responses")


def _list_offsets(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["query"] = _tps(req.topics, names, lambda p: " ts={}".format(p.timestamp),
                            topic_attr="name", part_attr="partition_index")
    if resp is not None:
        out["offsets"] = _tps(resp.topics, names, lambda p: "@{}".format(p.offset),
                              topic_attr="name", part_attr="partition_index")


def _metadata(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["topics"] = None if req.topics is None else [t.name or str(t.topic_id)[:8] for t in req.topics]
    if resp is not None:
        out["brokers"] = ["{}@{}:{}".format(b.node_id, b.host, b.port) for b in resp.brokers]
        out["leaders"] = _tps(resp.topics, names, lambda p: "->{}".format(p.leader_id),
                              topic_attr="name", part_attr="partition_index")


def _commit(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["group"] = req.group_id
        out["generation"] = req.generation_id_or_member_epoch
        out["member"] = req.member_id
        out["offsets"] = _tps(req.topics, names, lambda p: "={}".format(p.committed_offset),
                              topic_attr="name", part_attr="partition_index")


def _offset_fetch(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if resp is not None:
        committed = _tps(resp.topics, names, lambda p: "={}".format(p.committed_offset),
                         topic_attr="name", part_attr="partition_index")
        for group in resp.groups:
            committed += _tps(group.topics, names, lambda p: "={}".format(p.committed_offset),
                              topic_attr="name", part_attr="partition_index")
        out["committed"] = committed


def _find_coordinator(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["keys"] = list(req.coordinator_keys) or [req.key]
    if resp is not None:
        nodes = [(c.node_id, c.host, c.port) for c in resp.coordinators] or \
            [(resp.node_id, resp.host, resp.port)]
        out["coordinator"] = ["{}@{}:{}".format(*n) for n in nodes]


def _join_group(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["group"] = req.group_id
        out["member"] = req.member_id
        for protocol in req.protocols[:1]:
            out["subscription"] = decode_subscription(protocol.metadata)
    if resp is not None:
        out["generation"] = resp.generation_id
        out["member_id"] = resp.member_id
        out["leader"] = resp.leader
        out["protocol"] = resp.protocol_name
        out["members"] = [m.member_id for m in resp.members]


def _heartbeat(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["group"] = req.group_id
        out["generation"] = req.generation_id
        out["member"] = req.member_id


def _leave_group(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["group"] = req.group_id
        out["members"] = [m.member_id for m in req.members] or [req.member_id]


def _sync_group(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["group"] = req.group_id
        out["generation"] = req.generation_id
        out["member"] = req.member_id
        if req.assignments:
            out["leader_assigns"] = {a.member_id: decode_assignment(a.assignment)
                                     for a in req.assignments}
    if resp is not None:
        out["assignment"] = decode_assignment(resp.assignment)


def _group_heartbeat(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["group"] = req.group_id
        out["member"] = req.member_id
        out["epoch"] = req.member_epoch
        if getattr(req, "subscribed_topic_names", None) is not None:
            out["subscribed"] = list(req.subscribed_topic_names)
        owned = getattr(req, "topic_partitions", None)
        if owned is not None:
            out["owned"] = sorted(_tps(owned, names))
    if resp is not None:
        out["member_id"] = resp.member_id
        out["member_epoch"] = resp.member_epoch
        if resp.assignment is not None:
            out["assignment"] = sorted(_tps(resp.assignment.topic_partitions, names))


def _share_fetch(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        out["group"] = req.group_id
        out["member"] = req.member_id
        out["session_epoch"] = req.share_session_epoch
    if resp is not None:
        out["acquired"] = _tps(resp.responses, names, lambda p: " " + ",".join(
            "{}-{}#{}".format(a.first_offset, a.last_offset, a.delivery_count)
            for a in p.acquired_records), part_attr="partition_index")


def _api_versions(req: Any, resp: Any, names: TopicNames, out: dict[str, Any]) -> None:
    if req is not None:
        if req.client_software_name:
            out["client"] = "{} {}".format(req.client_software_name, req.client_software_version)
    if resp is not None:
        out["apis"] = len(resp.api_keys)


_SUMMARIES = {0: _produce, 1: _fetch, 2: _list_offsets, 3: _metadata, 8: _commit,
              9: _offset_fetch, 10: _find_coordinator, 11: _join_group, 12: _heartbeat,
              13: _leave_group, 14: _sync_group, 18: _api_versions, 68: _group_heartbeat,
              23: _offset_for_leader_epoch, 76: _group_heartbeat, 78: _share_fetch}
