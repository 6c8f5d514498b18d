"""The API versions kproto's client sends: the cap per API and the choice against a broker.

Owns ``CLIENT_MAX_VERSIONS`` and the two pure functions every version choice goes through
(the connection's ApiVersions negotiation and the consumer's request builders alike), so
the cap has one home that the shared core may import without the network client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


# API key -> the highest version kproto's client and consumer are written for. kproto.messages
# generates later ones (Kafka 4.1-4.4: ApiVersions v5, Fetch v18, ListOffsets v11, Metadata v13,
# OffsetCommit/OffsetFetch v10 with topic ids, ...) but nothing fills their new fields yet, so
# negotiation stops here until the callers learn them.
CLIENT_MAX_VERSIONS: dict[int, int] = {
    0: 11, 1: 17, 2: 10, 3: 12, 8: 9, 9: 9, 15: 5, 18: 4, 22: 5, 69: 0,
}


def client_max_version(request_class: Any) -> int:
    """The highest version of ``request_class`` kproto's client sends."""
    return min(request_class.max_version,
               CLIENT_MAX_VERSIONS.get(request_class.api_key, request_class.max_version))


def highest_common_version(request_class: Any, broker_versions: Mapping[int, tuple[int, int]]) -> int | None:
    """The highest version both kproto's client and the broker support, or None."""
    span = broker_versions.get(request_class.api_key)
    if span is None:
        return None
    low = max(span[0], request_class.min_version)
    high = min(span[1], client_max_version(request_class))
    return high if high >= low else None
