"""Byte equality with an independent encoder: kafka-python 3.x's protocol classes (test-only).

For every API and version both implement, random values encoded by kproto must be the bytes
kafka-python encodes for the same values, and kafka-python must decode kproto's bytes back to
the same values (its re-encoding is byte-identical).
"""

import importlib
import pkgutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.messages.schema_strategies import BY_NAME, message_class, message_strategy, unstable_latest

kp_protocol = pytest.importorskip("kafka.protocol")
from kafka.protocol.api_message import ApiMessage  # noqa: E402
from kafka.protocol.schemas.fields.codecs import BitField  # noqa: E402


def _kafka_python_classes() -> dict[str, type]:
    found = {}
    for info in pkgutil.walk_packages(kp_protocol.__path__, "kafka.protocol."):
        if any(part in info.name for part in (".old", "generate_stubs", ".schemas")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (isinstance(value, type) and issubclass(value, ApiMessage)
                    and value is not ApiMessage and name.endswith(("Request", "Response"))):
                found[name] = value
    return found


KP = _kafka_python_classes()


def _pairs() -> list[tuple[str, int]]:
    pairs = []
    for name, msg in sorted(BY_NAME.items()):
        kp = KP.get(name)
        if kp is None:
            continue
        lo, hi = kp._valid_versions
        top = msg.valid.hi - (1 if unstable_latest(msg) else 0)
        pairs += [(name, v) for v in range(max(lo, msg.valid.lo), min(hi, top) + 1)]
    return pairs


PAIRS = _pairs()


# kafka-python patches these field names in its schemas, or bundles definitions older than
# Kafka 4.4 that named them so.
RENAMED = {"cluster_authorized_operations": "authorized_operations",
           "topic_authorized_operations": "authorized_operations",
           "generation_id_or_member_epoch": "generation_id"}


def to_kafka_python(obj, kp_cls):
    """The kafka-python object holding the same field values as a kproto object."""
    kwargs = {}
    fields = kp_cls._struct.fields
    default = type(obj)()
    for name in obj._fields:
        value = getattr(obj, name)
        field = fields.get(name) or fields.get(RENAMED.get(name, name))
        if field is None:
            # A field newer than kafka-python's definitions: absent from the versions both
            # implement, so it holds its default (a version carrying it would differ in bytes).
            assert value == getattr(default, name), "kafka-python's {} has no field {}".format(
                kp_cls, name)
            continue
        if field._tag is not None and value == getattr(default, name):
            continue  # kafka-python writes every tagged field that is passed explicitly
        if getattr(field, "_type", None) is BitField:
            # kafka-python represents authorized-operations bitfields as sets of bit numbers
            value = BitField.from_32_bit_field(value & 0xFFFFFFFF)
            value = None if value == {31} else value
        if field.is_struct():
            value = None if value is None else to_kafka_python(value, field.data_class)
        elif field.is_struct_array():
            value = None if value is None else [to_kafka_python(v, field.data_class)
                                                for v in value]
        elif isinstance(value, memoryview):
            value = bytes(value)
        kwargs[field.name] = value
    return kp_cls(**kwargs)


def test_the_comparison_covers_the_consumer_apis():
    names = {name for name, _ in PAIRS}
    for api in ("Fetch", "Metadata", "ApiVersions", "ListOffsets", "OffsetCommit", "OffsetFetch",
                "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "FindCoordinator",
                "OffsetForLeaderEpoch"):
        assert api + "Request" in names and api + "Response" in names, api
    assert len(PAIRS) > 250


@pytest.mark.parametrize("name,version", PAIRS)
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_same_bytes_as_kafka_python(name, version, data):
    kp_cls = KP[name]
    obj = data.draw(message_strategy(name, version))
    ours = obj.encode(version)
    theirs = bytes(to_kafka_python(obj, kp_cls).encode(version=version))
    assert ours == theirs
    assert message_class(BY_NAME[name]).decode(theirs, version) == obj
    if name == "ApiVersionsResponse" and obj.error_code != 0:
        return  # kafka-python reads an ApiVersions error response as v0 (as brokers send it)
    decoded = kp_cls.decode(ours, version=version)
    decoded._header = None  # kafka-python's decode skips the attribute its encode reads
    assert bytes(decoded.encode(version=version)) == ours
