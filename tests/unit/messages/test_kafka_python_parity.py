"""Byte equality with an independent encoder: kafka-python 3.x's protocol classes (test-only).

For every API and version both implement, random values encoded by kproto must be the bytes
kafka-python encodes for the same values, and kafka-python must decode kproto's bytes back to
the same values (its re-encoding is byte-identical).
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.messages.kafka_python_bridge import KP, to_kafka_python
from tests.support.schema_strategies import BY_NAME, message_class, message_strategy, unstable_latest


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
