"""Merge two versions of one Kafka schema (facts only) into one covering both version ranges.

Kafka 4.0 (KIP-896) and later releases remove old versions from the message definitions, yet
older brokers still answer them. The importer takes the current definitions as the authority
for the versions they declare and the older definitions for the versions below those: every
version range in the merged schema (validVersions, a field's versions, nullable, tagged and
flexible versions) is the older range clipped to the old versions joined with the newer range
clipped to the new ones. Fields only the older schema knows keep their (clipped) ranges, at
their old place. ``check_exact`` then proves, version by version, that the merged schema
carries the same fields in the same order with the same facts as the source it took that
version from, so each version encodes exactly as its source defines it.
"""

from __future__ import annotations

from codegen.schema import Versions

RANGE_KEYS = ("versions", "nullableVersions", "taggedVersions", "flexibleVersions")
# Facts that must agree where a field is in both schemas (a change would alter old versions).
SAME_KEYS = ("type", "tag", "default")


class MergeError(Exception):
    """The two schemas cannot be merged exactly (the message says where)."""


def _set(text: object, within: range) -> set[int]:
    if text is None:
        return set()
    r = Versions.parse(str(text))
    return {v for v in within if v in r}


def _text(versions: set[int], open_ended: bool, top: int, where: str) -> str:
    """The range text of a set of versions; ``open_ended`` keeps a ``+`` reaching ``top``."""
    if not versions:
        return "none"
    lo, hi = min(versions), max(versions)
    if len(versions) != hi - lo + 1:
        raise MergeError("{}: versions {} are not one range".format(where, sorted(versions)))
    if open_ended and hi == top:
        return "{}+".format(lo)
    return str(lo) if lo == hi else "{}-{}".format(lo, hi)


class _Merger:
    def __init__(self, old_range: range, new_range: range) -> None:
        self.old_range = old_range
        self.new_range = new_range
        self.top = max(list(old_range) + list(new_range))

    def range_text(self, old: object, new: object, where: str) -> str:
        versions = _set(old, self.old_range) | _set(new, self.new_range)
        source = new if new is not None else old
        open_ended = source is not None and str(source).strip().endswith("+")
        return _text(versions, open_ended, self.top, where)

    def field(self, old: dict | None, new: dict | None, where: str) -> dict:
        if old is None or new is None:
            only = old if new is None else new
            out = dict(only)
            for key in RANGE_KEYS:
                if key in only:
                    out[key] = self.range_text(only[key] if new is None else None,
                                               only[key] if old is None else None,
                                               "{}.{}".format(where, key))
            for key in ("nullableVersions", "taggedVersions"):
                if out.get(key) == "none":
                    del out[key]
            if "taggedVersions" not in out:
                out.pop("tag", None)
            if "fields" in only:
                out["fields"] = self.fields(only["fields"] if new is None else [],
                                            only["fields"] if old is None else [], where)
            return out
        for key in SAME_KEYS:
            if old.get(key) != new.get(key):
                raise MergeError("{}: {} {!r} became {!r}".format(where, key, old.get(key),
                                                                 new.get(key)))
        out = {}
        for key in list(new) + [k for k in old if k not in new]:
            if key in RANGE_KEYS:
                out[key] = self.range_text(old.get(key), new.get(key),
                                           "{}.{}".format(where, key))
            elif key == "fields":
                out[key] = self.fields(old.get("fields", []), new.get("fields", []), where)
            elif key == "ignorable":
                out[key] = bool(old.get(key)) or bool(new.get(key))
            else:
                out[key] = new[key] if key in new else old[key]
        for key in ("nullableVersions", "taggedVersions"):
            if out.get(key) == "none":
                del out[key]
        if "taggedVersions" not in out:
            out.pop("tag", None)
        return out

    def fields(self, old: list, new: list, where: str) -> list:
        """New fields in new order; fields only the old schema has after their old
        predecessor."""
        new_names = [f["name"] for f in new]
        old_by_name = {f["name"]: f for f in old}
        merged = [self.field(old_by_name.get(f["name"]), f, where + "." + f["name"])
                  for f in new]
        position = 0  # where the next old-only field goes
        for f in old:
            if f["name"] in new_names:
                position = 1 + next(i for i, m in enumerate(merged) if m["name"] == f["name"])
            else:
                merged.insert(position, self.field(f, None, where + "." + f["name"]))
                position += 1
        return [f for f in merged if f.get("versions") != "none"]


def old_versions(old: dict, new: dict) -> range:
    """The versions taken from the older schema: those below the newer schema's range (all of
    them if it has none), without a version the older schema marked unstable."""
    old_valid = Versions.parse(old["validVersions"])
    new_valid = Versions.parse(new["validVersions"])
    hi = old_valid.hi
    if old.get("latestVersionUnstable"):
        hi -= 1
    if not new_valid.empty:
        hi = min(hi, new_valid.lo - 1)
    return range(old_valid.lo, hi + 1)


def merge(old: dict, new: dict) -> tuple[dict, range, range]:
    """(merged schema, versions from ``old``, versions from ``new``)."""
    name = new["name"]
    new_valid = Versions.parse(new["validVersions"])
    new_range = range(0) if new_valid.empty else range(new_valid.lo, new_valid.hi + 1)
    old_range = old_versions(old, new)
    if not old_range:
        return dict(new), old_range, new_range
    if new_range and old_range[-1] + 1 != new_range[0]:
        raise MergeError("{}: a gap between versions {} and {}".format(name, old_range, new_range))
    if old.get("apiKey") != new.get("apiKey") or old.get("type") != new.get("type"):
        raise MergeError("{}: apiKey or type changed".format(name))
    m = _Merger(old_range, new_range)
    out: dict = {}
    for key in ("apiKey", "type", "name"):
        if key in new:
            out[key] = new[key]
    out["validVersions"] = _text(set(old_range) | set(new_range), False, m.top, name)
    out["flexibleVersions"] = m.range_text(old.get("flexibleVersions"),
                                           new.get("flexibleVersions"), name + ".flexible")
    if new.get("latestVersionUnstable") and new_range:
        out["latestVersionUnstable"] = True
    out["fields"] = m.fields(old.get("fields", []), new.get("fields", []), name)
    if "commonStructs" in old or "commonStructs" in new:
        old_common = {s["name"]: s for s in old.get("commonStructs", [])}
        new_common = {s["name"]: s for s in new.get("commonStructs", [])}
        out["commonStructs"] = [
            m.field(old_common.get(n), new_common.get(n), "{}.{}".format(name, n))
            for n in list(new_common) + [n for n in old_common if n not in new_common]]
    check_exact(old, out, old_range)
    check_exact(new, out, new_range)
    return out, old_range, new_range


def _carried(fields: list, commons: dict, version: int, flexible: bool) -> list:
    """What a version's encoding depends on, in wire order, for a field list."""
    out = []
    for f in fields:
        if version not in Versions.parse(f["versions"]):
            continue
        tagged = version in Versions.parse(f.get("taggedVersions"))
        field_flexible = flexible
        if "flexibleVersions" in f:
            field_flexible = version in Versions.parse(f["flexibleVersions"])
        facts = (f["name"], f["type"], f.get("default"), f.get("tag") if tagged else None,
                 version in Versions.parse(f.get("nullableVersions")), field_flexible)
        children = f.get("fields")
        base = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if children is None and base in commons:
            children = commons[base]["fields"]
        out.append((facts, _carried(children or [], commons, version, flexible)))
    return out


def check_exact(source: dict, merged: dict, versions: range) -> None:
    """Raise MergeError unless every version in ``versions`` carries, in ``merged``, exactly
    the fields (names, types, defaults, tags, nullability, flexibility, order) it carries in
    ``source``."""
    for schema in (source, merged):
        schema.setdefault("_commons", {s["name"]: s for s in schema.get("commonStructs", [])})
    try:
        for v in versions:
            flexible = [v in Versions.parse(s.get("flexibleVersions")) for s in (source, merged)]
            a = _carried(source["fields"], source["_commons"], v, flexible[0])
            b = _carried(merged["fields"], merged["_commons"], v, flexible[1])
            if a != b:
                raise MergeError("{} v{}: the merged schema differs from its source".format(
                    merged["name"], v))
    finally:
        for schema in (source, merged):
            schema.pop("_commons", None)
