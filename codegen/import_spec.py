"""Import Kafka's JSON message schemas into spec/, keeping facts only.

Reads Apache Kafka's message definitions (JSON with ``//`` comments), drops the prose
(``about``) and the comments, and writes one plain-JSON file per schema to ``spec/``. The
current definitions (Kafka 4.4, ``--source``) are merged with an older copy (the Kafka 4.0.0
snapshot spec/ was first imported from, ``--old-source``) so that the versions Kafka has since
removed (KIP-896) stay: older brokers still answer them (see ``codegen/merge_spec.py``). Each
spec file records which versions came from which copy under ``versionSources``. Run from the
repository root::

    python codegen/import_spec.py                 # every schema of the current definitions
    python codegen/import_spec.py Fetch Metadata  # named APIs (Request + Response)

The generator (``codegen/generate.py``) then turns spec/ into kproto/messages/.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `codegen` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codegen.merge_spec import merge  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _shared() -> Path:
    """The folder holding Kafka's definitions: ``shared/`` beside the checkout or beside one
    of its parents (a git worktree lives deeper than the main checkout)."""
    for parent in ROOT.parents:
        if (parent / "shared" / "kafka-message-spec-4.4").is_dir():
            return parent / "shared"
    return ROOT.parent / "shared"


DEFAULT_SOURCE = _shared() / "kafka-message-spec-4.4"
DEFAULT_OLD_SOURCE = _shared() / "kafka-message-spec"
DEFAULT_DEST = ROOT / "spec"
# How versionSources names the two copies.
SOURCE_LABEL = "kafka-4.4"
OLD_SOURCE_LABEL = "kafka-4.0.0-snapshot-2024-10-25"

# The facts kept; everything else (about, comments, listeners...) is dropped.
TOP_KEYS = ("apiKey", "type", "name", "validVersions", "flexibleVersions",
            "latestVersionUnstable", "fields", "commonStructs")
FIELD_KEYS = ("name", "type", "versions", "nullableVersions", "taggedVersions", "tag",
              "flexibleVersions", "default", "mapKey", "ignorable", "entityType", "zeroCopy",
              "fields")
STRUCT_KEYS = ("name", "versions", "fields")


def strip_comments(text: str) -> str:
    """Remove ``//`` comments that are outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _fields(fields: list) -> list:
    kept = []
    for field in fields:
        item = {k: field[k] for k in FIELD_KEYS if k in field and k != "fields"}
        if "fields" in field:
            item["fields"] = _fields(field["fields"])
        kept.append(item)
    return kept


def facts(schema: dict) -> dict:
    """The schema with only the keys that affect the wire format or name an entity."""
    out = {k: schema[k] for k in TOP_KEYS if k in schema and k not in ("fields", "commonStructs")}
    out["fields"] = _fields(schema.get("fields", []))
    if "commonStructs" in schema:
        out["commonStructs"] = [
            dict({k: s[k] for k in STRUCT_KEYS if k in s and k != "fields"},
                 fields=_fields(s.get("fields", [])))
            for s in schema["commonStructs"]
        ]
    return out


def read_facts(path: Path) -> dict:
    return facts(json.loads(strip_comments(path.read_text(encoding="utf-8"))))


def _range_text(versions: range) -> str:
    return str(versions[0]) if len(versions) == 1 else "{}-{}".format(versions[0], versions[-1])


def import_schema(name: str, source: Path, dest: Path, old_source: Path | None = None) -> Path:
    """Write spec/<name>.json: the schema's facts, merged with the older copy's when it has
    versions the current one dropped."""
    schema = read_facts(source / (name + ".json"))
    old_path = None if old_source is None else old_source / (name + ".json")
    if old_path is not None and old_path.exists():
        old = read_facts(old_path)
        partner = old_path.with_name(old_path.name.replace("Response.json", "Request.json"))
        if partner != old_path and partner.exists() and read_facts(partner).get(
                "latestVersionUnstable"):
            old["latestVersionUnstable"] = True  # Kafka marks it on the request only
        schema, old_range, new_range = merge(old, schema)
    else:
        old_range, new_range = range(0), range(0)
        valid = schema["validVersions"]
        if valid != "none":
            lo, _, hi = valid.partition("-")
            new_range = range(int(lo), int(hi or lo) + 1)
    sources = {}
    if new_range:
        sources[SOURCE_LABEL] = _range_text(new_range)
    if old_range:
        sources[OLD_SOURCE_LABEL] = _range_text(old_range)
    # Provenance first, then the facts in Kafka's order.
    schema = dict({"versionSources": sources}, **schema)
    target = dest / (name + ".json")
    target.write_text(json.dumps(schema, indent=1) + "\n", encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("apis", nargs="*", help="API names (Fetch) or schema names (RequestHeader)")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--old-source", type=Path, default=DEFAULT_OLD_SOURCE,
                        help="older definitions whose dropped versions are kept")
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    args = parser.parse_args(argv)
    if args.apis:
        names = []
        for api in args.apis:
            if (args.source / (api + ".json")).exists():
                names.append(api)
            else:
                names += [api + "Request", api + "Response"]
    else:
        names = sorted(p.stem for p in args.source.glob("*.json"))
    old_source = args.old_source if args.old_source.is_dir() else None
    args.dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        import_schema(name, args.source, args.dest, old_source)
    print("imported {} schemas into {}".format(len(names), args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
