"""FetchConfig: the settings the fetch pipeline reads, taken once from ConsumerConfig.

Java's ``FetchConfig``. Request-level knobs (``min_bytes``, ``max_bytes``, ``max_wait_ms``,
isolation level, rack) go on every FetchRequest; ``fetch_size`` is the per-partition
``max_partition_fetch_bytes``; the rest governs decoding and collection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Optional

from kproto.consumer.config import parse_isolation_level
from kproto.consumer.fetch.completed_fetch import Deserialize, make_deserialize
from kproto.structs import IsolationLevel


@dataclasses.dataclass(frozen=True)
class FetchConfig:
    min_bytes: int = 1
    max_bytes: int = 52428800
    max_wait_ms: int = 500
    fetch_size: int = 1048576
    max_poll_records: int = 500
    check_crcs: bool = True
    client_rack: str = ""
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    enable_incremental_fetch_sessions: bool = True
    metadata_max_age_ms: int = 300000
    key_deserializer: Optional[Deserialize] = None
    value_deserializer: Optional[Deserialize] = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "FetchConfig":
        """From a ConsumerConfig (or any mapping with its keys)."""
        return cls(
            min_bytes=config["fetch_min_bytes"],
            max_bytes=config["fetch_max_bytes"],
            max_wait_ms=config["fetch_max_wait_ms"],
            fetch_size=config["max_partition_fetch_bytes"],
            max_poll_records=config["max_poll_records"],
            check_crcs=config["check_crcs"],
            client_rack=config["client_rack"] or "",
            isolation_level=parse_isolation_level(config["isolation_level"]),
            enable_incremental_fetch_sessions=config["enable_incremental_fetch_sessions"],
            metadata_max_age_ms=config["metadata_max_age_ms"],
            key_deserializer=make_deserialize(config["key_deserializer"]),
            value_deserializer=make_deserialize(config["value_deserializer"]),
        )
