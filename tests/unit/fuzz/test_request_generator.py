"""kproto.tools.fuzz's generator and layout walker against kproto's own codecs, every API/version.

A generated request must be valid: it encodes, and kproto's strict decoder gives back an
equal object. The layout walker must account for every byte of the body.
"""

import random

import pytest

from kproto.tools.fuzz import layout, schema
from kproto.tools.fuzz.values import Knowledge, TopicInfo, ValueGenerator, every_version

PAIRS = [(spec.api_name, v) for _, spec in sorted(schema.apis().items())
         for v in every_version(spec)]
KNOW = Knowledge(topics=[TopicInfo("kproto-fuzz-seed", __import__("uuid").uuid4(), [0, 1, 2])],
                 node_ids=[1])


def test_schema_table_covers_every_generated_request_class():
    import kproto.messages as messages

    for key, (req, _) in messages._API_KEYS.items():
        assert key in schema.apis() and schema.api(key).name == req


@pytest.mark.parametrize("api,version", PAIRS)
def test_generated_requests_decode_back_equal_and_spans_cover_the_body(api, version):
    spec = schema.api_by_name(api)
    cls = schema.class_of(spec.module, spec.root)
    gen = ValueGenerator(random.Random(version * 7919 + spec.api_key), KNOW)
    for realism in (1.0, 0.0):
        request = gen.request(spec, version, realism=realism)
        body = request.encode(version)
        assert cls.decode(body, version) == request
        spans = layout.spans(spec, version, body)
        # every byte lies in some leaf span (fixed value, length/count prefix or contents)
        covered = bytearray(len(body))
        for s in spans:
            if s.kind not in ("struct", "array", "tags") or s.kind == "tags":
                covered[s.start:s.end] = b"\x01" * (s.end - s.start)
            else:
                covered[s.start:s.start + s.prefix] = b"\x01" * s.prefix
        assert all(covered), (api, version, body.hex())


def test_values_reach_edges_nulls_and_every_record_format():
    gen = ValueGenerator(random.Random(5), KNOW)
    spec = schema.api_by_name("Produce")
    for _ in range(300):
        gen.request(spec, 3, realism=0.3)
    kinds = {kind for (_, _, kind) in gen.coverage}
    assert {"null", "realistic", "edge_or_random"} <= kinds
    formats = {kind for (_, path, kind) in gen.coverage if path == "records"}
    assert {"magic0:none", "magic1:none", "magic2:none", "magic2:gzip"} <= formats


def test_realistic_names_come_from_what_the_broker_said():
    gen = ValueGenerator(random.Random(1), KNOW)
    spec = schema.api_by_name("ListOffsets")
    names = {t.name for _ in range(50) for t in gen.request(spec, 5, realism=1.0).topics}
    assert "kproto-fuzz-seed" in names


def test_same_seed_same_requests():
    spec = schema.api_by_name("Fetch")
    a = [ValueGenerator(random.Random(3), KNOW).request(spec, 12) for _ in range(1)]
    b = [ValueGenerator(random.Random(3), KNOW).request(spec, 12) for _ in range(1)]
    assert a == b
