"""Shared helpers for the message tests: the schema model, hypothesis strategies per version.

Strategies are built from spec/ (through codegen's schema model), independently of the
generated code they test: a value for every field the version carries, None where the version
allows null.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from hypothesis import strategies as st

from codegen.schema import FIXED, Field, Message, Struct, load_all

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT / "spec"
MESSAGES: list[Message] = load_all(SPEC_DIR)
BY_NAME: dict[str, Message] = {m.name: m for m in MESSAGES}

INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}

# The schemas kproto speaks (tested with more examples than the rest of Kafka's APIs).
CONSUMER_APIS = (
    "ApiVersions", "Metadata", "FindCoordinator", "Fetch", "ListOffsets", "OffsetCommit",
    "OffsetFetch", "OffsetForLeaderEpoch", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup",
    "ConsumerGroupHeartbeat", "ConsumerGroupDescribe", "DescribeGroups", "ListGroups", "Produce",
    "CreateTopics", "DeleteTopics", "InitProducerId", "SaslHandshake", "SaslAuthenticate",
)
CONSUMER_SCHEMAS = frozenset(
    [api + kind for api in CONSUMER_APIS for kind in ("Request", "Response")]
    + ["RequestHeader", "ResponseHeader", "ConsumerProtocolSubscription",
       "ConsumerProtocolAssignment"])


def message_class(msg: Message, struct: Struct | None = None) -> type:
    module = importlib.import_module("kproto.messages." + msg.module)
    return getattr(module, (struct or msg.root).class_name)


def versions_of(msg: Message) -> range:
    return msg.versions()


def all_pairs(consumer: bool | None = None) -> list[tuple[str, int]]:
    """(schema, version) for every version of every schema; only those kproto speaks
    (``consumer=True``) or only the others (``False``)."""
    return [(m.name, v) for m in MESSAGES for v in m.versions()
            if consumer is None or (m.name in CONSUMER_SCHEMAS) == consumer]


def unstable_latest(msg: Message) -> bool:
    data = json.loads((SPEC_DIR / (msg.name + ".json")).read_text())
    return bool(data.get("latestVersionUnstable"))


def _scalar(type_name: str, compact: bool) -> st.SearchStrategy:
    if type_name in INT_RANGES:
        bits = INT_RANGES[type_name]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if type_name == "uint16":
        return st.integers(0, 0xFFFF)
    if type_name == "uint32":
        return st.integers(0, 0xFFFFFFFF)
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "bool":
        return st.booleans()
    if type_name == "string":
        return st.text(max_size=6)
    if type_name in ("bytes", "records"):
        return st.binary(max_size=8)
    if type_name == "uuid":
        return st.uuids()
    raise AssertionError(type_name)


def field_strategy(msg: Message, f: Field, version: int) -> st.SearchStrategy:
    compact = version in msg.flexible and (f.flexible is None or version in f.flexible)
    if f.struct is not None:
        element = struct_strategy(msg, f.struct, version)
    else:
        element = _scalar(f.base_type, compact)
    value = st.lists(element, max_size=2) if f.is_array else element
    if version in f.nullable:
        value = st.none() | value
    return value


def struct_strategy(msg: Message, struct: Struct, version: int) -> st.SearchStrategy:
    cls = message_class(msg, struct)
    fields = {f.attr: field_strategy(msg, f, version) for f in struct.fields
              if version in f.versions}
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def message_strategy(name: str, version: int) -> st.SearchStrategy:
    msg = BY_NAME[name]
    return struct_strategy(msg, msg.root, version)


__all__ = ["MESSAGES", "BY_NAME", "CONSUMER_SCHEMAS", "FIXED", "message_class", "all_pairs", "message_strategy",
           "unstable_latest", "versions_of", "ROOT", "SPEC_DIR"]
