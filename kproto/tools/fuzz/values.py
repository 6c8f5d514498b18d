"""Valid requests drawn from the schema: one value per field the version carries.

Owns the choice of values: per type (ints at their edges and at random, strings and bytes of
chosen lengths, null where the version allows it, uuids, nested arrays with chosen counts,
tagged fields present or absent, record batches built by ``kproto.records`` in every magic
and available codec) and, by field name, realistic values learned from the broker (topic
names, ids and partitions that exist; group ids under the fuzzer's prefix) so that requests
get past the broker's first lookup; and values the broker issued in earlier answers
(:class:`~kproto.tools.fuzz.dictionary.Dictionary`: member ids and epochs, producer ids,
fetch sessions, acquired offsets), a whole context of them at once (the group, member and
generation of one JoinGroup answer) for half the requests that can carry one, so that
requests get past the broker's second check too (the member and its epoch). Waits and
timeouts stay short so that a request never legitimately outlives the hang bound.
Everything comes from one ``random.Random``: a seed replays a run.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from kproto import codecs
from kproto.tools.fuzz import schema
from kproto.tools.fuzz.schema import ApiSpec, FieldSpec
from kproto.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kproto.records import build_batch, build_message_set

if TYPE_CHECKING:
    from kproto.tools.fuzz.dictionary import Dictionary

INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
UINT_BITS = {"uint16": 16, "uint32": 32}
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789._-"
_UNICODE = "é€𝄞ß中"
MAX_WAIT_MS = 100  # waits/timeouts the generator writes (the hang bound is far above)
CONTEXT_SHARE = 0.5   # of the requests that can carry a harvested context, those that do
CONTEXT_TAKEN = 0.9   # of a context's fields, those given its value (the rest: anything)
ANSWER_SHARE = 0.3    # of the realistic draws, those from the harvested values


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: list[int]


@dataclass
class Knowledge:
    """What the broker told us (Metadata), and what the fuzzer may name."""

    topics: list[TopicInfo] = field(default_factory=list)
    node_ids: list[int] = field(default_factory=list)
    prefix: str = "kproto-fuzz-"
    groups: list[str] = field(default_factory=list)

    def group(self, rng: random.Random) -> str:
        if self.groups and rng.random() < 0.7:
            return rng.choice(self.groups)
        return "{}g{}".format(self.prefix, rng.randrange(4))


def int_edges(type_name: str) -> list[int]:
    if type_name in INT_BITS:
        b = INT_BITS[type_name]
        lo, hi = -(1 << (b - 1)), (1 << (b - 1)) - 1
        return [lo, lo + 1, -2, -1, 0, 1, 2, hi - 1, hi]
    b = UINT_BITS[type_name]
    return [0, 1, (1 << (b - 1)), (1 << b) - 2, (1 << b) - 1]


def int_domain(type_name: str) -> tuple[int, int]:
    if type_name in INT_BITS:
        b = INT_BITS[type_name]
        return -(1 << (b - 1)), (1 << (b - 1)) - 1
    return 0, (1 << UINT_BITS[type_name]) - 1


def is_wait(attr: str) -> bool:
    """A field that makes the broker wait (or bounds a wait): its value is kept short."""
    return attr.endswith("_ms") and ("wait" in attr or "timeout" in attr or "interval" in attr
                                     or "delay" in attr)


class ValueGenerator:
    """Draws valid request objects; ``coverage`` counts (API, struct.field, kind) drawn."""

    def __init__(self, rng: random.Random, knowledge: Optional[Knowledge] = None,
                 *, max_depth: int = 4, dictionary: Optional["Dictionary"] = None) -> None:
        self.rng = rng
        self.knowledge = knowledge or Knowledge()
        self.dictionary = dictionary  # the broker's answers' values (None: not drawn)
        self._context: Optional[dict[str, Any]] = None
        self.max_depth = max_depth
        self.coverage: Counter[tuple[str, str, str]] = Counter()
        self._realism = 0.7
        self._api = ""
        self._magics = [m for m in (0, 1, 2)]
        self._codecs = [c for c in codecs.CODEC_NAMES if codecs.is_available(c)]

    # --- entry point ---------------------------------------------------------------

    def request(self, spec: ApiSpec, version: int, *, realism: Optional[float] = None) -> Any:
        """A request of ``spec`` at ``version`` that the version can encode."""
        self._realism = self.rng.choice((0.9, 0.7, 0.3)) if realism is None else realism
        self._api = spec.api_name
        self._spec = spec
        self._version = version
        self._topic: Optional[TopicInfo] = None
        self._context = None
        if self.dictionary is not None and self.rng.random() < CONTEXT_SHARE:
            self._context = self.dictionary.context(spec, self.rng)
        return self._struct(spec.root, 0)

    # --- structs and fields ----------------------------------------------------------

    def _struct(self, class_name: str, depth: int) -> Any:
        cls = schema.struct_class(self._spec, class_name)
        obj = cls()
        for f in schema.fields_of(class_name):
            if not f.present(self._version):
                continue
            if f.tagged_in(self._version) and self.rng.random() < 0.5:
                self._cover(class_name, f, "tag_absent")
                continue  # the default: the encoder leaves the tag out
            setattr(obj, f.attr, self._field(class_name, f, depth))
        return obj

    def _field(self, owner: str, f: FieldSpec, depth: int) -> Any:
        rng = self.rng
        if f.nullable_in(self._version) and rng.random() < 0.12:
            self._cover(owner, f, "null")
            return None
        if f.is_array:
            count = self._count(depth)
            self._cover(owner, f, "count{}".format(min(count, 2)))
            if f.struct is not None:
                if depth >= self.max_depth:
                    return []
                return [self._struct(f.struct, depth + 1) for _ in range(count)]
            return [self._scalar(owner, f, f.base_type) for _ in range(count)]
        if f.struct is not None:
            if depth >= self.max_depth:
                return schema.struct_class(self._spec, f.struct)()
            return self._struct(f.struct, depth + 1)
        return self._scalar(owner, f, f.type)

    def _count(self, depth: int) -> int:
        r = self.rng.random()
        if depth >= 2:
            return 0 if r < 0.3 else 1
        return 0 if r < 0.15 else 1 if r < 0.7 else self.rng.randint(2, 3)

    def _cover(self, owner: str, f: FieldSpec, kind: str) -> None:
        self.coverage[(self._api, "{}.{}".format(owner, f.attr), kind)] += 1

    # --- scalars ---------------------------------------------------------------------

    def _scalar(self, owner: str, f: FieldSpec, type_name: str) -> Any:
        dictionary = self.dictionary
        if self._context is not None and dictionary is not None and \
                self.rng.random() < CONTEXT_TAKEN:
            value = dictionary.from_context(self._context, f.attr, type_name)
            if value is not None:
                self._cover(owner, f, "answer_context")
                return value
        if self.rng.random() < self._realism:
            if dictionary is not None and self.rng.random() < ANSWER_SHARE:
                value = dictionary.value(f.attr, type_name, self.rng)
                if value is not None:
                    self._cover(owner, f, "answer_value")
                    return value
            value = self._realistic(owner, f, type_name)
            if value is not None:
                self._cover(owner, f, "realistic")
                return value
        self._cover(owner, f, "edge_or_random")
        return self._typed(f, type_name)

    def _typed(self, f: FieldSpec, type_name: str) -> Any:
        rng = self.rng
        if type_name in INT_BITS or type_name in UINT_BITS:
            if is_wait(f.attr):
                return rng.choice((0, 1, rng.randrange(MAX_WAIT_MS)))
            if rng.random() < 0.5:
                return rng.choice(int_edges(type_name))
            lo, hi = int_domain(type_name)
            return rng.randint(lo, hi)
        if type_name == "bool":
            return rng.random() < 0.5
        if type_name == "float64":
            return rng.choice((0.0, -1.0, 1.5, 1e308, -1e-308, rng.uniform(-1e6, 1e6)))
        if type_name == "string":
            return self._text(rng.choice((0, 1, rng.randint(2, 16), 255)))
        if type_name == "bytes":
            return rng.randbytes(rng.choice((0, 1, rng.randint(2, 32), 1000)))
        if type_name == "uuid":
            return rng.choice((uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128)),
                               uuid.UUID(int=1)))
        if type_name == "records":
            return self.records()
        raise AssertionError(type_name)

    def _text(self, n: int) -> str:
        alphabet = _ALPHABET + (_UNICODE if self.rng.random() < 0.2 else "")
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def _realistic(self, owner: str, f: FieldSpec, type_name: str) -> Any:
        rng, know, attr = self.rng, self.knowledge, f.attr
        topics = know.topics
        if type_name == "string":
            if attr in ("topic", "topic_name") or (attr == "name" and "Topic" in owner):
                if topics and rng.random() < 0.85:
                    self._topic = rng.choice(topics)
                    return self._topic.name
                return know.prefix + "t" + str(rng.randrange(3))
            if attr in ("group_id", "group") or (attr == "key" and "Coordinator" in owner):
                return know.group(rng)
            if attr in ("member_id", "group_instance_id", "transactional_id"):
                return "" if rng.random() < 0.5 else know.prefix + "m" + str(rng.randrange(3))
            if attr == "client_id" or attr.endswith("rack") or attr == "rack_id":
                return know.prefix + "c"
            if attr in ("protocol_type",):
                return "consumer"
            if attr in ("protocol_name", "assignor", "server_assignor") or (
                    attr == "name" and "Protocol" in owner):
                return rng.choice(("range", "roundrobin", "uniform", "cooperative-sticky"))
            return None
        if type_name == "uuid" and attr == "topic_id" and topics:
            self._topic = rng.choice(topics)
            return self._topic.topic_id
        if type_name in INT_BITS:
            if attr in ("partition", "partition_index", "partition_id"):
                parts = self._topic.partitions if self._topic else [0]
                return rng.choice(parts or [0])
            if attr in ("partition_indexes", "partitions"):
                parts = self._topic.partitions if self._topic else [0]
                return rng.choice(parts or [0])
            if is_wait(attr):
                if "session_timeout" in attr:
                    return rng.choice((6000, 10000, 45000))
                return rng.choice((0, 10, 100, MAX_WAIT_MS))
            if attr in ("replica_id", "broker_id") :
                return -1
            if attr in ("max_bytes", "partition_max_bytes", "min_bytes"):
                return rng.choice((1, 1024, 1 << 20))
            if attr in ("timestamp",):
                # LATEST and EARLIEST most, the newer specials (-3..-5) and a time less
                return rng.choice((-1, -1, -1, -2, -2, -3, -4, -5, int(time.time() * 1000)))
            if attr in ("generation_id", "member_epoch", "session_epoch", "leader_epoch",
                        "current_leader_epoch", "producer_epoch", "epoch"):
                return rng.choice((-1, 0, 1))
            if attr in ("producer_id",):
                return -1
            if attr in ("acks",):
                return rng.choice((-1, 1))  # acks=0 gets no answer: never drawn
            if attr in ("fetch_offset", "committed_offset", "offset", "log_start_offset"):
                return rng.choice((0, 1, -1))
            if attr in ("isolation_level",):
                return rng.choice((0, 1))
            if attr in ("session_id",):
                return 0
            if attr in ("node_id", "leader_id") and know.node_ids:
                return rng.choice(know.node_ids)
        if type_name == "records":
            return self.records()
        if type_name == "bytes" and (
                (attr == "metadata" and "JoinGroup" in owner) or
                (attr == "assignment" and "SyncGroup" in owner)):
            return self._consumer_protocol(attr == "metadata")
        return None

    def _producer(self) -> dict[str, Any]:
        """An idempotent or transactional batch's producer fields, from a producer id and
        epoch an InitProducerId answer issued (the context's, else any harvested), half
        the time; none (a plain batch) otherwise."""
        rng, ctx, dictionary = self.rng, self._context or {}, self.dictionary
        if dictionary is None or rng.random() < 0.5:
            return {}
        pid, epoch = ctx.get("producer_id"), ctx.get("producer_epoch")
        if not isinstance(pid, int) or not isinstance(epoch, int):
            pid = dictionary.value("producer_id", "int64", rng)
            epoch = dictionary.value("producer_epoch", "int16", rng)
        if pid is None:
            return {}
        return {"producer_id": pid, "producer_epoch": epoch if epoch is not None else 0,
                "base_sequence": rng.choice((0, 0, 1, 5, rng.randrange(1 << 31))),
                "is_transactional": "transactional_id" in ctx and rng.random() < 0.7}

    def _consumer_protocol(self, subscription: bool) -> bytes:
        """The "consumer" protocol's embedded bytes (an int16 version, then the body), as
        JoinGroup metadata or a SyncGroup assignment carry them, naming known topics."""
        rng = self.rng
        names = [t.name for t in self.knowledge.topics[:3]] or [self.knowledge.prefix + "t0"]
        version = rng.randint(0, 3)
        if subscription:
            body = ConsumerProtocolSubscription(topics=names).encode(version)
        else:
            body = ConsumerProtocolAssignment(assigned_partitions=[
                ConsumerProtocolAssignment.TopicPartition(topic=n, partitions=[0])
                for n in names]).encode(version)
        return version.to_bytes(2, "big") + body

    # --- record batches ----------------------------------------------------------------

    def records(self) -> bytes:
        """A record batch (magic 2, any available codec) or a legacy message set."""
        rng = self.rng
        n = rng.choice((0, 1, 1, 2, 3, 5))
        now = int(time.time() * 1000)
        recs = [(None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 8)),
                 None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 32)))
                for _ in range(n)]
        magic = rng.choice((0, 1, 2, 2, 2))
        if magic == 2:
            codec = rng.choice(self._codecs)
            self.coverage[(self._api, "records", "magic2:" + codecs.CODEC_NAMES[codec])] += 1
            return build_batch([(k, v, [("h", b"1")] if rng.random() < 0.3 else [], now)
                                for k, v in recs] or [(None, b"")], compression_type=codec,
                               **self._producer())
        codec = rng.choice([c for c in self._codecs if c != codecs.ZSTD])
        self.coverage[(self._api, "records",
                       "magic{}:{}".format(magic, codecs.CODEC_NAMES[codec]))] += 1
        return build_message_set([(k, v, now) for k, v in recs] or [(None, b"")],
                                 magic=magic, compression_type=codec)


def every_version(spec: ApiSpec, advertised: Optional[tuple[int, int]] = None) -> range:
    lo, hi = spec.min_version, spec.max_version
    if advertised is not None:
        lo, hi = max(lo, advertised[0]), min(hi, advertised[1])
    return range(lo, hi + 1)


__all__ = ["ValueGenerator", "Knowledge", "TopicInfo", "int_edges", "int_domain",
           "every_version", "is_wait", "MAX_WAIT_MS"]
