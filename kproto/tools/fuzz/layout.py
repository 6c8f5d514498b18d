"""Where each field of an encoded request body lies: the byte spans mutators aim at.

Owns one job: walk a body (as the generated encoders wrote it) with the schema table and
report, for every field occurrence, its path, kind, byte range and length-prefix size, and
for every flexible struct its tagged-field section. Field-level mutators rewrite these
spans (a count set to -1, a string null where the schema forbids it, an unknown tag in a
section); frame-level truncation cuts at their boundaries. The walker trusts its input (it
reads bytes kproto itself encoded) and raises ``ValueError`` on anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kproto.tools.fuzz import schema
from kproto.tools.fuzz.schema import ApiSpec, FieldSpec
from kproto.protocol.primitives import read_tagged_fields, read_uvarint

FIXED_SIZES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
               "float64": 8, "bool": 1, "uuid": 16}


@dataclass(frozen=True)
class Span:
    """A field occurrence in the body: ``body[start:end]``; ``prefix`` bytes of length/count
    (0 for fixed-size values); kind is the schema type, ``array``, ``struct`` or ``tags``."""

    path: str
    kind: str
    start: int
    end: int
    prefix: int
    compact: bool
    nullable: bool
    tagged: bool = False
    spec: Optional[FieldSpec] = None


def _prefix(mv: memoryview, pos: int, compact: bool, width: int) -> tuple[int, int]:
    """(count or length, -1 for null; position after the prefix)."""
    if compact:
        n, new = read_uvarint(mv, pos)
        return n - 1, new
    if pos + width > len(mv):
        raise ValueError("truncated prefix at {}".format(pos))
    n = int.from_bytes(mv[pos:pos + width], "big", signed=True)
    return n, pos + width


class _Walker:
    def __init__(self, spec: ApiSpec, version: int, body: bytes) -> None:
        self.spec, self.version = spec, version
        self.mv = memoryview(body)
        self.spans: list[Span] = []
        self.flexible = spec.is_flexible(version)

    def struct(self, class_name: str, pos: int, path: str) -> int:
        fields = schema.fields_of(class_name)
        tagged: dict[int, FieldSpec] = {}
        for f in fields:
            if not f.present(self.version):
                continue
            if f.tagged_in(self.version):
                tagged[f.tag] = f  # type: ignore[index]
                continue
            pos = self.field(f, pos, path + f.attr)
        if self.flexible:
            start = pos
            entries, end = read_tagged_fields(self.mv, pos)
            self.spans.append(Span(path + "<tags>", "tags", start, end, 0, True, False))
            for tag, a, b in entries:
                known = tagged.get(tag)
                if known is not None:
                    used = self.field(known, a, path + known.attr, tagged=True)
                    if used != b:
                        raise ValueError("tag {} size mismatch".format(tag))
            pos = end
        return pos

    def field(self, f: FieldSpec, pos: int, path: str, tagged: bool = False) -> int:
        compact = schema.compact(self.spec, f, self.version)
        nullable = f.nullable_in(self.version)
        mv = self.mv
        if f.is_array:
            n, body = _prefix(mv, pos, compact, 4)
            start = pos
            p = body
            for i in range(max(n, 0)):
                item = "{}[{}]".format(path, i)
                if f.struct is not None:
                    p = self.struct(f.struct, p, item + ".")
                else:
                    p = self.scalar(f, f.base_type, p, item, compact, False, tagged)
            self.spans.append(Span(path, "array", start, p, body - start, compact, nullable,
                                   tagged, f))
            return p
        if f.struct is not None:
            start = pos
            if nullable:
                marker = int.from_bytes(mv[pos:pos + 1], "big", signed=True)
                pos += 1
                if marker < 0:
                    self.spans.append(Span(path, "struct", start, pos, 1, compact, True,
                                           tagged, f))
                    return pos
            end = self.struct(f.struct, pos, path + ".")
            self.spans.append(Span(path, "struct", start, end, pos - start, compact, nullable,
                                   tagged, f))
            return end
        return self.scalar(f, f.type, pos, path, compact, nullable, tagged)

    def scalar(self, f: FieldSpec, type_name: str, pos: int, path: str, compact: bool,
               nullable: bool, tagged: bool) -> int:
        if type_name in FIXED_SIZES:
            end = pos + FIXED_SIZES[type_name]
            if end > len(self.mv):
                raise ValueError("truncated {} at {}".format(path, pos))
            self.spans.append(Span(path, type_name, pos, end, 0, compact, nullable, tagged, f))
            return end
        width = 2 if type_name == "string" else 4
        n, body = _prefix(self.mv, pos, compact, width)
        end = body + max(n, 0)
        if end > len(self.mv):
            raise ValueError("truncated {} at {}".format(path, pos))
        self.spans.append(Span(path, type_name, pos, end, body - pos, compact, nullable,
                               tagged, f))
        return end


def prefix_value(body: bytes, span: Span) -> int:
    """The count or length a span's prefix says (-1: null)."""
    width = 2 if span.kind == "string" else 4
    return _prefix(memoryview(body), span.start, span.compact, width)[0]


def spans(spec: ApiSpec, version: int, body: bytes) -> list[Span]:
    """Every field occurrence of ``body`` (a request of ``spec`` at ``version``)."""
    walker = _Walker(spec, version, body)
    end = walker.struct(spec.root, 0, "")
    if end != len(body):
        raise ValueError("{} trailing bytes".format(len(body) - end))
    return sorted(walker.spans, key=lambda s: (s.start, -s.end))


def boundaries(found: list[Span]) -> list[int]:
    """Every offset where a field starts or ends (the cut points for truncation)."""
    return sorted({s.start for s in found} | {s.end for s in found})


__all__ = ["Span", "spans", "boundaries", "prefix_value", "FIXED_SIZES"]
