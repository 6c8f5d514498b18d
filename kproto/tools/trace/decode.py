"""Decoding proxied frames with :mod:`kproto.messages`: requests by their header, responses
by the request they answer.

Owns :func:`decode_request` and :func:`decode_response` (the field trees come from
:func:`kproto.net.wire.printable_tree`, the wire log's own). Nothing here
raises on bad input: a frame that does not decode comes back with ``error`` set (the proxy
forwards it untouched and reports it). Responses are decoded with ``allow_trailing`` (the
librdkafka mock appends a byte to flexible Metadata answers); rewrite.py keeps such bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Optional

from kproto import messages
from kproto.errors import KafkaError
from kproto.protocol.headers import (decode_request_header, request_header_version,
                                     response_header_version)
from kproto.protocol.primitives import DecodeFailure, read_tagged_fields

__all__ = ["DecodedRequest", "DecodedResponse", "decode_request", "decode_response",
           "api_name"]

_KEY_VERSION = struct.Struct(">hh")
_INT32 = struct.Struct(">i")


def api_name(api_key: int) -> str:
    """``Fetch`` for 1; ``Api<n>`` for a key Kafka 4.4 does not know."""
    if api_key not in messages.API_KEYS:
        return "Api{}".format(api_key)
    return messages.API_KEYS[api_key][0].__name__[:-len("Request")]


@dataclass
class DecodedRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: Optional[str]
    message: Any = None  # None when the body did not decode
    error: Optional[str] = None


@dataclass
class DecodedResponse:
    correlation_id: int
    message: Any = None
    body_offset: int = 0  # where the body starts, counted after the size prefix
    error: Optional[str] = None


def decode_request(frame: memoryview) -> DecodedRequest:
    """A request frame (size prefix included)."""
    body = frame[4:]
    if len(body) < 8:
        return DecodedRequest(-1, -1, -1, None, error="{}-byte frame is too short for a request "
                              "header".format(len(body)))
    api_key, api_version = _KEY_VERSION.unpack_from(body, 0)
    correlation_id = _INT32.unpack_from(body, 4)[0]
    out = DecodedRequest(api_key, api_version, correlation_id, None)
    try:
        header_version = request_header_version(api_key, api_version)
        _, _, _, out.client_id, pos = decode_request_header(body, header_version)
        request_cls: Any = messages.API_KEYS[api_key][0]
        out.message = request_cls.decode(body[pos:], api_version)
    except (KafkaError, KeyError) as exc:
        out.error = "{}: {}".format(type(exc).__name__, exc)
    return out


def decode_response(frame: memoryview, api_key: int, api_version: int) -> DecodedResponse:
    """A response frame (size prefix included) to a request of ``api_key`` v``api_version``."""
    body = frame[4:]
    if len(body) < 4:
        return DecodedResponse(-1, error="{}-byte frame is too short for a response header"
                               .format(len(body)))
    out = DecodedResponse(_INT32.unpack_from(body, 0)[0])
    try:
        pos = 4
        if response_header_version(api_key, api_version) == 1:
            _, pos = read_tagged_fields(body, pos)
        out.body_offset = pos
        response_cls: Any = messages.API_KEYS[api_key][1]
        out.message = response_cls.decode(body[pos:], api_version, allow_trailing=True)
    except DecodeFailure as exc:
        out.error = "response header: {} at offset {}".format(exc.reason, exc.offset)
    except (KafkaError, KeyError) as exc:
        out.error = "{}: {}".format(type(exc).__name__, exc)
    return out
