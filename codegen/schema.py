"""The schema model the generator works from: spec/*.json parsed into messages, structs, fields.

Owns the reading of Kafka's message-schema facts (version ranges, types, nullability, tags,
defaults) and the rules derived from them (snake_case names, default values, which structs a
version reaches). It emits no code; ``codegen/emit.py`` does.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

FIXED = {  # schema type -> (struct format char, size)
    "int8": ("b", 1), "int16": ("h", 2), "int32": ("i", 4), "int64": ("q", 8),
    "uint16": ("H", 2), "uint32": ("I", 4), "float64": ("d", 8), "bool": ("?", 1),
}
PRIMITIVES = set(FIXED) | {"string", "bytes", "records", "uuid"}
# Names the generated classes use for their own attributes.
RESERVED_TOP = {"api_key", "min_version", "max_version", "flexible_min_version",
                "response_class", "encode", "decode", "to_dict"}
RESERVED_ANY = {"encode", "decode", "to_dict"}


class SchemaError(Exception):
    """spec/ holds something the generator does not understand."""


@dataclass(frozen=True)
class Versions:
    """A version range: ``lo..hi`` inclusive, ``hi`` None for open-ended; empty if lo > hi."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str | None) -> "Versions":
        if text is None or text == "none":
            return cls(1, 0)
        text = str(text).strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version and (self.hi is None or version <= self.hi)

    @property
    def empty(self) -> bool:
        return self.hi is not None and self.lo > self.hi

    def text(self) -> str:
        if self.empty:
            return "none"
        if self.hi is None:
            return "{}+".format(self.lo)
        return str(self.lo) if self.lo == self.hi else "{}-{}".format(self.lo, self.hi)


def snake(name: str) -> str:
    """Schema name to snake_case: TopicId -> topic_id, KRaftVersion -> k_raft_version."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


@dataclass
class Field:
    name: str
    attr: str
    type: str                    # the schema's type text: int32, []string, FetchTopic...
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    flexible: Versions | None    # a field-level override (RequestHeader.ClientId)
    default_text: object
    ignorable: bool
    struct: "Struct | None" = None   # element/struct type when not a primitive

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def base_type(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass
class Struct:
    name: str          # schema type name (FetchTopic); the message's own name at the top
    class_name: str    # module-level class name (FetchRequest_FetchTopic)
    display: str       # FetchRequest.FetchTopic
    fields: list[Field] = field(default_factory=list)


@dataclass
class Message:
    name: str
    kind: str          # request, response, header, data, metadata
    api_key: int | None
    valid: Versions
    flexible: Versions
    root: Struct
    structs: list[Struct]  # every struct class (nested and common), children before parents
    module: str = ""

    def versions(self) -> range:
        return range(self.valid.lo, (self.valid.hi if self.valid.hi is not None else self.valid.lo) + 1)


def api_module_name(message_name: str) -> str:
    base = re.sub(r"(Request|Response)$", "", message_name)
    return snake(base)


def load(path: Path) -> Message:
    data = json.loads(path.read_text(encoding="utf-8"))
    name = data["name"]
    common = {s["name"]: s for s in data.get("commonStructs", [])}
    structs: dict[str, Struct] = {}
    order: list[Struct] = []

    def make_struct(sname: str, raw_fields: list, top: bool) -> Struct:
        if top:
            st = Struct(sname, sname, sname)
        else:
            if sname in structs:
                raise SchemaError("{}: struct {} defined twice".format(name, sname))
            st = Struct(sname, "{}_{}".format(name, sname), "{}.{}".format(name, sname))
            structs[sname] = st
        st.fields = [make_field(f, top) for f in raw_fields]
        seen: set[str] = set()
        for f in st.fields:
            if f.attr in seen:
                raise SchemaError("{}: duplicate field {}".format(st.display, f.attr))
            seen.add(f.attr)
        order.append(st)
        return st

    def make_field(raw: dict, top: bool) -> Field:
        attr = snake(raw["name"])
        if keyword.iskeyword(attr) or attr in RESERVED_ANY or (top and attr in RESERVED_TOP):
            attr += "_"
        f = Field(
            name=raw["name"], attr=attr, type=raw["type"],
            versions=Versions.parse(raw["versions"]),
            nullable=Versions.parse(raw.get("nullableVersions")),
            tagged=Versions.parse(raw.get("taggedVersions")),
            tag=raw.get("tag"),
            flexible=Versions.parse(raw["flexibleVersions"]) if "flexibleVersions" in raw else None,
            default_text=raw.get("default"),
            ignorable=bool(raw.get("ignorable", False)),
        )
        if (f.tag is None) != f.tagged.empty:
            raise SchemaError("{}.{}: tag and taggedVersions must come together".format(name, f.name))
        base = f.base_type
        if base not in PRIMITIVES:
            if "fields" in raw:
                f.struct = make_struct(base, raw["fields"], False)
            elif base in structs:
                f.struct = structs[base]
            elif base in common:
                f.struct = make_struct(base, common[base]["fields"], False)
            else:
                raise SchemaError("{}.{}: unknown type {}".format(name, f.name, f.type))
        elif "fields" in raw:
            raise SchemaError("{}.{}: primitive with fields".format(name, f.name))
        return f

    # Common structs come first so that fields can refer to them by name.
    for sname, raw in common.items():
        if sname not in structs:
            make_struct(sname, raw["fields"], False)
    root = make_struct(name, data["fields"], True)
    kind = data.get("type", "data")
    message = Message(
        name=name, kind=kind, api_key=data.get("apiKey"),
        valid=Versions.parse(data["validVersions"]),
        flexible=Versions.parse(data.get("flexibleVersions", "none")),
        root=root, structs=order,
    )
    if message.valid.hi is None:
        raise SchemaError("{}: open-ended validVersions".format(name))
    if kind in ("request", "response"):
        message.module = api_module_name(name)
    else:
        message.module = snake(name)
    return message


def reachable(message: Message, version: int) -> dict[str, Struct]:
    """The structs a version of the message reaches (by class name), the root included."""
    found: dict[str, Struct] = {}

    def walk(st: Struct) -> None:
        found[st.class_name] = st
        for f in st.fields:
            if f.struct is not None and version in f.versions and f.struct.class_name not in found:
                walk(f.struct)
    walk(message.root)
    return found


def parse_default(f: Field) -> tuple[str, bool]:
    """The field's default as Python source, and whether it is a factory (mutable value)."""
    d = f.default_text
    if isinstance(d, str):
        d = d.strip()
    if d == "null":
        # As Kafka's generator: null may be the default only if every version allows it.
        n, v = f.nullable, f.versions
        if n.empty or n.lo > v.lo or (n.hi is not None and (v.hi is None or n.hi < v.hi)):
            raise SchemaError("{}: default null but not nullable in every version".format(
                f.name))
        return "None", False
    if f.is_array:
        if d not in (None, ""):
            raise SchemaError("{}: array default {!r}".format(f.name, d))
        return "list", True
    t = f.type
    if f.struct is not None:
        if d not in (None, ""):
            raise SchemaError("{}: struct default {!r}".format(f.name, d))
        return f.struct.class_name, True
    if t == "bool":
        if d in (None, ""):
            return "False", False
        if isinstance(d, bool):
            return repr(d), False
        if d in ("true", "false"):
            return ("True" if d == "true" else "False"), False
        raise SchemaError("{}: bool default {!r}".format(f.name, d))
    if t in FIXED:
        if d in (None, ""):
            return ("0.0" if t == "float64" else "0"), False
        if t == "float64":
            return repr(float(d)), False
        value = d if isinstance(d, int) else int(str(d), 0)
        return repr(value), False
    if t == "string":
        return repr("" if d is None else str(d)), False
    if t == "uuid":
        if d not in (None, ""):
            raise SchemaError("{}: uuid default {!r}".format(f.name, d))
        return "_ZERO_UUID", False
    if t == "bytes":
        return "b''", False
    if t == "records":
        # Java's generated classes default records to null.
        return ("None" if not f.nullable.empty else "b''"), False
    raise SchemaError("{}: no default rule for {}".format(f.name, t))


def load_all(spec_dir: Path) -> list[Message]:
    return [load(p) for p in sorted(spec_dir.glob("*.json"))]
