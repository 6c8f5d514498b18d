"""Request and response headers: which header version an API version uses, and their bytes.

Request header v0 is ``api_key int16, api_version int16, correlation_id int32``; v1 adds the
nullable ``client_id`` (always a classic int16-length string, even in v2); v2 adds an (empty)
tagged-field section. Response header v0 is ``correlation_id int32``; v1 adds tagged fields.
An API version uses the flexible headers (request v2, response v1) exactly when its body is
flexible, with two quirks kept from Kafka: ApiVersions responses always use header v0 (a client
must read the error code of a version it may not support), and ControlledShutdown v0 requests
use header v0.

The table of first flexible versions covers every API of Kafka 4.0 (a test checks it against
the schemas) so this bottom layer needs nothing from the generated ``kproto.messages``.
"""

from __future__ import annotations

from kproto.errors import CorruptMessageError, IllegalArgumentError
from kproto.protocol.primitives import (INT16, INT32, DecodeFailure, read_nullable_string,
                                        read_tagged_fields, write_nullable_string)

__all__ = ["FLEXIBLE_MIN_VERSIONS", "request_header_version", "response_header_version",
           "encode_request_header", "decode_response_header", "decode_request_header"]

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7

# API key -> first flexible version (None: never flexible), from Kafka's schemas (spec/).
FLEXIBLE_MIN_VERSIONS: dict[int, int | None] = {
    0: 9, 1: 12, 2: 6, 3: 9, 4: 4, 5: 2, 6: 6, 7: 3, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4,
    14: 4, 15: 5, 16: 3, 17: None, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4, 24: 3, 25: 3,
    26: 3, 27: 1, 28: 3, 29: 2, 30: 2, 31: 2, 32: 4, 33: 2, 34: 2, 35: 2, 36: 2, 37: 2, 38: 2,
    39: 2, 40: 2, 41: 2, 42: 2, 43: 2, 44: 1, 45: 0, 46: 0, 47: None, 48: 1, 49: 1, 50: 0,
    51: 0, 52: 0, 53: 1, 54: 1, 55: 0, 56: 0, 57: 0, 58: 0, 59: 0, 60: 0, 61: 0, 62: 0, 63: 0,
    64: 0, 65: 0, 66: 0, 67: 0, 68: 0, 69: 0, 70: 0, 71: 0, 72: 0, 73: 0, 74: 0, 75: 0, 76: 0,
    77: 0, 78: 0, 79: 0, 80: 0, 81: 0, 82: 0, 83: 0, 84: 0, 85: 0, 86: 0, 87: 0, 88: 0, 89: 0,
    90: 0, 91: 0, 92: 0, 93: 0, 94: 0,
}


def _is_flexible(api_key: int, api_version: int) -> bool:
    try:
        first = FLEXIBLE_MIN_VERSIONS[api_key]
    except KeyError:
        raise IllegalArgumentError("unknown API key {}".format(api_key)) from None
    return first is not None and api_version >= first


def request_header_version(api_key: int, api_version: int) -> int:
    """The request header version (0, 1 or 2) for this API version."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if _is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """The response header version (0 or 1); ApiVersions responses are always v0."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if _is_flexible(api_key, api_version) else 0


def encode_request_header(api_key: int, api_version: int, correlation_id: int,
                          client_id: str | None, header_version: int) -> bytes:
    """The request header bytes (to be followed by the body, the whole framed by the caller)."""
    if header_version not in (0, 1, 2):
        raise IllegalArgumentError("no request header version {}".format(header_version))
    out = bytearray(INT16.pack(api_key))
    out += INT16.pack(api_version)
    out += INT32.pack(correlation_id)
    if header_version >= 1:
        try:
            write_nullable_string(out, client_id)
        except ValueError as exc:
            raise IllegalArgumentError("client_id: {}".format(exc)) from None
    if header_version == 2:
        out.append(0)  # no tagged fields
    return bytes(out)


def decode_response_header(data: bytes | bytearray | memoryview,
                           header_version: int) -> tuple[int, int]:
    """``(correlation_id, body_offset)`` of a response (the size prefix already removed)."""
    if header_version not in (0, 1):
        raise IllegalArgumentError("no response header version {}".format(header_version))
    mv = data if isinstance(data, memoryview) else memoryview(data)
    if len(mv) < 4:
        raise CorruptMessageError("truncated response header", api="ResponseHeader",
                                  version=header_version, offset=0)
    correlation_id = INT32.unpack_from(mv, 0)[0]
    pos = 4
    if header_version == 1:
        try:
            _, pos = read_tagged_fields(mv, pos)
        except DecodeFailure as exc:
            raise CorruptMessageError(exc.reason, api="ResponseHeader", version=header_version,
                                      offset=exc.offset) from None
    return correlation_id, pos


def decode_request_header(data: bytes | bytearray | memoryview,
                          header_version: int) -> tuple[int, int, int, str | None, int]:
    """``(api_key, api_version, correlation_id, client_id, body_offset)``; for test peers."""
    mv = data if isinstance(data, memoryview) else memoryview(data)
    try:
        if len(mv) < 8:
            raise DecodeFailure("truncated request header", 0)
        api_key, api_version = INT16.unpack_from(mv, 0)[0], INT16.unpack_from(mv, 2)[0]
        correlation_id = INT32.unpack_from(mv, 4)[0]
        pos, client_id = 8, None
        if header_version >= 1:
            client_id, pos = read_nullable_string(mv, pos)
        if header_version >= 2:
            _, pos = read_tagged_fields(mv, pos)
    except DecodeFailure as exc:
        raise CorruptMessageError(exc.reason, api="RequestHeader", version=header_version,
                                  offset=exc.offset) from None
    return api_key, api_version, correlation_id, client_id, pos
