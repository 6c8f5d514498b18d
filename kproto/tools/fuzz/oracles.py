"""Oracles: when an exchange with the broker is a finding, and under which name.

Owns the verdicts on one exchange (what was sent, whether it was a valid request, what came
back) as data, without sockets: ``decode`` (an answer kproto's strict decoder refuses for the
version asked), ``header`` (correlation id or response header that does not match),
``unknown_server_error`` (error code -1 anywhere in the answer), ``content`` (an answer that
contradicts the request: topics or partitions not asked for, or missing), ``closed_on_valid``
and ``hang`` (a valid request the broker drops or never answers while it answers others). A
malformed request that the broker refuses cleanly (closes, or answers an error) is not a
finding. ``broker_log`` is what the broker logged (ERROR, or a stack trace) while the request
was in flight (:mod:`kproto.tools.fuzz.brokerlog` reads the file). ``dead`` and ``rss`` come from
the runner's probes; their verdicts are built here too so that every finding has one shape.
"""

from __future__ import annotations

import re
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from kproto.errors import CorruptMessageError, KafkaError
from kproto.tools.fuzz import schema
from kproto.tools.fuzz.brokerlog import LogEntry
from kproto.protocol.headers import decode_response_header

ORACLES = ("dead", "hang", "decode", "header", "content", "unknown_server_error", "rss",
           "closed_on_valid", "broker_log")

# Outcomes of sending one request.
ANSWER, CLOSED, TIMEOUT, NOT_EXPECTED = "answer", "closed", "timeout", "not_expected"


@dataclass
class Exchange:
    """One request sent and what came of it."""

    wire: bytes                    # exactly what was sent (size prefix included)
    valid: bool                    # a request the schema allows (unmutated)
    outcome: str                   # ANSWER, CLOSED, TIMEOUT, NOT_EXPECTED
    response: Optional[bytes] = None  # the answer frame (size prefix removed)
    request: Any = None            # the request object when valid
    strategy: str = "valid"
    elapsed: float = 0.0

    @property
    def api_key(self) -> Optional[int]:
        return struct.unpack_from(">h", self.wire, 4)[0] if len(self.wire) >= 8 else None

    @property
    def api_version(self) -> Optional[int]:
        return struct.unpack_from(">h", self.wire, 6)[0] if len(self.wire) >= 8 else None

    @property
    def correlation_id(self) -> Optional[int]:
        return struct.unpack_from(">i", self.wire, 8)[0] if len(self.wire) >= 12 else None


@dataclass
class Verdict:
    oracle: str
    signature: str   # what makes two findings the same bug (with API, version, oracle)
    message: str
    extra: dict[str, Any] = field(default_factory=dict)


def _spec_for(ex: Exchange) -> Optional[schema.ApiSpec]:
    key, version = ex.api_key, ex.api_version
    if key is None or key not in schema.apis():
        return None
    spec = schema.api(key)
    if version is None or not spec.min_version <= version <= spec.max_version:
        return None
    return spec


ZERO_UUID = uuid.UUID(int=0)
_NUMBERS = re.compile(r"-?\d+")


def shape(text: str) -> str:
    """A message with its numbers masked: one signature for 'offset 12' and 'offset 40'."""
    return _NUMBERS.sub("N", text)


def decode_answer(ex: Exchange) -> tuple[Optional[Any], list[Verdict]]:
    """The decoded answer (None when undecodable) and the header/decode verdicts."""
    spec = _spec_for(ex)
    if ex.outcome != ANSWER or ex.response is None or spec is None:
        return None, []
    version = ex.api_version
    assert version is not None
    hv = spec.response_header_version(version)
    try:
        cid, pos = decode_response_header(ex.response, hv)
    except KafkaError as exc:
        return None, [Verdict("header", "header v{} undecodable".format(hv),
                              "response header v{}: {}".format(hv, exc))]
    out: list[Verdict] = []
    if cid != ex.correlation_id:
        out.append(Verdict("header", "correlation id differs",
                           "sent correlation id {}, answer has {}".format(ex.correlation_id,
                                                                          cid)))
        return None, out
    try:
        answer = schema.response_class(spec).decode(memoryview(ex.response)[pos:], version)
    except CorruptMessageError as exc:
        if not ex.valid and spec.api_key == 18:
            return None, out  # ApiVersions answers an unsupported version in v0: allowed
        reason = str(exc).split(" (")[0]  # without the "(api vN, at byte N)" location
        out.append(Verdict("decode", shape(reason),
                           "{} v{} answer of {} bytes: {}".format(
                               spec.name[:-7] + "Response", version,
                               len(ex.response) - pos, exc),
                           {"body_len": len(ex.response) - pos}))
        return None, out
    return answer, out


def _error_paths(obj: Any, path: str = "") -> list[str]:
    found = []
    for name in getattr(obj, "_fields", ()):
        value = getattr(obj, name)
        if name == "error_code" and value == -1:
            found.append(path + name)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if hasattr(item, "_fields"):
                    found += _error_paths(item, "{}{}[].".format(path, name))
        elif hasattr(value, "_fields"):
            found += _error_paths(value, path + name + ".")
    return sorted(set(found))


# api key -> (request list, request topic attrs, request partitions, request partition attr,
#             response list, response topic attrs, response partitions, response partition)
CONTENT: dict[int, tuple[str, tuple[str, ...], str, Optional[str], str, tuple[str, ...], str, str]] = {
    0: ("topic_data", ("name", "topic_id"), "partition_data", "index",
        "responses", ("name", "topic_id"), "partition_responses", "index"),
    1: ("topics", ("topic", "topic_id"), "partitions", "partition",
        "responses", ("topic", "topic_id"), "partitions", "partition_index"),
    2: ("topics", ("name",), "partitions", "partition_index",
        "topics", ("name",), "partitions", "partition_index"),
    8: ("topics", ("name", "topic_id"), "partitions", "partition_index",
        "topics", ("name", "topic_id"), "partitions", "partition_index"),
    9: ("topics", ("name",), "partition_indexes", None,
        "topics", ("name",), "partitions", "partition_index"),
    23: ("topics", ("topic",), "partitions", "partition",
         "topics", ("topic",), "partitions", "partition"),
}


def _pairs(obj: Any, lst: str, tattrs: tuple[str, ...], parts: str, pattr: Optional[str]
           ) -> Optional[list[tuple[tuple[str, ...], Any]]]:
    topics = getattr(obj, lst, None)
    if topics is None:
        return None
    out = []
    for t in topics:
        key = tuple(str(getattr(t, a, "")) for a in tattrs)
        for p in getattr(t, parts) or []:
            out.append((key, p if pattr is None else getattr(p, pattr)))
    return out


def _skip_content(key: int, version: int, request: Any, answer: Any) -> bool:
    if getattr(answer, "error_code", 0) not in (0, None):
        return True
    if key == 1 and (version >= 7 and (request.session_epoch > 0 or request.session_id != 0)):
        return True  # incremental fetch sessions answer only what changed
    if key == 9 and version >= 8:
        return True
    return False


def content(ex: Exchange, answer: Any) -> list[Verdict]:
    """Topics/partitions answered that were not asked for, or asked for and missing."""
    key, version, request = ex.api_key, ex.api_version, ex.request
    if not ex.valid or answer is None or request is None:
        return []
    if key == 3:
        asked = request.topics
        if not asked:
            return []  # all topics (v0: an empty list too)
        ids = [getattr(t, "topic_id", None) not in (None, ZERO_UUID) for t in asked]
        if all(ids):
            # Asked by id: Kafka describes each id once, under the name the id has (a
            # request naming one topic and giving another's id gets the id's topic).
            return _compare([t.topic_id for t in asked], [t.topic_id for t in answer.topics],
                            "topic ids")
        if any(ids) or any(t.name is None for t in asked):
            return []  # names and ids mixed: which one the broker goes by is its choice
        return _compare([t.name for t in asked], [t.name for t in answer.topics], "topics")
    spec = CONTENT.get(key)  # type: ignore[arg-type]
    if spec is None or _skip_content(key, version, request, answer):  # type: ignore[arg-type]
        return []
    asked = _pairs(request, *spec[:4])
    answered = _pairs(answer, *spec[4:])
    if asked is None or answered is None:
        return []
    return _compare(asked, answered, "partitions")


def _compare(want: list[Any], got: list[Any], what: str) -> list[Verdict]:
    """Answers naming what the request never named, and names asked for that no answer
    names. A name asked for twice may be answered once (Kafka folds a Produce's duplicate
    partitions into one) or twice: neither is a finding."""
    out = []
    extra, missing = set(got) - set(want), set(want) - set(got)
    if extra:
        out.append(Verdict("content", "{} not asked for".format(what),
                           "answer has {} not asked for: {}".format(what, sorted(extra)[:5])))
    if missing:
        out.append(Verdict("content", "{} missing".format(what),
                           "answer lacks {}: {}".format(what, sorted(missing)[:5])))
    return out


def pair(asked: list[Any], answered: list[Any]) -> list[tuple[int, int]]:
    """(request index, answer index) of the answers that belong to each entry of a request.

    The schemas are positional: the n-th time a request names a key (a topic partition) is
    answered by the n-th answer naming it, so a duplicate keeps its own answer (ListOffsets
    asking EARLIEST and LATEST of one partition gets two offsets, in that order). A key the
    answer names a different number of times than the request is ambiguous and left out."""
    want: dict[Any, list[int]] = {}
    got: dict[Any, list[int]] = {}
    for i, key in enumerate(asked):
        want.setdefault(key, []).append(i)
    for j, key in enumerate(answered):
        got.setdefault(key, []).append(j)
    out: list[tuple[int, int]] = []
    for key, indexes in want.items():
        answers = got.get(key, [])
        if len(answers) == len(indexes):
            out += zip(indexes, answers)
    return sorted(out)


def error_codes(obj: Any) -> list[int]:
    """Every error code in a decoded answer."""
    found = []
    for name in getattr(obj, "_fields", ()):
        value = getattr(obj, name)
        if name.endswith("error_code") and isinstance(value, int):
            found.append(value)
        elif isinstance(value, list):
            for item in value:
                if hasattr(item, "_fields"):
                    found += error_codes(item)
        elif hasattr(value, "_fields"):
            found += error_codes(value)
    return found


def accepted(answer: Any) -> bool:
    """An answer that says yes everywhere it could say no (what a sequence's semantic
    check calls accepting what the protocol forbids)."""
    codes = error_codes(answer) if answer is not None else []
    return bool(codes) and all(c == 0 for c in codes)


def no_answer_expected(api_key: Optional[int], request: Any) -> bool:
    """Produce with acks=0: the broker answers nothing, and closing the connection is how
    Kafka reports an error to such a producer."""
    return api_key == 0 and request is not None and getattr(request, "acks", None) == 0


def evaluate(ex: Exchange) -> tuple[Optional[Any], list[Verdict]]:
    """Every verdict on one exchange that needs no further request (probes are the
    runner's), and the decoded answer when there is one."""
    out: list[Verdict] = []
    if ex.outcome == CLOSED and ex.valid and not no_answer_expected(ex.api_key, ex.request):
        out.append(Verdict("closed_on_valid", "closed",
                           "the broker closed the connection on a valid request"))
    answer, verdicts = decode_answer(ex)
    out += verdicts
    if answer is not None:
        paths = _error_paths(answer)
        if paths:
            out.append(Verdict("unknown_server_error", ",".join(paths),
                               "UNKNOWN_SERVER_ERROR at {}".format(", ".join(paths))))
        out += content(ex, answer)
    return answer, out


def latest_offsets(ex: Exchange, answer: Any) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of every LATEST (-1) answer of a valid ListOffsets v1+
    that reads uncommitted data (READ_COMMITTED's LATEST is the last stable offset, below
    the high watermark while a transaction is open), each answer matched to its own
    request entry by position (:func:`pair`)."""
    if ex.api_key != 2 or not ex.valid or answer is None or (ex.api_version or 0) < 1:
        return []
    if getattr(ex.request, "isolation_level", 0) != 0:
        return []
    asked = [(t.name, p.partition_index, p.timestamp) for t in ex.request.topics
             for p in t.partitions]
    answered = [(t.name, p.partition_index, p.error_code, p.offset) for t in answer.topics
                for p in t.partitions]
    out = []
    for i, j in pair([a[:2] for a in asked], [a[:2] for a in answered]):
        topic, partition, error_code, offset = answered[j]
        if asked[i][2] == -1 and error_code == 0 and offset >= 0:
            out.append((topic, partition, offset))
    return out


def latest_below_high_watermark(topic: str, partition: int, latest: int,
                                high_watermark: int) -> Optional[Verdict]:
    if latest < high_watermark:
        return Verdict("content", "ListOffsets LATEST below high watermark",
                       "ListOffsets LATEST of {}-{} = {} but Fetch says high watermark {}"
                       .format(topic, partition, latest, high_watermark),
                       {"topic": topic, "partition": partition})
    return None


def with_broker_log(ex: Exchange, verdicts: list[Verdict], logged: list[LogEntry]
                    ) -> list[Verdict]:
    """The verdicts on an exchange with what the broker logged while it was in flight:
    every entry worth a finding (but a malformed request's clean refusal) is attached to
    each verdict; one an UNKNOWN_SERVER_ERROR answer came with joins that verdict's
    signature (the same error code from two exceptions is two bugs); any other is a
    ``broker_log`` verdict of its own, signed by the log line."""
    relevant = [e for e in logged if e.worth_a_finding and
                (ex.valid or not e.is_refusal_of_malformed_request())]
    if not relevant:
        return verdicts
    text = "\n".join(e.text for e in relevant)[:8192]
    for v in verdicts:
        v.extra["broker_log"] = text
    use = [v for v in verdicts if v.oracle == "unknown_server_error"]
    seen: set[str] = set()
    for e in relevant:
        # one verdict per cause: Kafka logs one exception twice ("Closing socket for",
        # "Exception while processing request from")
        cause = e.signature.partition(" | ")[2] or e.signature
        if cause in seen:
            continue
        seen.add(cause)
        if use:
            use[0].signature += " | " + e.signature
            use[0].message += "; the broker logged: " + e.message[:200]
            use = []  # the first entry only: later ones may be another request's
        else:
            verdicts.append(Verdict("broker_log", e.signature, "the broker logged {}: {}"
                                    .format(e.level, e.message[:300]),
                                    {"broker_log": e.text}))
    return verdicts


def hang(bound: float) -> Verdict:
    return Verdict("hang", "no answer", "no answer within {:.1f} s while the broker answers "
                   "a fresh connection".format(bound))


def dead(detail: str) -> Verdict:
    return Verdict("dead", "unreachable", "the broker stopped accepting connections: " + detail)


def rss(start_kb: int, now_kb: int, bound_kb: int) -> Verdict:
    return Verdict("rss", "rss growth", "broker RSS grew from {} kB to {} kB (bound {} kB)"
                   .format(start_kb, now_kb, bound_kb))


__all__ = ["Exchange", "Verdict", "evaluate", "shape", "no_answer_expected", "decode_answer",
           "content", "pair", "error_codes", "accepted", "with_broker_log", "latest_offsets", "latest_below_high_watermark", "hang", "dead", "rss",
           "ORACLES", "ANSWER", "CLOSED", "TIMEOUT", "NOT_EXPECTED"]
