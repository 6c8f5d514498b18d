"""Every field- and frame-level mutation strategy changes the valid request's bytes exactly
as its ``detail`` says (and nothing else), on requests of many APIs and versions."""

import random
import struct

import pytest

from kproto.errors import CorruptMessageError
from kproto.tools.fuzz import layout, mutators, schema
from kproto.tools.fuzz.values import ValueGenerator, every_version
from kproto.protocol.headers import decode_request_header
from kproto.protocol.primitives import read_tagged_fields, read_uvarint

APIS = ["Fetch", "Metadata", "JoinGroup", "OffsetFetch", "ListOffsets", "Produce",
        "ConsumerGroupHeartbeat", "OffsetCommit", "ApiVersions", "DescribeConfigs"]


def _cases():
    rng = random.Random(11)
    gen = ValueGenerator(rng)
    for name in APIS:
        spec = schema.api_by_name(name)
        for v in every_version(spec):
            yield mutators.make_case(spec, v, gen.request(spec, v), 1000 + v)


CASES = list(_cases())


def _body(case, mutant):
    """The mutant's body when its frame keeps the case's header and a true size prefix."""
    (size,) = struct.unpack_from(">i", mutant.wire)
    assert size == len(mutant.wire) - 4
    frame = mutant.wire[4:]
    assert frame[:len(case.header)] == case.header
    return frame[len(case.header):]


def _prefix_value(raw: bytes, compact: bool) -> int:
    if compact:
        n, _ = read_uvarint(memoryview(raw), 0)
        return n - 1
    return int.from_bytes(raw, "big", signed=True)


def check_int_out_of_domain(case, m):
    body, d = _body(case, m), m.detail
    assert d["new"] != d["old"] and len(d["new"]) == len(d["old"])
    assert body == case.body[:d["start"]] + bytes.fromhex(d["new"]) + case.body[d["end"]:]


def _check_prefix(case, m):
    body, d = _body(case, m), m.detail
    old, new = bytes.fromhex(d["old_prefix"]), bytes.fromhex(d["new_prefix"])
    assert body == case.body[:d["start"]] + new + case.body[d["start"] + len(old):]
    span = next(s for s in layout.spans(case.spec, case.version, case.body)
                if s.start == d["start"] and s.path == d["path"])
    assert _prefix_value(new, span.compact) == d["value"]
    assert d["value"] != _prefix_value(old, span.compact)
    return span


def check_count_lie(case, m):
    assert _check_prefix(case, m).kind == "array"


def check_length_lie(case, m):
    assert _check_prefix(case, m).kind in ("string", "bytes", "records")


def check_null_not_nullable(case, m):
    body, d = _body(case, m), m.detail
    assert body == case.body[:d["start"]] + bytes.fromhex(d["null"]) + case.body[d["end"]:]
    span = next(s for s in layout.spans(case.spec, case.version, case.body)
                if s.start == d["start"] and s.path == d["path"])
    assert not span.nullable and span.spec is not None
    if not span.path.endswith("]"):  # array elements are never nullable
        assert not span.spec.nullable_in(case.version)
    assert _prefix_value(bytes.fromhex(d["null"]), span.compact) == -1


def _section(body, start):
    found, end = read_tagged_fields(memoryview(body), start) if True else None
    return [(t, body[a:b]) for t, a, b in found], end


def check_unknown_tag(case, m):
    body, d = _body(case, m), m.detail
    entries, end = _section(body, d["start"])
    assert (d["tag"], bytes.fromhex(d["raw"])) in entries
    old, old_end = _section(case.body, d["start"])
    assert sorted(entries) == sorted(old + [(d["tag"], bytes.fromhex(d["raw"]))])
    assert body[end:] == case.body[old_end:] and body[:d["start"]] == case.body[:d["start"]]


def check_duplicate_tag(case, m):
    body, d = _body(case, m), m.detail
    count, pos = read_uvarint(memoryview(body), d["start"])
    tags = []
    for _ in range(count):
        tag, pos = read_uvarint(memoryview(body), pos)
        size, pos = read_uvarint(memoryview(body), pos)
        tags.append(tag)
        pos += size
    assert tags.count(d["tag"]) == 2
    assert body[pos:] == case.body[d["end"]:]
    with pytest.raises(CorruptMessageError):
        type(case.request).decode(body, case.version)


def check_foreign_field(case, m):
    body, d = _body(case, m), m.detail
    f = next(f for f in schema.fields_of(case.spec.root) if f.attr == d["field"])
    assert not f.present(case.version)
    inserted = bytes.fromhex(d["inserted"])
    if "tag" in d:
        entries, _ = _section(body, d["start"])
        assert (d["tag"], inserted) in entries
    else:
        assert body == case.body[:d["start"]] + inserted + case.body[d["start"]:]


def check_version_skew(case, m):
    body, w = _body(case, m), m.detail["body_version"]
    assert w != case.version
    assert type(case.request).decode(body, w) is not None
    assert body != case.body


def check_size_lie(case, m):
    (size,) = struct.unpack_from(">i", m.wire)
    d = m.detail
    assert m.wire[4:] == case.frame and size == d["size"] != len(case.frame)
    assert {"short": 0 <= size < len(case.frame), "long": size > len(case.frame),
            "negative": size < 0, "huge": size >= 100 << 20}[d["kind"]]


def check_truncate(case, m):
    body, cut = _body(case, m), m.detail["cut"]
    assert body == case.body[:cut] and cut < len(case.body)
    assert cut in layout.boundaries(layout.spans(case.spec, case.version, case.body))


def check_trailing(case, m):
    assert _body(case, m) == case.body + bytes.fromhex(m.detail["extra"])


def check_bitflip(case, m):
    frame = m.wire[4:]
    assert len(frame) == len(case.frame) and struct.unpack_from(">i", m.wire)[0] == len(frame)
    diff = [i * 8 + b for i, (x, y) in enumerate(zip(frame, case.frame)) for b in range(8)
            if (x ^ y) & (0x80 >> b)]
    assert diff == m.detail["bits"]


def check_header_version(case, m):
    hv = m.detail["header_version"]
    assert hv != case.header_version
    frame = m.wire[4:]
    key, version, cid, _, pos = decode_request_header(frame, hv)
    assert (key, version, cid) == (case.spec.api_key, case.version, case.correlation_id)
    assert frame[pos:] == case.body and pos == m.detail["header_len"]


def check_correlation_id(case, m):
    frame = m.wire[4:]
    assert frame[:4] == case.frame[:4] and frame[8:] == case.frame[8:]
    assert struct.unpack_from(">i", frame, 4)[0] == m.detail["correlation_id"]


def check_unknown_api(case, m):
    frame = m.wire[4:]
    assert struct.unpack_from(">hh", frame) == (m.detail["api_key"], m.detail["api_version"])
    assert frame[4:] == case.frame[4:]
    key, version = m.detail["api_key"], m.detail["api_version"]
    assert key != case.spec.api_key or not (case.spec.min_version <= version
                                            <= case.spec.max_version)


CHECKS = {name: globals()["check_" + name.split(".", 1)[1]] for name in mutators.STRATEGIES}


def test_every_strategy_has_a_check():
    assert set(CHECKS) == set(mutators.STRATEGIES)


@pytest.mark.parametrize("name", sorted(mutators.STRATEGIES))
def test_strategy_changes_bytes_as_it_says(name):
    rng = random.Random(name)
    applied = 0
    for case in CASES:
        for _ in range(3):
            m = mutators.STRATEGIES[name](case, rng)
            if m is None:
                continue
            assert m.strategy == name and m.wire != case.wire
            CHECKS[name](case, m)
            applied += 1
    assert applied >= 20  # the strategy applies to most requests


def test_truncation_reaches_every_field_boundary():
    case = next(c for c in CASES if c.spec.api_name == "Fetch" and c.version == 12)
    cuts = [b for b in layout.boundaries(layout.spans(case.spec, 12, case.body))
            if b < len(case.body)]
    for cut in cuts:
        check_truncate(case, mutators.truncate(case, random.Random(0), cut=cut))
    assert len(cuts) > 5
