"""GroupRebalanceConfig: the settings a group member reads, taken once from ConsumerConfig.

Java's ``GroupRebalanceConfig`` (group and instance id, session, rebalance and heartbeat
timeouts, rack, retry backoffs), plus the consumer's commit settings every engine's group
code reads (auto-commit, ``require_stable`` from the isolation level). Built by each
engine's composition root (``ConsumerCoordinator``, ``build_resources``,
``build_share_resources``) as ``FetchConfig`` is for the fetch pipeline, so the group code
takes typed values instead of looking keys up in a mapping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Optional

from kproto.consumer.config import parse_isolation_level
from kproto.structs import IsolationLevel


@dataclasses.dataclass(frozen=True)
class GroupRebalanceConfig:
    group_id: Optional[str]
    group_instance_id: Optional[str]
    session_timeout_ms: int
    # max_poll_interval_ms: how long a rebalance may wait for the member (Java's rebalanceTimeoutMs).
    rebalance_timeout_ms: int
    heartbeat_interval_ms: int
    rack_id: Optional[str]
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    request_timeout_ms: int
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    # OffsetFetch asks for stable offsets under read_committed.
    require_stable: bool
    group_remote_assignor: Optional[str]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "GroupRebalanceConfig":
        """From a ConsumerConfig (or any mapping with its keys)."""
        return cls(
            group_id=config["group_id"],
            group_instance_id=config["group_instance_id"],
            session_timeout_ms=config["session_timeout_ms"],
            rebalance_timeout_ms=config["max_poll_interval_ms"],
            heartbeat_interval_ms=config["heartbeat_interval_ms"],
            rack_id=config["client_rack"] or None,
            retry_backoff_ms=config["retry_backoff_ms"],
            retry_backoff_max_ms=config["retry_backoff_max_ms"],
            request_timeout_ms=config["request_timeout_ms"],
            enable_auto_commit=bool(config["enable_auto_commit"]),
            auto_commit_interval_ms=config["auto_commit_interval_ms"],
            require_stable=parse_isolation_level(config["isolation_level"]) == IsolationLevel.READ_COMMITTED,
            group_remote_assignor=config["group_remote_assignor"],
        )
