"""Old versions stay byte-identical: golden digests of the encodings kproto produced before
spec/ moved to Kafka 4.4.

tests/data/messages_golden.json holds, for every schema and version kproto generated before the
4.4 import (commit 04e7a09: 48 schemas, 331 versions, most of them since removed from Kafka's
definitions and kept by merging), the digests of three deterministic sample messages (all
defaults; nulls wherever allowed; random non-null values) as encoded by the modules generated
then. The current modules must encode the same samples to the same bytes. The samples are
drawn from the schema model, field by field in wire order, so a version carrying the same
fields yields the same values whichever spec/ describes it.

Rewrite the digests from a tree holding spec/ and kproto/messages/ (only to extend them, never
to make a failure pass)::

    git archive 04e7a09 spec kproto/messages | tar -x -C /tmp/old
    python -m tests.unit.messages.test_golden /tmp/old
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import random
import sys
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from codegen.schema import Message, Struct, load_all

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "data" / "messages_golden.json"
SAMPLES = ("defaults", "nulls", "values")
INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _scalar(rng: random.Random, type_name: str) -> object:
    if type_name in INT_BITS:
        bits = INT_BITS[type_name]
        return rng.randrange(-(1 << (bits - 1)), 1 << (bits - 1))
    if type_name == "uint16":
        return rng.randrange(0, 1 << 16)
    if type_name == "uint32":
        return rng.randrange(0, 1 << 32)
    if type_name == "float64":
        return rng.uniform(-1e9, 1e9)
    if type_name == "bool":
        return rng.random() < 0.5
    if type_name == "string":
        return "".join(rng.choice("ab-é€") for _ in range(rng.randrange(1, 6)))
    if type_name in ("bytes", "records"):
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    if type_name == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError(type_name)


def sample(module: ModuleType, struct: Struct, version: int, rng: random.Random,
           nulls: bool) -> object:
    """A message of ``struct`` with a value for every field ``version`` carries."""
    kwargs = {}
    for f in struct.fields:
        if version not in f.versions:
            continue
        if nulls and version in f.nullable:
            kwargs[f.attr] = None
            continue

        def one() -> object:
            if f.struct is not None:
                return sample(module, f.struct, version, rng, nulls)
            return _scalar(rng, f.base_type)
        kwargs[f.attr] = [one() for _ in range(rng.randrange(1, 3))] if f.is_array else one()
    return getattr(module, struct.class_name)(**kwargs)


def digests(msg: Message, module: ModuleType, version: int) -> list[str]:
    out = []
    for kind in SAMPLES:
        cls = getattr(module, msg.root.class_name)
        if kind == "defaults":
            obj = cls()
        else:
            rng = random.Random("{} v{} {}".format(msg.name, version, kind))
            obj = sample(module, msg.root, version, rng, kind == "nulls")
        data = obj.encode(version)
        assert cls.decode(data, version) == obj
        out.append(hashlib.sha256(data).hexdigest()[:24])
    return out


def _current_module(msg: Message) -> ModuleType:
    return importlib.import_module("kproto.messages." + msg.module)


GOLDEN_TABLE: dict[str, list[list[str]]] = (
    json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {})
CURRENT = {m.name: m for m in load_all(ROOT / "spec")}


def test_golden_covers_every_version_kproto_had():
    assert len(GOLDEN_TABLE) == 48
    assert sum(v is not None for versions in GOLDEN_TABLE.values() for v in versions) == 331
    for name, versions in GOLDEN_TABLE.items():
        spec = json.loads((ROOT / "spec" / (name + ".json")).read_text())
        old = spec["versionSources"].get("kafka-4.0.0-snapshot-2024-10-25")
        if old is not None:  # the versions merged from the snapshot are all covered
            assert int(old.split("-")[-1]) < len(versions), name


@pytest.mark.parametrize("name", sorted(GOLDEN_TABLE))
def test_old_versions_encode_as_before(name):
    msg = CURRENT[name]
    module = _current_module(msg)
    for version, expected in enumerate(GOLDEN_TABLE[name]):
        if expected is None:
            continue
        assert digests(msg, module, version) == expected, (name, version)


# The consumer's APIs whose 4.1-4.4 versions the client fills (issue 19: topic ids in
# OffsetCommit/OffsetFetch v10, Metadata v13's top-level error, ...).
RAISED_SINCE_4_0 = {"FetchRequest": 18, "ListOffsetsRequest": 11, "MetadataRequest": 13, "OffsetCommitRequest": 10,
                    "OffsetFetchRequest": 10, "ApiVersionsRequest": 5}


def test_the_client_sends_no_version_newer_than_its_callers_fill():
    """Versions Kafka added since (4.1-4.4) are generated, but kproto's client negotiates only
    those its callers fill: 4.4's newest for the consumer's APIs that learned them, where it
    stopped before for the rest."""
    from kproto.messages import API_KEYS
    from kproto.net.client_versions import client_max_version, highest_common_version

    for key, (request, _) in API_KEYS.items():
        versions = GOLDEN_TABLE.get(request.__name__)
        if versions is not None:
            expected = RAISED_SINCE_4_0.get(request.__name__, len(versions) - 1)
            assert client_max_version(request) == expected, request
            assert highest_common_version(request, {key: (0, 99)}) == expected
    assert all(CURRENT[name].valid.hi == top for name, top in RAISED_SINCE_4_0.items())


def write_golden(tree: Path) -> None:
    """Write the digests of every schema and version of ``tree`` (spec/, kproto/messages/)."""
    table: dict[str, list[list[str] | None]] = {}
    for msg in load_all(tree / "spec"):
        path = tree / "kproto" / "messages" / (msg.module + ".py")
        spec = importlib.util.spec_from_file_location("golden_" + msg.module, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        table[msg.name] = [digests(msg, module, v) if v in msg.valid else None
                           for v in range(msg.valid.hi + 1)]
    lines = ["{!s}: {!s}".format(json.dumps(name), json.dumps(table[name])) for name in sorted(table)]
    GOLDEN.write_text("{\n" + ",\n".join(lines) + "\n}\n")


if __name__ == "__main__":
    write_golden(Path(sys.argv[1]))
