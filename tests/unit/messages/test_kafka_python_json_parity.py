"""Byte equality with kafka-python's encoder driven by Kafka's own JSON definitions (test-only).

kafka-python 3 builds its protocol classes from Kafka's message definitions with a generic,
independent codec. It bundles definitions for about half of the APIs; here its machinery reads
the others straight from ../shared/kafka-message-spec-4.4, and the versions spec/ keeps from the
4.0.0 snapshot (removed since, KIP-896) straight from ../shared/kafka-message-spec. So every
version of those is checked against an encoder that shares nothing with kproto's importer,
merger or generator: random values encoded by kproto must be kafka-python's bytes and decode
back from them (see tests/unit/messages/test_kafka_python_parity.py for the bundled classes).
"""

from __future__ import annotations

import json
import shutil
import sys
import types
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codegen.import_spec import DEFAULT_OLD_SOURCE, DEFAULT_SOURCE, OLD_SOURCE_LABEL
from tests.support.schema_strategies import BY_NAME, SPEC_DIR, message_class, message_strategy

kp_protocol = pytest.importorskip("kafka.protocol")
from kafka.protocol.api_data import ApiData  # noqa: E402
from kafka.protocol.api_header import ResponseClassRegistry  # noqa: E402
from kafka.protocol.api_message import ApiMessage  # noqa: E402

from tests.unit.messages.kafka_python_bridge import KP, to_kafka_python  # noqa: E402

pytestmark = pytest.mark.skipif(not (DEFAULT_SOURCE.is_dir() and DEFAULT_OLD_SOURCE.is_dir()),
                                reason="Kafka's schema folders are not present")

# Schemas kafka-python's generic codec cannot express (headers are not messages to it).
SKIPPED = {"RequestHeader", "ResponseHeader"}


def _unstable_latest(name: str) -> bool:
    return bool(json.loads((SPEC_DIR / (name + ".json")).read_text()).get(
        "latestVersionUnstable"))


def _pairs() -> list[tuple[str, str, int]]:
    """(source, schema, version): versions from the snapshot for every schema, versions from
    4.4 for the schemas kafka-python does not bundle."""
    pairs = []
    for name, msg in sorted(BY_NAME.items()):
        if name in SKIPPED or any(f.attr == "version" for f in msg.root.fields):
            continue  # kafka-python's constructors take `version` (KRaft's control records)
        sources = json.loads((SPEC_DIR / (name + ".json")).read_text())["versionSources"]
        old = sources.get(OLD_SOURCE_LABEL)
        if old is not None:
            lo, _, hi = old.partition("-")
            pairs += [("old", name, v) for v in range(int(lo), int(hi or lo) + 1)]
        if name not in KP and (DEFAULT_SOURCE / (name + ".json")).exists():
            top = msg.valid.hi - (1 if _unstable_latest(name) else 0)
            old_hi = -1 if old is None else int(old.partition("-")[2] or old)
            pairs += [("new", name, v) for v in range(max(msg.valid.lo, old_hi + 1), top + 1)]
    return pairs


PAIRS = _pairs()


@pytest.fixture(scope="module")
def json_classes(tmp_path_factory):
    """kafka-python classes built from the two folders: {("old"|"new", name): class}."""
    root = tmp_path_factory.mktemp("kp_json")
    packages = {"old": ("kproto_test_kafka_40", DEFAULT_OLD_SOURCE),
                "new": ("kproto_test_kafka_44", DEFAULT_SOURCE)}
    for package, source in packages.values():
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
        for path in source.glob("*.json"):
            shutil.copy(path, root / package / path.name)
    sys.path.insert(0, str(root))
    registry = dict(ResponseClassRegistry._response_class_registry)
    classes = {}
    try:
        for source, name, _ in PAIRS:
            if (source, name) in classes:
                continue
            kind = json.loads((SPEC_DIR / (name + ".json")).read_text())["type"]
            base = ApiData if kind == "data" else ApiMessage
            with warnings.catch_warnings():  # kafka-python's use of importlib.resources
                warnings.simplefilter("ignore", DeprecationWarning)
                classes[source, name] = types.new_class(
                    name, (base,), {"load_json": packages[source][0]})
    finally:
        # kafka-python's clients look responses up there: leave its own classes in place
        ResponseClassRegistry._response_class_registry.clear()
        ResponseClassRegistry._response_class_registry.update(registry)
        sys.path.remove(str(root))
        for package, _ in packages.values():
            sys.modules.pop(package, None)
    return classes


def test_the_comparison_covers_old_versions_and_new_apis():
    names = {(source, name) for source, name, _ in PAIRS}
    for name in ("FetchRequest", "FetchResponse", "ProduceRequest", "OffsetCommitRequest",
                 "ListOffsetsResponse", "CreateTopicsRequest", "RequestHeader"):
        assert ("old", name) in names or name in SKIPPED, name
    for name in ("ConsumerGroupHeartbeatRequest", "ConsumerGroupDescribeResponse",
                 "ShareFetchRequest", "ShareGroupHeartbeatResponse",
                 "StreamsGroupHeartbeatRequest", "ConsumerProtocolAssignment",
                 "EndTxnMarker", "DefaultPrincipalData"):
        assert ("new", name) in names, name
    assert ("old", "FetchRequest", 3) in PAIRS and ("new", "ShareFetchRequest", 2) in PAIRS


@pytest.mark.parametrize("source,name,version", PAIRS)
@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_same_bytes_as_kafka_python_from_json(json_classes, source, name, version, data):
    kp_cls = json_classes[source, name]
    # kafka-python frames data schemas with their version unless told not to
    plain = {"header": False} if issubclass(kp_cls, ApiData) else {}
    obj = data.draw(message_strategy(name, version))
    ours = obj.encode(version)
    theirs = bytes(to_kafka_python(obj, kp_cls).encode(version=version, **plain))
    assert ours == theirs
    assert message_class(BY_NAME[name]).decode(theirs, version) == obj
    decoded = kp_cls.decode(ours, version=version, **plain)
    if not plain:
        decoded._header = None  # kafka-python's decode skips the attribute its encode reads
    assert bytes(decoded.encode(version=version, **plain)) == ours
