"""The generator on a synthetic schema using every type and form, some absent from Kafka's
own consumer APIs (uint32, float64, nullable structs, tagged strings, common structs)."""

import importlib.util
import json
import struct
import uuid

import pytest

from codegen import generate
from codegen.schema import SchemaError
from kproto.errors import CorruptMessageError, IllegalArgumentError

SCHEMA = {
    "type": "data", "name": "AllTypes", "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "U16", "type": "uint16", "versions": "0+"},
        {"name": "U32", "type": "uint32", "versions": "0+"},
        {"name": "F64", "type": "float64", "versions": "0+"},
        {"name": "Flag", "type": "bool", "versions": "1+", "default": "true"},
        {"name": "Id", "type": "uuid", "versions": "0+"},
        {"name": "Blob", "type": "bytes", "versions": "0+", "nullableVersions": "1+"},
        {"name": "Recs", "type": "records", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Ids", "type": "[]uuid", "versions": "0+"},
        {"name": "Nums", "type": "[]int64", "versions": "0+", "nullableVersions": "2+"},
        {"name": "Inner", "type": "Inner", "versions": "0+", "nullableVersions": "2+",
         "fields": [
             {"name": "X", "type": "int8", "versions": "0+", "default": "-3"}]},
        {"name": "Shared", "type": "[]SharedStruct", "versions": "0+"},
        {"name": "Tagged32", "type": "uint32", "versions": "2+", "taggedVersions": "2+",
         "tag": 5, "default": "7"},
        {"name": "TaggedStr", "type": "string", "versions": "2+", "taggedVersions": "2+",
         "tag": 1, "nullableVersions": "2+", "default": "null"},
    ],
    "commonStructs": [{"name": "SharedStruct", "versions": "0+", "fields": [
        {"name": "Name", "type": "string", "versions": "0+"}]}],
}


@pytest.fixture(scope="module")
def AllTypes(tmp_path_factory):
    root = tmp_path_factory.mktemp("alltypes")
    (root / "spec").mkdir()
    (root / "spec" / "AllTypes.json").write_text(json.dumps(SCHEMA))
    generate.generate(root / "spec", root / "out")
    spec = importlib.util.spec_from_file_location("kproto_alltypes", root / "out" / "all_types.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.AllTypes


def test_defaults(AllTypes):
    obj = AllTypes()
    assert obj.flag is True and obj.inner == AllTypes.Inner() and obj.tagged32 == 7
    assert obj.tagged_str is None and obj.id == uuid.UUID(int=0) and obj.blob == b""
    assert obj.recs is None and obj.nums == [] and AllTypes.Inner().x == -3
    assert AllTypes.flexible_min_version == 2 and not hasattr(AllTypes, "api_key")


def test_v0_bytes_match_an_independent_layout(AllTypes):
    ident = uuid.UUID(int=0x0102)
    obj = AllTypes(u16=0xFFFF, u32=0xFFFFFFFF, f64=1.5, id=ident, blob=b"ab", recs=None,
                   ids=[ident], nums=[-1], inner=AllTypes.Inner(x=4),
                   shared=[AllTypes.SharedStruct(name="n")])
    expected = (struct.pack(">HId", 0xFFFF, 0xFFFFFFFF, 1.5) + ident.bytes
                + struct.pack(">i", 2) + b"ab" + struct.pack(">i", -1)
                + struct.pack(">i", 1) + ident.bytes + struct.pack(">iq", 1, -1)
                + struct.pack(">b", 4) + struct.pack(">ih", 1, 1) + b"n")
    assert obj.encode(0) == expected
    assert AllTypes.decode(expected, 0) == obj


def test_flexible_version_with_tags_and_nulls(AllTypes):
    obj = AllTypes(flag=False, blob=None, nums=None, inner=None, tagged32=0xFFFFFFFF,
                   tagged_str="é", recs=b"r")
    data = obj.encode(2)
    assert AllTypes.decode(data, 2) == obj
    # defaults of tagged fields are not written: the section is then one zero byte
    assert AllTypes(tagged32=7).encode(2).endswith(b"\x00")
    assert AllTypes.decode(AllTypes(tagged32=7).encode(2), 2).tagged32 == 7
    # a nullable struct: -1 marker for null, 1 then the struct otherwise
    assert AllTypes.decode(AllTypes(inner=AllTypes.Inner(x=9)).encode(2), 2).inner.x == 9


def test_version_limits(AllTypes):
    with pytest.raises(IllegalArgumentError, match="flag"):
        AllTypes(flag=False).encode(0)  # not ignorable, exists in 1+
    with pytest.raises(IllegalArgumentError):
        AllTypes(blob=None).encode(0)  # nullable only from v1
    with pytest.raises(IllegalArgumentError):
        AllTypes(u32=-1).encode(1)
    with pytest.raises(IllegalArgumentError):
        AllTypes(inner=None).encode(1)  # nullable only from v2
    data = AllTypes(inner=AllTypes.Inner()).encode(1)
    with pytest.raises(CorruptMessageError):
        AllTypes.decode(data[:-1], 1)


def test_null_default_needs_every_version_nullable(tmp_path):
    schema = dict(SCHEMA, fields=[{"name": "S", "type": "string", "versions": "0+",
                                   "nullableVersions": "1+", "default": "null"}])
    del schema["commonStructs"]
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "Bad.json").write_text(json.dumps(schema))
    with pytest.raises(SchemaError, match="default null"):
        generate.generate(tmp_path / "spec", tmp_path / "out")
