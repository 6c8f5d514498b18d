"""Request/response header versions and bytes, checked against the schemas and kafka-python."""

import json
from pathlib import Path

import pytest

from codegen.import_spec import strip_comments
from codegen.schema import Versions
from kproto.errors import CorruptMessageError, IllegalArgumentError
from kproto.messages import API_KEYS, RequestHeader, ResponseHeader
from kproto.protocol import headers

ROOT = Path(__file__).resolve().parents[3]


def test_flexible_table_matches_every_kafka_schema():
    seen = {}
    for path in (ROOT / "spec").glob("*.json"):
        data = json.loads(strip_comments(path.read_text()))
        if data.get("type") in ("request", "response"):
            flexible = Versions.parse(data["flexibleVersions"])
            first = None if flexible.empty else flexible.lo
            # request and response of one API must agree
            assert seen.setdefault(data["apiKey"], first) == first, path.name
    assert seen == headers.FLEXIBLE_MIN_VERSIONS


def test_generated_classes_agree_with_the_table():
    for key, (request, response) in API_KEYS.items():
        for cls in (request, response):
            first = cls.flexible_min_version
            for version in range(cls.min_version, cls.max_version + 1):
                flexible = first is not None and version >= first
                assert headers.request_header_version(key, version) == (2 if flexible else 1) \
                    or (key, version) == (7, 0), (cls, version)


def test_header_versions_and_quirks():
    assert headers.request_header_version(1, 11) == 1
    assert headers.request_header_version(1, 12) == 2
    assert headers.response_header_version(1, 11) == 0
    assert headers.response_header_version(1, 12) == 1
    # ApiVersions: flexible request header from v3, but the response header is always v0
    assert headers.request_header_version(18, 3) == 2
    assert headers.response_header_version(18, 3) == 0
    assert headers.response_header_version(18, 4) == 0
    assert headers.request_header_version(7, 0) == 0  # ControlledShutdown v0
    assert headers.request_header_version(17, 1) == 1  # SaslHandshake is never flexible
    with pytest.raises(IllegalArgumentError):
        headers.request_header_version(999, 0)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_request_header_matches_generated_class(version):
    ours = headers.encode_request_header(1, 12, 77, "client-é", version)
    generated = RequestHeader(request_api_key=1, request_api_version=12, correlation_id=77,
                              client_id="client-é").encode(version)
    assert ours == generated
    decoded = headers.decode_request_header(ours, version)
    assert decoded == (1, 12, 77, "client-é" if version else None, len(ours))


def test_request_header_client_id_is_classic_even_when_flexible():
    data = headers.encode_request_header(18, 3, 1, "ab", 2)
    assert data == b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x02ab\x00"
    assert headers.encode_request_header(18, 3, 1, None, 1).endswith(b"\xff\xff")


def test_request_header_matches_kafka_python():
    api_header = pytest.importorskip("kafka.protocol.api_header")
    for flexible, version in ((False, 1), (True, 2)):
        theirs = api_header.RequestHeader(request_api_key=3, request_api_version=9,
                                          correlation_id=5, client_id="kp")
        assert bytes(theirs.encode(flexible=flexible)) == \
            headers.encode_request_header(3, 9, 5, "kp", version)


def test_response_header_decode():
    assert headers.decode_response_header(b"\x00\x00\x00\x07body", 0) == (7, 4)
    assert headers.decode_response_header(b"\x00\x00\x00\x07\x00body", 1) == (7, 5)
    # a tagged field in the header is skipped
    data = b"\x00\x00\x00\x07\x01\x05\x02hi" + b"body"
    assert headers.decode_response_header(data, 1) == (7, 9)
    assert ResponseHeader.decode(data[:9], 1).correlation_id == 7
    with pytest.raises(CorruptMessageError):
        headers.decode_response_header(b"\x00\x00", 0)
    with pytest.raises(CorruptMessageError):
        headers.decode_response_header(b"\x00\x00\x00\x07\x01\x05\x7fhi", 1)
