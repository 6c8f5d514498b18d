"""Broker-address rewriting: the answers that name brokers, pointed at the proxy instead.

Owns :data:`ENDPOINT_FIELDS` (which response fields of Kafka 4.4 hold broker endpoints a
client connects to; tests check the table against spec/) and :func:`rewrite_response`.

Only the host/port pairs change, and only when one does: an answer is re-encoded at its own
version after checking that encoding the unmodified decoded message gives back exactly the
bytes the broker sent (so unknown tagged fields, field order and everything else survive); if
that check fails the answer is forwarded untouched and the reason reported. Bytes after the
body (the librdkafka mock appends one to flexible Metadata answers) are kept as they were.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from kproto.errors import KafkaError

__all__ = ["ENDPOINT_FIELDS", "NOT_CLIENT_ENDPOINTS", "rewrite_response", "Translate"]

# (host, port) the broker named -> (host, port) the client should use, or None to leave it.
Translate = Callable[[str, int], Optional["tuple[str, int]"]]

# API key -> attributes of the response holding endpoint structs (lists or the message itself:
# "." is the message, for FindCoordinator v0-3's top-level host/port).
ENDPOINT_FIELDS: dict[int, tuple[str, ...]] = {
    0: ("node_endpoints",),  # Produce v10+ (KIP-951: new leaders' addresses)
    1: ("node_endpoints",),  # Fetch v16+ (KIP-951)
    3: ("brokers",),  # Metadata
    10: (".", "coordinators"),  # FindCoordinator: v0-3 one coordinator, v4+ a list
    60: ("brokers",),  # DescribeCluster
    78: ("node_endpoints",),  # ShareFetch
    79: ("node_endpoints",),  # ShareAcknowledge
}

# Responses with Host/Port fields that are not brokers a client connects to (the test of
# ENDPOINT_FIELDS requires every Host+Port pair in spec/ to be in one table or the other).
NOT_CLIENT_ENDPOINTS: dict[int, str] = {
    52: "KRaft controller quorum", 53: "KRaft controller quorum",
    54: "KRaft controller quorum", 55: "KRaft controller quorum listeners",
    59: "KRaft controller quorum", 82: "KRaft controller quorum",
    88: "Streams application endpoints", 89: "Streams application endpoints",
}


def _endpoints(message: Any, api_key: int) -> list[Any]:
    found: list[Any] = []
    for attr in ENDPOINT_FIELDS.get(api_key, ()):
        if attr == ".":
            if "host" in message._fields:
                found.append(message)
            continue
        value = getattr(message, attr, None)
        if isinstance(value, list):
            found.extend(value)
    return found


def rewrite_response(api_key: int, api_version: int, message: Any, body: memoryview,
                     translate: Translate) -> tuple[Optional[bytes], list[tuple[str, str]], Optional[str]]:
    """``(new_body or None, [(from, to)...], problem or None)`` for a decoded answer.

    ``body`` is the response body exactly as received (after the header). ``new_body`` is
    None when nothing changed or when the answer could not be rewritten safely (``problem``).
    """
    endpoints = _endpoints(message, api_key)
    targets = []
    for ep in endpoints:
        host, port = ep.host, ep.port
        if not host or port is None or port <= 0:
            continue  # an error answer (FindCoordinator) names no broker
        new = translate(host, port)
        if new is not None and new != (host, port):
            targets.append((ep, new))
    if not targets:
        return None, [], None
    try:
        original = message.encode(api_version)
    except KafkaError as exc:
        return None, [], "not rewritten: cannot re-encode: {}".format(exc)
    if bytes(body[:len(original)]) != original:
        return None, [], "not rewritten: re-encoding the answer does not give back its bytes"
    trailing = bytes(body[len(original):])
    changes = []
    for ep, (host, port) in targets:
        changes.append(("{}:{}".format(ep.host, ep.port), "{}:{}".format(host, port)))
        ep.host, ep.port = host, port
    return message.encode(api_version) + trailing, changes, None
