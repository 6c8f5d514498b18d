"""Minimisation: the oracle keeps firing and the reproducer ends smaller.

The search itself is checked sans-IO with a predicate on bytes; the whole path (a real
finding shrunk against Tansu, then sent once more) with Tansu's OffsetFetch answer to
``topics=null``: a 2-byte body kproto's strict decoder refuses.
"""

from kproto.tools.fuzz import oracles, schema
from kproto.tools.fuzz.minimise import _ddmin, minimise
from kproto.tools.fuzz.mutators import make_case
from kproto.tools.fuzz.target import Target
from kproto.messages import OffsetFetchRequest


def test_ddmin_finds_the_one_needed_chunk():
    data = bytes(range(64)) + b"XY" + bytes(range(64))
    calls = []

    def test(b):
        calls.append(b)
        return b"XY" in b

    out = _ddmin(data, test, lambda: len(calls) < 500)
    assert out == b"XY"


def test_structural_passes_drop_elements_and_reset_fields():
    spec = schema.api_by_name("OffsetFetch")
    request = OffsetFetchRequest(group_id="g" * 50, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="t" * 20, partition_indexes=[1, 2, 3])
        for _ in range(3)])
    case = make_case(spec, 5, request, 9)

    def fires(wire, req):  # "fires" while some topic asks for partition 2
        return req is not None and any(2 in t.partition_indexes for t in req.topics or [])

    shrunk = minimise(case.wire, request, 5, len(case.header), fires, byte_level=False)
    assert shrunk.after < shrunk.before
    assert fires(shrunk.wire, shrunk.request)
    assert len(shrunk.request.topics) == 1 and shrunk.request.topics[0].partition_indexes == [2]
    assert shrunk.request.group_id == "" and shrunk.request.topics[0].name == ""


def test_a_tansu_finding_shrinks_and_still_fires(tansu_broker):
    host, port = tansu_broker.addresses[0]
    target = Target(host, port)
    target.fetch_api_versions()
    spec = schema.api_by_name("OffsetFetch")
    version = target.version_for(spec.api_key, 7)
    request = OffsetFetchRequest(group_id="kproto-fuzz-" + "x" * 40, topics=None)
    case = make_case(spec, version, request, target.next_correlation_id())

    def verdicts(wire, req):
        ex = target.exchange(wire, valid=req is not None, own_connection=True, request=req)
        return oracles.evaluate(ex)[1]

    first = [v for v in verdicts(case.wire, request) if v.oracle == "decode"]
    assert first, "Tansu answered OffsetFetch topics=null decodably"
    key = (first[0].oracle, first[0].signature)

    def fires(wire, req):
        return any((v.oracle, v.signature) == key for v in verdicts(wire, req))

    shrunk = minimise(case.wire, request, version, len(case.header), fires)
    assert shrunk.after < shrunk.before
    assert fires(shrunk.wire, shrunk.request)  # once more, after the search
    target.close()
