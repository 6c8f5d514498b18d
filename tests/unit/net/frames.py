"""Byte-level helpers of the sans-IO Connection tests: response frames, and draining a
connection's output."""

from __future__ import annotations

import struct

from kproto.net.connection import Connection
from kproto.protocol import headers


def drain(conn: Connection, chunk: int | None = None) -> bytes:
    """Everything the connection wants to write, taken ``chunk`` bytes at a time."""
    out = bytearray()
    while conn.has_pending_output():
        view = conn.pending_output()
        take = len(view) if chunk is None else min(chunk, len(view))
        out += view[:take]
        conn.advance_output(take)
    return bytes(out)


def response_frame(api_key: int, version: int, correlation_id: int, response) -> bytes:
    header = struct.pack(">i", correlation_id)
    if headers.response_header_version(api_key, version) >= 1:
        header += b"\x00"  # no tagged fields
    body = response.encode(version)
    return struct.pack(">i", len(header) + len(body)) + header + body
