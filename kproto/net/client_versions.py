"""The API versions kproto's client sends: the cap per API and the choice against a broker.

Owns ``CLIENT_MAX_VERSIONS`` and the two pure functions every version choice goes through
(the connection's ApiVersions negotiation and the consumer's request builders alike), so
the cap has one home that the shared core may import without the network client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


# API key -> the highest version kproto's client and consumer are written for: a generated
# class knows every version of its schema, so a newer schema must not make the client send a
# version whose new fields nobody fills. Raise an entry only with the code that handles the
# new version. The consumer's APIs are at Kafka 4.4's newest; an API not listed may use its
# class's newest version.
CLIENT_MAX_VERSIONS: dict[int, int] = {
    0: 11,   # Produce (tests and tools only)
    1: 18,   # Fetch (v18: a follower's high watermark, KIP-1166; nothing for consumers)
    2: 11,   # ListOffsets (v11: EARLIEST_PENDING_UPLOAD timestamp -6, KIP-1023)
    3: 13,   # Metadata (v13: top-level error code, REBOOTSTRAP_REQUIRED, KIP-1102)
    8: 10,   # OffsetCommit (v10: topic ids; only when every topic has one)
    9: 10,   # OffsetFetch (v10: topic ids; only when every topic has one)
    10: 6,   # FindCoordinator
    11: 9,   # JoinGroup (kproto.consumer.classic.group_requests caps it lower)
    12: 4,   # Heartbeat
    13: 5,   # LeaveGroup
    14: 5,   # SyncGroup
    15: 5,   # DescribeGroups (tests and tools only)
    17: 1,   # SaslHandshake
    18: 5,   # ApiVersions (v5: cluster and node id checks, KIP-1242)
    22: 5,   # InitProducerId (tests and tools only)
    23: 4,   # OffsetForLeaderEpoch
    36: 2,   # SaslAuthenticate
    68: 1,   # ConsumerGroupHeartbeat (v1: client-generated member ids, regex)
    69: 0,   # ConsumerGroupDescribe (tests and tools only)
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
