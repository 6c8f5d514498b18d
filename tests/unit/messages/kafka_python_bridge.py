"""kafka-python 3.x's message classes by name, and kproto messages turned into them (the
parity tests; importing this skips the importing module without kafka-python)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

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
