"""Values the broker issued: harvested from every decoded answer, drawn by the generator.

Owns the run's dictionary of broker-issued values (AFL's dictionary, filled from the
target's answers instead of by hand): member ids and epochs and generation ids
(JoinGroup, ConsumerGroupHeartbeat, ShareGroupHeartbeat, StreamsGroupHeartbeat), producer
ids and epochs (InitProducerId, DescribeProducers), fetch session ids, acquired offsets
(ShareFetch), topic ids, leader epochs, offsets and coordinators, keyed by field name. A
request field takes a value harvested under its own name or under a name it is known to
mean (``ALIASES``: OffsetCommit's ``generation_id_or_member_epoch`` takes a JoinGroup's
``generation_id`` or a heartbeat's ``member_epoch``).

Besides single values, each answer that issued an identity (a member id, a producer id, a
fetch session) becomes a *context*: the request's own names (its group, transactional id,
member) with what the answer issued and the session epoch due next. A request generated
in a context takes all of them together, so that a SyncGroup names the group, member and
generation one JoinGroup answer gave, not three values from three answers. Nothing here
talks to the broker; the harvest is fed decoded requests and answers.
"""

from __future__ import annotations

import random
import uuid
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterator, Optional

from kproto.tools.fuzz import schema
from kproto.tools.fuzz.values import INT_BITS, UINT_BITS, int_domain

VALUES_PER_NAME = 16   # the newest distinct values kept per field name
CONTEXTS = 64          # the newest contexts kept
# Names never worth drawing: errors, throttling, texts, the broker's addresses and sizes.
_SKIPPED = frozenset((
    "error_code", "error_message", "throttle_time_ms", "host", "port", "rack", "records",
    "cluster_id", "api_key", "min_version", "max_version", "message", "log_dir",
    "metadata", "assignment", "protocol_metadata", "member_metadata", "member_assignment",
    "client_host", "client_id", "config_value", "value", "documentation", "name"))
# A request field's name -> the answer fields whose values it may take (its own name too).
_OFFSETS = ("high_watermark", "last_stable_offset", "log_start_offset", "offset",
            "committed_offset", "end_offset", "first_offset", "last_offset", "fetch_offset")
ALIASES: dict[str, tuple[str, ...]] = {
    "generation_id_or_member_epoch": ("generation_id", "member_epoch"),
    "generation_id": ("generation_id", "member_epoch"),
    "member_id": ("member_id", "leader"),
    "current_leader_epoch": ("leader_epoch",),
    "last_fetched_epoch": ("leader_epoch",),
    "committed_leader_epoch": ("leader_epoch", "committed_leader_epoch"),
    "fetch_offset": _OFFSETS,
    "committed_offset": _OFFSETS,
    "offset": _OFFSETS,
    "first_offset": _OFFSETS,
    "last_offset": _OFFSETS,
    "log_start_offset": _OFFSETS,
    # AddPartitionsToTxn v0-v3 names its transaction with these
    "v3_and_below_transactional_id": ("transactional_id",),
    "v3_and_below_producer_id": ("producer_id",),
    "v3_and_below_producer_epoch": ("producer_epoch",),
}
# Top-level error codes whose answer still issued something to build on: 0, and
# MEMBER_ID_REQUIRED (JoinGroup v4+ gives a new member its id that way, to join again with).
_BUILDS_ON = frozenset((0, 79))
# The names whose value in an answer makes the exchange a context (an identity issued).
IDENTITIES = frozenset(("member_id", "member_epoch", "generation_id", "producer_id",
                        "session_id"))
# Request names carried into a context: what the answer's identity belongs to.
_OWNERS = frozenset(("group_id", "transactional_id", "group_instance_id", "instance_id",
                     "member_id"))
# Epochs the client counts itself (FetchSession, ShareSession): the next one is due.
_COUNTED = ("session_epoch", "share_session_epoch")
_KEYS = IDENTITIES | frozenset(_COUNTED)


def _trivial(value: Any) -> bool:
    """Values the generator makes on its own (-1, 0, "", the zero uuid)."""
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return value in (-1, 0)
    if isinstance(value, str):
        return value == ""
    if isinstance(value, uuid.UUID):
        return value.int == 0
    return True  # bytes, floats, structs: not kept


def leaves(tree: Any) -> Iterator[tuple[str, Any]]:
    """(field name, value) of every int, string and uuid below ``tree`` (list elements
    under their list's name), depth first."""
    stack: list[tuple[str, Any]] = [("", tree)]
    while stack:
        name, node = stack.pop()
        if hasattr(node, "_fields"):
            stack.extend((f, getattr(node, f)) for f in reversed(node._fields))
        elif isinstance(node, list):
            stack.extend((name, v) for v in reversed(node))
        elif name and isinstance(node, (int, str, uuid.UUID)) and not isinstance(node, bool):
            yield name, node


def issued(answer: Any) -> list[tuple[str, Any]]:
    """What an answer issued worth drawing again: its non-trivial leaves, in order."""
    return [(n, v) for n, v in leaves(answer) if n not in _SKIPPED and not n.endswith("_ms")
            and not _trivial(v)]


@lru_cache(maxsize=None)
def request_names(spec: schema.ApiSpec) -> frozenset[str]:
    """Every field name an API's request has at any depth, in any version."""
    out: set[str] = set()
    todo, seen = [spec.root], set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for f in schema.fields_of(cls):
            out.add(f.attr)
            if f.struct is not None:
                todo.append(f.struct)
    return frozenset(out)


@lru_cache(maxsize=None)
def reachable(spec: schema.ApiSpec) -> frozenset[str]:
    """The answer names an API's request can take values of (its names and their
    aliases)."""
    names = request_names(spec)
    return names | frozenset(a for n in names for a in ALIASES.get(n, ()))


def _fits(value: Any, type_name: str) -> bool:
    if type_name in INT_BITS or type_name in UINT_BITS:
        if not isinstance(value, int):
            return False
        lo, hi = int_domain(type_name)
        return lo <= value <= hi
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "uuid":
        return isinstance(value, uuid.UUID)
    return False


@dataclass
class Dictionary:
    """The values the broker issued in this run, by field name, and the contexts."""

    values: dict[str, deque[Any]] = field(default_factory=dict)
    contexts: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=CONTEXTS))
    harvested: int = 0  # answers harvested
    prefix: str = "kproto-fuzz-"

    def harvest(self, request: Any, answer: Any) -> None:
        """Take what ``answer`` (decoded) issued; ``request`` (the tree sent, or None for a
        mutant whose bytes are not that tree) names what it belongs to."""
        if answer is None:
            return
        self.harvested += 1
        got = issued(answer)
        for name, value in got:
            pool = self.values.get(name)
            if pool is None:
                pool = self.values[name] = deque(maxlen=VALUES_PER_NAME)
            if value in pool:
                pool.remove(value)  # newest last
            pool.append(value)
        if request is None or getattr(answer, "error_code", 0) not in _BUILDS_ON:
            return
        # A context holds the answer's trivial values too (a new producer's epoch 0), but
        # only an identity the broker really issued (not a session id 0) makes one.
        context: dict[str, Any] = {}
        for name, value in leaves(answer):
            if name not in _SKIPPED and not name.endswith("_ms"):
                context.setdefault(name, value)
        keys = {n for n, _ in got if n in IDENTITIES}
        for name, value in leaves(request):
            if name in _OWNERS and not _trivial(value):
                context.setdefault(name, value)
            elif name in _COUNTED and isinstance(value, int) and value >= 0:
                if name == "session_epoch" and _trivial(context.get("session_id")):
                    continue  # a sessionless Fetch (a share session needs no id)
                context[name] = value + 1  # the epoch the session expects next
                keys.add(name)
        if keys:
            self.contexts.append(context)

    def value(self, name: str, type_name: str, rng: random.Random) -> Optional[Any]:
        """A harvested value for a request field ``name`` of schema type ``type_name``,
        or None."""
        pools = [self.values[n] for n in ALIASES.get(name, (name,)) if n in self.values]
        if not pools:
            return None
        value = rng.choice(rng.choice(pools))
        return value if _fits(value, type_name) else None

    def context(self, spec: schema.ApiSpec, rng: random.Random) -> Optional[dict[str, Any]]:
        """A context whose identity an API's request can carry, the newer more often."""
        names = reachable(spec)
        usable = [c for c in self.contexts
                  if any(k in names and not _trivial(c[k]) for k in _KEYS if k in c)]
        if not usable:
            return None
        weights = [1.0 + i for i in range(len(usable))]
        return rng.choices(usable, weights)[0]

    def issued_strings(self) -> frozenset[str]:
        """Member ids the broker issued for the fuzzer's own groups (enforce_prefix leaves
        them as they are: they name no resource of anyone else)."""
        return frozenset(c["member_id"] for c in self.contexts
                         if isinstance(c.get("member_id"), str) and
                         str(c.get("group_id", "")).startswith(self.prefix))

    @staticmethod
    def from_context(context: dict[str, Any], name: str, type_name: str) -> Optional[Any]:
        """The context's value for a request field (by its name or an alias), if it
        fits."""
        for n in (name,) + ALIASES.get(name, ()):
            if n in context and _fits(context[n], type_name):
                return context[n]
        return None


__all__ = ["Dictionary", "issued", "leaves", "request_names", "reachable", "ALIASES",
           "IDENTITIES"]
