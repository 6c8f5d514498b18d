"""Generate kproto/messages/ from spec/: one command, the output is committed.

    python codegen/generate.py                      # spec/ -> kproto/messages/
    python codegen/generate.py --spec S --out DIR   # e.g. every schema, into a scratch dir

One module per API (request, response and their structs), one per header/data schema, and an
``__init__`` with ``API_KEYS``. Any schema of Kafka's message-definition format works, so adding
an API is ``python codegen/import_spec.py Name && python codegen/generate.py``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `codegen` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codegen.emit import HEADER, IMPORTS, ModuleEmitter, fmt_name  # noqa: E402
from codegen.schema import FIXED, Field, Message, Struct, load_all, parse_default  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TYPE_HINTS = {"int8": "int", "int16": "int", "int32": "int", "int64": "int", "uint16": "int",
              "uint32": "int", "float64": "float", "bool": "bool", "string": "str",
              "bytes": "bytes", "records": "bytes | memoryview", "uuid": "UUID"}


def hint(f: Field) -> str:
    base = f.struct.class_name if f.struct is not None else TYPE_HINTS[f.base_type]
    text = "list[{}]".format(base) if f.is_array else base
    if not f.nullable.empty:
        text += " | None"
    return text


def emit_class(msg: Message, st: Struct, top: bool) -> list[str]:
    fields = ", ".join("{} ({})".format(f.attr, f.versions.text()) for f in st.fields)
    lines = ["class {}(ProtocolStruct):".format(st.class_name),
             '    """{}{}.'.format(st.display, "" if top else ", a struct of " + msg.name)]
    if fields:
        lines.append("")
        lines.append("    Fields (versions): {}".format(fields))
    lines.append('    """')
    lines.append("")
    slots = tuple(f.attr for f in st.fields) + ("_unknown_tagged_fields",)
    lines.append("    __slots__ = {!r}".format(slots))
    lines.append("    _name = {!r}".format(st.display))
    lines.append("    _fields = {!r}".format(tuple(f.attr for f in st.fields)))
    defaults, factories, params, assigns = [], [], [], []
    for f in st.fields:
        default, factory = parse_default(f)
        if factory:
            factories.append("{!r}: {}".format(f.attr, default))
            params.append("{}: {} = NOTSET".format(f.attr, hint(f)))
            assigns += ["        if {} is not NOTSET:".format(f.attr),
                        "            self.{0} = {0}".format(f.attr)]
        else:
            defaults.append("{!r}: {}".format(f.attr, default))
            params.append("{}: {} = {}".format(f.attr, hint(f), default))
            assigns.append("        self.{0} = {0}".format(f.attr))
    lines.append("    _defaults = {{{}}}".format(", ".join(defaults)))
    lines.append("    _factories = {{{}}}".format(", ".join(factories)))
    if top:
        valid = msg.valid
        lines.append("    _first_version = {}".format(valid.lo))
        if msg.api_key is not None:
            lines.append("    api_key = {}".format(msg.api_key))
        lines.append("    min_version = {}".format(valid.lo))
        lines.append("    max_version = {}".format(valid.hi))
        lines.append("    flexible_min_version = {}".format(
            None if msg.flexible.empty or msg.flexible.lo > valid.hi else max(msg.flexible.lo,
                                                                                 valid.lo)))
        for nested in msg.structs:
            if nested is not st:
                lines.append("    {} = {}".format(nested.name, nested.class_name))
    lines.append("")
    # Every flexible encoder reads _unknown_tagged_fields: set here, a struct built to be
    # sent answers from its slot, not through ProtocolStruct.__getattr__ (a Python call that
    # doubled the cost of encoding each partition entry of a Fetch request).
    assigns.append("        self._unknown_tagged_fields = None")
    if params:
        lines.append("    def __init__(")
        lines.append("        self,")
        lines.append("        *,")
        lines += ["        {},".format(p) for p in params]
        lines.append("    ) -> None:")
    else:
        lines.append("    def __init__(self) -> None:")
    lines += assigns
    lines.append("")
    lines.append("")
    return lines


def emit_module(messages: list[Message]) -> str:
    emitter = ModuleEmitter()
    tables: list[str] = []
    for msg in messages:
        decoders, encoders = [], []
        for v in msg.versions():
            decoders.append(emitter.decoder(msg, msg.root, v))
            encoders.append(emitter.encoder(msg, msg.root, v))
        tables.append("{}._decoders = ({},)".format(msg.name, ", ".join(decoders)))
        tables.append("{}._encoders = ({},)".format(msg.name, ", ".join(encoders)))
    requests = {m.api_key: m for m in messages if m.kind == "request"}
    for m in messages:
        if m.kind == "response" and m.api_key in requests:
            tables.append("{}.response_class = {}".format(requests[m.api_key].name, m.name))
            tables.append("{}.request_class = {}".format(m.name, requests[m.api_key].name))

    names = ", ".join("{} v{}-{}".format(m.name, m.valid.lo, m.valid.hi) for m in messages)
    api = messages[0]
    if api.api_key is not None:
        title = "Kafka's {} API (key {}): {}.".format(
            re.sub(r"(Request|Response)$", "", api.name), api.api_key, names)
    else:
        title = "Kafka {} schema: {}.".format(api.kind, names)
    out = [HEADER, "# flake8: noqa", '"""{}'.format(title), "",
           "Classes with __slots__, schema defaults and per-version encode/decode functions;",
           "see kproto.protocol.base for the shared behaviour.", '"""', "", IMPORTS]
    for fmt in emitter.formats:
        n = fmt_name(fmt)
        out.append("_S_{0} = _struct.Struct({1!r})\n_u_{0} = _S_{0}.unpack_from\n"
                   "_p_{0} = _S_{0}.pack".format(n, fmt))
    out.append("\n")
    for msg in messages:
        for st in msg.structs:
            out += emit_class(msg, st, st is msg.root)
    out += emitter.functions
    out.append("")
    out += tables
    all_names = [m.name for m in messages]
    out.append("")
    out.append("__all__ = {!r}".format(all_names))
    return "\n".join(out).rstrip() + "\n"


INIT_BODY = '''

def __getattr__(name: str) -> type:
    """A message class, its module imported on first use (PEP 562)."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))
    value = getattr(_importlib.import_module("kproto.messages." + module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULES))


class _ApiKeys(Mapping[int, "tuple[type, type]"]):
    """API key -> (request class, response class); reading an entry imports its module."""

    __slots__ = ()

    def __getitem__(self, key: int) -> tuple[type, type]:
        request, response = _API_KEYS[key]
        return __getattr__(request), __getattr__(response)

    def __contains__(self, key: object) -> bool:
        return key in _API_KEYS

    def __iter__(self) -> Iterator[int]:
        return iter(_API_KEYS)

    def __len__(self) -> int:
        return len(_API_KEYS)

    def __repr__(self) -> str:
        return "<API_KEYS: {} APIs, imported on access>".format(len(_API_KEYS))


API_KEYS: Mapping[int, tuple[type, type]] = _ApiKeys()
'''


def emit_init(modules: dict[str, list[Message]]) -> str:
    """The package __init__: names only, every module imported on first use so that
    ``import kproto.messages`` stays cheap whatever the number of APIs."""
    out = [HEADER, '"""Kafka protocol messages generated from spec/ (one module per API).',
           "",
           "Importing the package imports no message module: a class's module is imported when",
           "the class is first looked up here (PEP 562). ``API_KEYS`` maps each API key to its",
           "(request class, response class), importing that API's module when read.", '"""', "",
           "from __future__ import annotations", "",
           "import importlib as _importlib",
           "from collections.abc import Iterator, Mapping",
           "from typing import TYPE_CHECKING", "",
           "if TYPE_CHECKING:  # the names as mypy sees them"]
    exported: list[str] = []
    table: list[str] = []
    keys: list[tuple[int, str, str]] = []
    for module, messages in sorted(modules.items()):
        names = sorted(m.name for m in messages)
        out.append("    from kproto.messages.{} import {}".format(module, ", ".join(names)))
        exported += names
        table += ["    {!r}: {!r},".format(name, module) for name in names]
        req = [m for m in messages if m.kind == "request"]
        resp = [m for m in messages if m.kind == "response"]
        if req and resp:
            keys.append((req[0].api_key, req[0].name, resp[0].name))
    out.append("")
    out.append("# class name -> the module of kproto.messages defining it")
    out.append("_MODULES: dict[str, str] = {")
    out += sorted(table)
    out.append("}")
    out.append("# API key -> (request class name, response class name)")
    out.append("_API_KEYS: dict[int, tuple[str, str]] = {")
    for key, req_name, resp_name in sorted(keys):
        out.append("    {}: ({!r}, {!r}),".format(key, req_name, resp_name))
    out.append("}")
    out.append(INIT_BODY)
    out.append("__all__ = [")
    for name in ["API_KEYS"] + sorted(exported):
        out.append("    {!r},".format(name))
    out.append("]")
    return "\n".join(out) + "\n"


def _versions(v: "object") -> str:
    return "({}, {})".format(v.lo, v.hi)  # type: ignore[attr-defined]


def emit_schema_table(messages: list[Message]) -> str:
    """``_schema.py``: the schema facts as data, for tools that walk fields at run time
    (``kproto.tools.fuzz`` generates and mutates requests from it); no code reads spec/ at run time."""
    out = [HEADER, "# flake8: noqa",
           '"""Every message\'s schema facts as data (no classes): for tools that walk fields at',
           "run time, such as ``kproto.tools.fuzz``.", "",
           "``MESSAGES``: name -> (api_key, valid versions, flexible versions, module, root class).",
           "``STRUCTS``: class name -> fields, each ``(attr, type, versions, nullable versions,",
           "tagged versions, tag, flexible override, struct class name)``; the type is the",
           "schema's text (``int32``, ``[]string``, ``[]FetchTopic``). Versions are ``(lo, hi)``",
           "with ``hi`` None when open-ended; ``(1, 0)`` is empty.", '"""', "",
           "MESSAGES = {"]
    structs: list[str] = []
    for msg in messages:
        out.append("    {!r}: ({!r}, {}, {}, {!r}, {!r}),".format(
            msg.name, msg.api_key, _versions(msg.valid), _versions(msg.flexible), msg.module,
            msg.root.class_name))
        for st in msg.structs:
            fields = ", ".join("({!r}, {!r}, {}, {}, {}, {!r}, {}, {!r})".format(
                f.attr, f.type, _versions(f.versions), _versions(f.nullable),
                _versions(f.tagged), f.tag, None if f.flexible is None else _versions(f.flexible),
                None if f.struct is None else f.struct.class_name) for f in st.fields)
            structs.append("    {!r}: ({}{}),".format(st.class_name, fields,
                                                       "," if len(st.fields) == 1 else ""))
    out.append("}")
    out.append("STRUCTS = {")
    out += structs
    out.append("}")
    return "\n".join(out) + "\n"


def emit_error_fields(messages: list[Message]) -> str:
    """``_error_fields.py``: per struct class, the fields that can hold an error code
    (``error_code`` itself and the structs, or arrays of them, with one somewhere below),
    so the network client can look for stale-metadata errors without walking every field
    of every partition, and without importing the whole ``_schema`` table to know which."""
    structs = {st.class_name: st for msg in messages for st in msg.structs}
    bears: dict[str, bool] = {}

    def bears_errors(name: str) -> bool:
        if name not in bears:
            bears[name] = any(f.attr == "error_code" or (f.struct is not None and bears_errors(f.struct.class_name))
                              for f in structs[name].fields)
        return bears[name]

    out = [HEADER, "# flake8: noqa",
           '"""Per struct class that can hold an error code: the fields to look at for one (a',
           "class not listed has none). Used by ``kproto.net.metadata`` to find stale-metadata",
           'errors in any response."""', "", "ERROR_FIELDS = {"]
    for name in structs:
        if bears_errors(name):
            fields = tuple(f.attr for f in structs[name].fields
                           if f.attr == "error_code" or (f.struct is not None and bears_errors(f.struct.class_name)))
            out.append("    {!r}: {!r},".format(name, fields))
    out.append("}")
    return "\n".join(out) + "\n"


def generate(spec_dir: Path, out_dir: Path) -> list[Path]:
    """Write the generated package for every schema in ``spec_dir``; return the files written."""
    modules: dict[str, list[Message]] = {}
    for msg in load_all(spec_dir):
        modules.setdefault(msg.module, []).append(msg)
    for messages in modules.values():  # request before response
        messages.sort(key=lambda m: ({"request": 0, "response": 1}.get(m.kind, 2), m.name))
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for module, messages in sorted(modules.items()):
        path = out_dir / (module + ".py")
        path.write_text(emit_module(messages), encoding="utf-8")
        written.append(path)
    init = out_dir / "__init__.py"
    init.write_text(emit_init(modules), encoding="utf-8")
    written.append(init)
    table = out_dir / "_schema.py"
    table.write_text(emit_schema_table(
        [m for module in sorted(modules) for m in modules[module]]), encoding="utf-8")
    written.append(table)
    error_fields = out_dir / "_error_fields.py"
    error_fields.write_text(emit_error_fields(
        [m for module in sorted(modules) for m in modules[module]]), encoding="utf-8")
    written.append(error_fields)
    # Remove generated modules whose schema is gone (never hand-written files).
    for path in out_dir.glob("*.py"):
        if path not in written and path.read_text(encoding="utf-8").startswith(HEADER):
            path.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "spec")
    parser.add_argument("--out", type=Path, default=ROOT / "kproto" / "messages")
    args = parser.parse_args(argv)
    written = generate(args.spec, args.out)
    print("generated {} modules into {}".format(len(written), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["generate", "emit_module", "emit_init", "emit_schema_table", "emit_error_fields", "FIXED"]
