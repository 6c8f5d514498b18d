"""Field- and frame-level mutation strategies: almost-valid requests, each named.

Owns :class:`Case` (a valid request: API, version, header and body bytes) and the strategies
that turn one into a :class:`Mutant` (the exact bytes to send, size prefix included, and
``detail`` saying what was changed and where, so that a test can check that the bytes differ
from the valid request in exactly that way). Field strategies rewrite spans found by
:mod:`kproto.tools.fuzz.layout` and keep the frame's size prefix true; frame strategies attack the
size prefix, the header and the frame as a whole. Sequence strategies live in
:mod:`kproto.tools.fuzz.sequences` (they need the broker's answers).
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from kproto.errors import KafkaError
from kproto.tools.fuzz import layout, schema
from kproto.tools.fuzz.schema import ApiSpec
from kproto.tools.fuzz.values import int_edges
from kproto.protocol.headers import decode_request_header, encode_request_header
from kproto.protocol.primitives import read_tagged_fields, write_uvarint

CLIENT_ID = "kproto-fuzz"
_I32 = struct.Struct(">i")


@dataclass
class Case:
    """A valid request ready to send (``wire`` = size prefix + header + body)."""

    spec: ApiSpec
    version: int
    request: Any
    body: bytes
    correlation_id: int
    client_id: Optional[str] = CLIENT_ID

    @property
    def header_version(self) -> int:
        return self.spec.request_header_version(self.version)

    @property
    def header(self) -> bytes:
        return encode_request_header(self.spec.api_key, self.version, self.correlation_id,
                                     self.client_id, self.header_version)

    @property
    def frame(self) -> bytes:
        return self.header + self.body

    @property
    def wire(self) -> bytes:
        return frame_wire(self.frame)


def frame_wire(frame: bytes) -> bytes:
    return _I32.pack(len(frame)) + frame


def make_case(spec: ApiSpec, version: int, request: Any, correlation_id: int,
              client_id: Optional[str] = CLIENT_ID) -> Case:
    return Case(spec, version, request, request.encode(version), correlation_id, client_id)


def case_of(wire: bytes) -> Optional[Case]:
    """The valid request a frame holds (size prefix included and true, a header and a body
    of a version the schema knows, decoded to their last byte), else None."""
    if len(wire) < 12 or _I32.unpack_from(wire)[0] != len(wire) - 4:
        return None
    key, version = struct.unpack_from(">hh", wire, 4)
    if key not in schema.apis():
        return None
    spec = schema.api(key)
    if not spec.min_version <= version <= spec.max_version:
        return None
    try:
        _, _, cid, client_id, pos = decode_request_header(
            memoryview(wire)[4:], spec.request_header_version(version))
        body = wire[4 + pos:]
        request = schema.class_of(spec.module, spec.root).decode(body, version)
    except KafkaError:
        return None
    return Case(spec, version, request, body, cid, client_id)


@dataclass
class Mutant:
    """Bytes to send in place of a valid request, and what was done to them."""

    strategy: str
    level: str           # field, frame (sequence mutants come from sequences.py)
    wire: bytes          # exactly what goes on the socket (size prefix included)
    note: str
    detail: dict[str, Any] = field(default_factory=dict)
    expects_answer: bool = True  # False when the broker is right to wait (size too long)


def _field_mutant(case: Case, strategy: str, body: bytes, note: str, **detail: Any) -> Mutant:
    detail.setdefault("header_len", len(case.header))
    return Mutant(strategy, "field", frame_wire(case.header + body), note, detail)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    write_uvarint(out, n)
    return bytes(out)


def _prefix_bytes(compact: bool, width: int, n: int) -> bytes:
    """A length/count prefix saying ``n`` (-1: null)."""
    if compact:
        return _uvarint(n + 1 if n >= -1 else 0)
    return n.to_bytes(width, "big", signed=True)


def _spans(case: Case) -> list[layout.Span]:
    return layout.spans(case.spec, case.version, case.body)


# --- field level -------------------------------------------------------------------

def int_out_of_domain(case: Case, rng: random.Random) -> Optional[Mutant]:
    """An int/bool field set to an edge value the field never means (bool 2..255)."""
    cands = [s for s in _spans(case) if s.kind in layout.FIXED_SIZES and s.kind not in
             ("uuid", "float64")]
    if not cands:
        return None
    s = rng.choice(cands)
    old = case.body[s.start:s.end]
    if s.kind == "bool":
        new = bytes([rng.randint(2, 255)])
    else:
        fmt = {1: "b", 2: "h", 4: "i", 8: "q"}[s.end - s.start]
        if s.kind.startswith("uint"):
            fmt = fmt.upper()
        choices = [v for v in int_edges(s.kind) if struct.pack(">" + fmt, v) != old]
        new = struct.pack(">" + fmt, rng.choice(choices))
    body = case.body[:s.start] + new + case.body[s.end:]
    return _field_mutant(case, "field.int_out_of_domain", body, "{} = {}".format(s.path, new.hex()),
                         start=s.start, end=s.end, old=old.hex(), new=new.hex(), path=s.path)


def _prefixed(case: Case, rng: random.Random, kinds: tuple[str, ...]) -> Optional[layout.Span]:
    cands = [s for s in _spans(case) if s.kind in kinds and s.prefix > 0]
    return rng.choice(cands) if cands else None


def _rewrite_prefix(case: Case, s: layout.Span, new_prefix: bytes, strategy: str,
                    value: int) -> Mutant:
    body = case.body[:s.start] + new_prefix + case.body[s.start + s.prefix:]
    return _field_mutant(case, strategy, body, "{} prefix says {}".format(s.path, value),
                         start=s.start, old_prefix=case.body[s.start:s.start + s.prefix].hex(),
                         new_prefix=new_prefix.hex(), value=value, path=s.path)


def _lie_value(case: Case, s: layout.Span, rng: random.Random) -> int:
    width = 2 if s.kind == "string" else 4
    top = (1 << (8 * width - 1)) - 1
    if s.compact:
        top = 0xFFFFFFFE  # the largest uvarint a reader of n+1 can see
    real = layout.prefix_value(case.body, s)
    return rng.choice([v for v in (-1, 0, 1, real + 1, top // 2, top) if v != real] or [top])


def count_lie(case: Case, rng: random.Random) -> Optional[Mutant]:
    """An array's count set to -1, 0, one more than true, or huge (KAFKA-14063's shape)."""
    s = _prefixed(case, rng, ("array",))
    if s is None:
        return None
    n = _lie_value(case, s, rng)
    return _rewrite_prefix(case, s, _prefix_bytes(s.compact, 4, n), "field.count_lie", n)


def length_lie(case: Case, rng: random.Random) -> Optional[Mutant]:
    """A string's or bytes' length set to -1, 0, one more, or huge, its contents left."""
    s = _prefixed(case, rng, ("string", "bytes", "records"))
    if s is None:
        return None
    n = _lie_value(case, s, rng)
    width = 2 if s.kind == "string" else 4
    return _rewrite_prefix(case, s, _prefix_bytes(s.compact, width, n), "field.length_lie", n)


def null_not_nullable(case: Case, rng: random.Random) -> Optional[Mutant]:
    """Null (prefix -1, contents dropped) in a string/bytes/array the version says is not
    nullable."""
    cands = [s for s in _spans(case) if s.prefix > 0 and not s.nullable and
             s.kind in ("string", "bytes", "records", "array")]
    if not cands:
        return None
    s = rng.choice(cands)
    width = 2 if s.kind == "string" else 4
    null = _prefix_bytes(s.compact, width, -1)
    body = case.body[:s.start] + null + case.body[s.end:]
    return _field_mutant(case, "field.null_not_nullable", body, "{} = null".format(s.path),
                         start=s.start, end=s.end, null=null.hex(), path=s.path)


def _tag_section(case: Case, rng: random.Random) -> Optional[layout.Span]:
    cands = [s for s in _spans(case) if s.kind == "tags"]
    return rng.choice(cands) if cands else None


def _section(entries: list[tuple[int, bytes]]) -> bytes:
    out = bytearray(_uvarint(len(entries)))
    for tag, raw in entries:
        out += _uvarint(tag) + _uvarint(len(raw)) + raw
    return bytes(out)


def _entries(case: Case, s: layout.Span) -> list[tuple[int, bytes]]:
    found, _ = read_tagged_fields(memoryview(case.body), s.start)
    return [(tag, case.body[a:b]) for tag, a, b in found]


def unknown_tag(case: Case, rng: random.Random) -> Optional[Mutant]:
    """A tagged field no version of the schema knows, added to a tag section."""
    s = _tag_section(case, rng)
    if s is None:
        return None
    entries = _entries(case, s)
    tag = rng.choice((100, 1000, 0x7FFF, (1 << 31) - 1))
    raw = rng.randbytes(rng.choice((0, 1, 8, 300)))
    new = _section(sorted(entries + [(tag, raw)]))
    body = case.body[:s.start] + new + case.body[s.end:]
    return _field_mutant(case, "field.unknown_tag", body, "{} + tag {}".format(s.path, tag),
                         start=s.start, end=s.end, tag=tag, raw=raw.hex(), path=s.path)


def duplicate_tag(case: Case, rng: random.Random) -> Optional[Mutant]:
    """A tag section holding the same tag twice."""
    s = _tag_section(case, rng)
    if s is None:
        return None
    entries = _entries(case, s)
    dup = rng.choice(entries) if entries else (rng.choice((0, 1, 2, 50)), b"\x00")
    new = _section(sorted(entries + [dup] + ([] if entries else [dup])))
    body = case.body[:s.start] + new + case.body[s.end:]
    return _field_mutant(case, "field.duplicate_tag", body,
                         "{} tag {} twice".format(s.path, dup[0]), start=s.start, end=s.end,
                         tag=dup[0], path=s.path)


def _value_bytes(case: Case, f: schema.FieldSpec, rng: random.Random) -> bytes:
    compact = case.spec.is_flexible(case.version)
    if f.is_array:
        return _prefix_bytes(compact, 4, 1 if f.base_type in layout.FIXED_SIZES else 0) + (
            bytes(layout.FIXED_SIZES.get(f.base_type, 0)))
    if f.type in layout.FIXED_SIZES:
        return rng.randbytes(layout.FIXED_SIZES[f.type])
    if f.type in ("string", "bytes", "records"):
        text = b"kproto-fuzz"
        return _prefix_bytes(compact, 2 if f.type == "string" else 4, len(text)) + text
    # a struct: zeros standing in for its fixed fields (and an empty tag section)
    return bytes(8) + (b"\x00" if compact else b"")


def foreign_field(case: Case, rng: random.Random) -> Optional[Mutant]:
    """A top-level field this version cannot carry, inserted where it would sit (or as its
    tag, when the field is tagged in another version)."""
    v = case.version
    fields = schema.fields_of(case.spec.root)
    absent = [i for i, f in enumerate(fields) if not f.present(v)]
    if not absent:
        return None
    i = rng.choice(absent)
    f = fields[i]
    top = {s.path: s for s in _spans(case) if "." not in s.path and "[" not in s.path}
    if f.tag is not None and case.spec.is_flexible(v):
        s = top["<tags>"]
        entries = _entries(case, s)
        raw = _value_bytes(case, f, rng)
        new = _section(sorted([e for e in entries if e[0] != f.tag] + [(f.tag, raw)]))
        body = case.body[:s.start] + new + case.body[s.end:]
        return _field_mutant(case, "field.foreign_field", body,
                             "{} as tag {}".format(f.attr, f.tag), start=s.start, end=s.end,
                             inserted=raw.hex(), field=f.attr, tag=f.tag)
    pos = 0
    for g in fields[:i]:
        if g.attr in top and not top[g.attr].tagged:
            pos = max(pos, top[g.attr].end)
    raw = _value_bytes(case, f, rng)
    body = case.body[:pos] + raw + case.body[pos:]
    return _field_mutant(case, "field.foreign_field", body, "{} inserted".format(f.attr),
                         start=pos, inserted=raw.hex(), field=f.attr)


def version_skew(case: Case, rng: random.Random) -> Optional[Mutant]:
    """The body of another version under a header naming this one."""
    spec = case.spec
    others = [w for w in range(spec.min_version, spec.max_version + 1) if w != case.version]
    if not others:
        return None
    w = rng.choice(others)
    try:
        body = case.request.encode(w)
    except Exception:
        body = schema.class_of(spec.module, spec.root)().encode(w)
    if body == case.body:
        return None
    return _field_mutant(case, "field.version_skew", body,
                         "body of v{} under header v{}".format(w, case.version), body_version=w)


# --- frame level -------------------------------------------------------------------

def _frame_mutant(strategy: str, wire: bytes, note: str, expects_answer: bool = True,
                  **detail: Any) -> Mutant:
    return Mutant(strategy, "frame", wire, note, detail, expects_answer)


def size_lie(case: Case, rng: random.Random) -> Optional[Mutant]:
    """The size prefix lies: short, long (the broker waits for bytes that never come),
    negative or huge."""
    frame = case.frame
    kind = rng.choice(("short", "long", "negative", "huge"))
    size = {"short": max(0, len(frame) - rng.randint(1, max(1, len(frame) - 1))),
            "long": len(frame) + rng.randint(1, 64),
            "negative": rng.choice((-1, -(1 << 31))),
            "huge": rng.choice(((1 << 31) - 1, 1 << 30, 100 << 20))}[kind]
    return _frame_mutant("frame.size_lie", _I32.pack(size) + frame,
                         "size {} ({}) for {} bytes".format(size, kind, len(frame)),
                         expects_answer=False, size=size, kind=kind, true_size=len(frame))


def truncate(case: Case, rng: random.Random, cut: Optional[int] = None) -> Optional[Mutant]:
    """The frame cut at a field boundary, the size prefix saying the cut length."""
    cuts = [b for b in layout.boundaries(_spans(case)) if b < len(case.body)]
    if cut is None:
        if not cuts:
            return None
        cut = rng.choice(cuts)
    frame = case.header + case.body[:cut]
    return _frame_mutant("frame.truncate", frame_wire(frame),
                         "body cut at byte {} of {}".format(cut, len(case.body)),
                         cut=cut, header_len=len(case.header))


def trailing(case: Case, rng: random.Random) -> Optional[Mutant]:
    """Bytes after the body (the size prefix counts them)."""
    extra = rng.randbytes(rng.choice((1, 2, 8, 100)))
    return _frame_mutant("frame.trailing", frame_wire(case.frame + extra),
                         "{} trailing bytes".format(len(extra)), extra=extra.hex())


def bitflip(case: Case, rng: random.Random) -> Optional[Mutant]:
    """One to three bits flipped anywhere after the size prefix."""
    frame = bytearray(case.frame)
    bits = sorted(rng.sample(range(len(frame) * 8), min(len(frame) * 8, rng.randint(1, 3))))
    for b in bits:
        frame[b // 8] ^= 0x80 >> (b % 8)
    return _frame_mutant("frame.bitflip", frame_wire(bytes(frame)),
                         "bits {} flipped".format(bits), bits=bits)


def header_version(case: Case, rng: random.Random) -> Optional[Mutant]:
    """The header in a version the API version does not use (v2 for a classic API, v1 for
    a flexible one, v0)."""
    right = case.header_version
    wrong = rng.choice([h for h in (0, 1, 2) if h != right])
    header = encode_request_header(case.spec.api_key, case.version, case.correlation_id,
                                   case.client_id, wrong)
    return _frame_mutant("frame.header_version", frame_wire(header + case.body),
                         "header v{} instead of v{}".format(wrong, right),
                         header_version=wrong, header_len=len(header))


def correlation_game(case: Case, rng: random.Random) -> Optional[Mutant]:
    """A correlation id at an edge (negative, zero, max); the answer must echo it."""
    cid = rng.choice((-1, 0, -(1 << 31), (1 << 31) - 1))
    frame = case.header[:4] + _I32.pack(cid) + case.header[8:] + case.body
    return _frame_mutant("frame.correlation_id", frame_wire(frame),
                         "correlation id {}".format(cid), correlation_id=cid)


def unknown_api(case: Case, rng: random.Random) -> Optional[Mutant]:
    """An API key or version the broker does not know (it should close or answer an
    error, nothing worse)."""
    key = rng.choice((case.spec.api_key, 999, 0x7FFF, -1))
    version = rng.choice((case.spec.max_version + 1, 0x7FFF, -1)) if key == case.spec.api_key \
        else case.version
    frame = struct.pack(">hh", key, version) + case.frame[4:]
    return _frame_mutant("frame.unknown_api", frame_wire(frame),
                         "api key {} version {}".format(key, version), api_key=key,
                         api_version=version)


Strategy = Callable[[Case, random.Random], Optional[Mutant]]

FIELD_STRATEGIES: dict[str, Strategy] = {
    "field.int_out_of_domain": int_out_of_domain,
    "field.count_lie": count_lie,
    "field.length_lie": length_lie,
    "field.null_not_nullable": null_not_nullable,
    "field.unknown_tag": unknown_tag,
    "field.duplicate_tag": duplicate_tag,
    "field.foreign_field": foreign_field,
    "field.version_skew": version_skew,
}

FRAME_STRATEGIES: dict[str, Strategy] = {
    "frame.size_lie": size_lie,
    "frame.truncate": truncate,
    "frame.trailing": trailing,
    "frame.bitflip": bitflip,
    "frame.header_version": header_version,
    "frame.correlation_id": correlation_game,
    "frame.unknown_api": unknown_api,
}

STRATEGIES: dict[str, Strategy] = {**FIELD_STRATEGIES, **FRAME_STRATEGIES}

__all__ = ["Case", "Mutant", "make_case", "case_of", "frame_wire", "STRATEGIES", "FIELD_STRATEGIES",
           "FRAME_STRATEGIES", "CLIENT_ID"]
