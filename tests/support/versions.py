"""The newest version of an API kproto's consumer sends (for tests asserting the wire)."""

from __future__ import annotations

from kproto.consumer.classic import group_requests
from kproto.messages import API_KEYS
from kproto.net.client_versions import client_max_version


def kproto_max(api_key: int) -> int:
    """The newest version kproto's consumer sends of an API (classic group caps included)."""
    cap = client_max_version(API_KEYS[api_key][0])
    return min(cap, group_requests.MAX_VERSIONS.get(api_key, cap))
