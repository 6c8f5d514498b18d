"""Every version of every schema in spec/ round-trips randomized values (hypothesis): 10
examples per version of the schemas kproto speaks, a few for the rest of Kafka's APIs."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.schema_strategies import BY_NAME, all_pairs, message_class, message_strategy

HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]


def _round_trip(name, version, data):
    cls = message_class(BY_NAME[name])
    obj = data.draw(message_strategy(name, version))
    encoded = obj.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == obj
    assert decoded.encode(version) == encoded
    # bytes, bytearray and memoryview input decode alike
    assert cls.decode(memoryview(bytearray(encoded)), version) == obj


@pytest.mark.parametrize("name,version", all_pairs(consumer=True))
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=HEALTH)
@given(data=st.data())
def test_round_trip(name, version, data):
    _round_trip(name, version, data)


@pytest.mark.parametrize("name,version", all_pairs(consumer=False))
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=HEALTH)
@given(data=st.data())
def test_round_trip_other_apis(name, version, data):
    _round_trip(name, version, data)


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_defaults_round_trip_every_version(name):
    msg = BY_NAME[name]
    cls = message_class(msg)
    for version in msg.versions():
        assert cls.decode(cls().encode(version), version) == cls()
