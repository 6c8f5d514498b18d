"""The wire trace: every request and response as a decoded field tree on ``kproto.wire``.

Enable with ``logging.getLogger("kproto.wire").setLevel(logging.DEBUG)`` (and a handler).
Each line shows the direction, node, API and version, the correlation id, then the
message's ``to_dict()`` tree; byte fields (record sets) are summarised by length so a
trace of a Fetch stays readable. Nothing is formatted unless DEBUG is on.
"""

from __future__ import annotations

import logging
import pprint
import uuid
from typing import Any

log = logging.getLogger("kproto.wire")

_MAX_BYTES_SHOWN = 32
_SECRET_MESSAGES = ("SaslAuthenticateRequest", "SaslAuthenticateResponse")


def _printable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_printable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value[:_MAX_BYTES_SHOWN])
        more = len(value) - len(raw)
        return "<{} bytes{}>".format(len(value), ": " + raw.hex() + ("..." if more else "")
                                     if value else "")
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def printable_tree(message: Any) -> Any:
    """A message's fields as plain values: bytes shortened, UUIDs as text, secrets redacted.

    Also what ``python -m kproto trace`` stores as a decoded tree (JSON-able).
    """
    to_dict = getattr(message, "to_dict", None)
    tree = to_dict() if to_dict is not None else vars(message)
    if type(message).__name__ in _SECRET_MESSAGES and isinstance(tree, dict) and "auth_bytes" in tree:
        # SASL tokens carry passwords (PLAIN) and bearer tokens: length only.
        tree = dict(tree, auth_bytes="<{} bytes, redacted>".format(len(tree["auth_bytes"] or b"")))
    return _printable(tree)


def field_tree(message: Any) -> str:
    """A message's fields as an indented tree (what the trace prints)."""
    return pprint.pformat(printable_tree(message), indent=2, width=100, sort_dicts=False)


def trace_request(node_id: Any, correlation_id: int, request: Any, version: int) -> None:
    if log.isEnabledFor(logging.DEBUG):
        log.debug(">> node=%s %s v%d correlation_id=%d\n%s", node_id, type(request).__name__,
                  version, correlation_id, field_tree(request))


def trace_response(node_id: Any, correlation_id: int, response: Any, version: int) -> None:
    if log.isEnabledFor(logging.DEBUG):
        log.debug("<< node=%s %s v%d correlation_id=%d\n%s", node_id, type(response).__name__,
                  version, correlation_id, field_tree(response))
