"""The newest version of each API that kproto's client code fills and reads correctly.

One table, ``MAX_USABLE_VERSIONS``, read by every version choice (the network client's
``highest_common_version`` and the consumer's own): a generated message class knows every
version of its schema, so a newer schema must not make the client send a version whose new
fields nobody fills. It lives in this bottom layer so that both ``kproto.net`` and the
consumer's sans-IO core may read it.
"""

from __future__ import annotations

from typing import Any

#: By API key (Kafka 4.4's newest for all of them): raise an entry only with the code that
#: handles the new version (OffsetCommit/OffsetFetch v10 carry topic ids instead of names).
#: An API not listed (none the consumer sends) may use its class's newest version.
MAX_USABLE_VERSIONS: dict[int, int] = {
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
    17: 1,   # SaslHandshake
    18: 5,   # ApiVersions (v5: cluster and node id checks, KIP-1242)
    23: 4,   # OffsetForLeaderEpoch
    36: 2,   # SaslAuthenticate
    68: 1,   # ConsumerGroupHeartbeat (v1: client-generated member ids, regex)
}


def max_usable_version(request_class: Any) -> int:
    """The newest version of ``request_class`` kproto may send (see ``MAX_USABLE_VERSIONS``)."""
    return min(request_class.max_version,
               MAX_USABLE_VERSIONS.get(request_class.api_key, request_class.max_version))
