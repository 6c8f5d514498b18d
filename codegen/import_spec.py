"""Import Kafka's JSON message schemas into spec/, keeping facts only.

Reads Apache Kafka's message definitions (JSON with ``//`` comments), drops the prose
(``about``) and the comments, and writes one plain-JSON file per schema to ``spec/``. All
versions are kept. Run from the repository root::

    python codegen/import_spec.py                 # the APIs kproto speaks (APIS below)
    python codegen/import_spec.py --all           # every schema in the source folder
    python codegen/import_spec.py Fetch Metadata  # named APIs (Request + Response)

The generator (``codegen/generate.py``) then turns spec/ into kproto/messages/.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT.parent / "shared" / "kafka-message-spec"
DEFAULT_DEST = ROOT / "spec"

# The APIs kproto speaks; each stands for <Name>Request.json and <Name>Response.json.
APIS = (
    "ApiVersions", "Metadata", "FindCoordinator", "Fetch", "ListOffsets", "OffsetCommit",
    "OffsetFetch", "OffsetForLeaderEpoch", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup",
    "ConsumerGroupHeartbeat", "ConsumerGroupDescribe", "DescribeGroups", "ListGroups", "Produce",
    "CreateTopics", "DeleteTopics", "InitProducerId", "SaslHandshake", "SaslAuthenticate",
)
# Schemas that are not request/response pairs.
EXTRA_SCHEMAS = ("RequestHeader", "ResponseHeader", "ConsumerProtocolSubscription",
                 "ConsumerProtocolAssignment")

# The facts kept; everything else (about, comments, listeners...) is dropped.
TOP_KEYS = ("apiKey", "type", "name", "validVersions", "deprecatedVersions", "flexibleVersions",
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


def import_schema(name: str, source: Path, dest: Path) -> Path:
    schema = json.loads(strip_comments((source / (name + ".json")).read_text(encoding="utf-8")))
    target = dest / (name + ".json")
    target.write_text(json.dumps(facts(schema), indent=1) + "\n", encoding="utf-8")
    return target


def default_names() -> list[str]:
    names = [api + suffix for api in APIS for suffix in ("Request", "Response")]
    return names + list(EXTRA_SCHEMAS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("apis", nargs="*", help="API names (Fetch) or schema names (RequestHeader)")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    parser.add_argument("--all", action="store_true", help="import every schema in --source")
    args = parser.parse_args(argv)
    if args.all:
        names = sorted(p.stem for p in args.source.glob("*.json"))
    elif args.apis:
        names = []
        for api in args.apis:
            if (args.source / (api + ".json")).exists():
                names.append(api)
            else:
                names += [api + "Request", api + "Response"]
    else:
        names = default_names()
    args.dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        import_schema(name, args.source, args.dest)
    print("imported {} schemas into {}".format(len(names), args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
