"""The generator: regeneration is a no-op, it handles every schema of Kafka 4.4 (merged with
the versions Kafka has since removed), and the importer keeps facts only."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from codegen import generate, generate_errors, import_spec
from codegen.emit import HEADER
from codegen.schema import Versions, snake

ROOT = Path(__file__).resolve().parents[3]
MESSAGES_DIR = ROOT / "kproto" / "messages"
SHARED = import_spec.DEFAULT_SOURCE
OLD_SHARED = import_spec.DEFAULT_OLD_SOURCE


def test_regeneration_is_a_no_op(tmp_path):
    generate.generate(ROOT / "spec", tmp_path)
    produced = sorted(p.name for p in tmp_path.glob("*.py"))
    committed = sorted(p.name for p in MESSAGES_DIR.glob("*.py"))
    assert produced == committed
    for name in produced:
        assert (tmp_path / name).read_text() == (MESSAGES_DIR / name).read_text(), name


def test_error_codes_regeneration_is_a_no_op(tmp_path):
    out = tmp_path / "codes.py"
    generate_errors.main(["--out", str(out)])
    assert out.read_text() == (ROOT / "kproto" / "errors" / "codes.py").read_text()
    assert out.read_text().startswith(generate_errors.HEADER + "\n")


def test_generated_files_are_marked_and_import_only_protocol_and_errors():
    for path in MESSAGES_DIR.glob("*.py"):
        text = path.read_text()
        assert text.startswith(HEADER + "\n"), path
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module:
                top = node.module.split(".")
                if top[0] == "kproto":
                    assert top[1] in ("protocol", "errors", "messages"), (path, node.module)
                else:
                    assert top[0] in ("__future__", "itertools", "struct", "uuid",
                                      "collections", "typing"), (path, node.module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name in ("struct", "uuid", "importlib"), (path, alias.name)
            assert not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in ("exec", "eval")), path


@pytest.mark.skipif(not (SHARED.is_dir() and OLD_SHARED.is_dir()),
                    reason="Kafka's schema folders are not present")
def test_spec_folder_matches_a_fresh_import(tmp_path):
    import_spec.main(["--dest", str(tmp_path), "--source", str(SHARED),
                      "--old-source", str(OLD_SHARED)])
    for path in tmp_path.glob("*.json"):
        assert path.read_text() == (ROOT / "spec" / path.name).read_text(), path.name
    names = {p.stem for p in (ROOT / "spec").glob("*.json")}
    assert names == {p.stem for p in tmp_path.glob("*.json")}


def test_spec_keeps_facts_only():
    text = (ROOT / "spec" / "FetchResponse.json").read_text()
    assert "about" not in text and "//" not in text
    data = json.loads(text)
    assert data["validVersions"] == "0-18" and data["flexibleVersions"] == "12+"
    assert data["versionSources"] == {"kafka-4.4": "4-18",
                                      "kafka-4.0.0-snapshot-2024-10-25": "0-3"}
    topics = next(f for f in data["fields"] if f["name"] == "Responses")
    partitions = next(f for f in topics["fields"] if f["name"] == "Partitions")
    tagged = [f for f in partitions["fields"] if "tag" in f]
    assert [f["name"] for f in tagged] == ["DivergingEpoch", "CurrentLeader", "SnapshotId"]
    assert "deprecatedVersions" not in data


def test_strip_comments_keeps_slashes_in_strings():
    text = '{"a": "x//y", // comment\n "b": 1}'
    assert json.loads(import_spec.strip_comments(text)) == {"a": "x//y", "b": 1}


@pytest.mark.skipif(not SHARED.is_dir(), reason="Kafka's schema folder is not present")
def test_every_kafka_schema_is_generated():
    """Every schema of the current definitions has its class, every API key its entry."""
    import kproto.messages as messages

    keys = set()
    for path in SHARED.glob("*.json"):
        data = json.loads(import_spec.strip_comments(path.read_text()))
        assert data["name"] in messages.__all__, path.name
        if data["type"] == "request":
            keys.add(data["apiKey"])
    assert set(messages.API_KEYS) == keys and len(keys) > 90


def test_generate_command_line(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "codegen" / "generate.py"),
                             "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "fetch.py").read_text() == (MESSAGES_DIR / "fetch.py").read_text()


def test_versions_and_names():
    assert 3 in Versions.parse("3+") and 2 not in Versions.parse("3+")
    assert 5 not in Versions.parse("0-4") and Versions.parse("none").empty
    assert Versions.parse("7").text() == "7"
    assert snake("ClusterAuthorizedOperations") == "cluster_authorized_operations"
    assert snake("TopicId") == "topic_id" and snake("KRaftVersion") == "k_raft_version"


def test_request_and_response_have_the_same_versions():
    # Kafka marks an unstable version on the request only: the merge must drop both sides
    import kproto.messages as messages

    for key, (request, response) in messages.API_KEYS.items():
        assert (request.min_version, request.max_version) == \
            (response.min_version, response.max_version), key
