"""The share consumer's configuration (Java's ``ShareConsumerConfig``).

Owns the split of a ``KafkaShareConsumer``'s keyword arguments: the share settings
(``share_acknowledgement_mode``: "implicit" (default) or "explicit"; ``share_acquire_mode``:
"batch_optimized" (default) or "record_limit", sent where ShareFetch v2 carries it) and
everything else, validated as ``KafkaConsumer``'s settings (``ConsumerConfig``: client,
security, fetch and network settings share one table and one set of checks).

As in Java, settings that belong to consumer groups and mean nothing to a share group are
refused by name (offsets, auto-commit, assignors, static membership, isolation level: a
share group's isolation level and offset reset are group settings on the broker), and
``group_id`` is required.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from kproto.consumer.config import ConsumerConfig
from kproto.consumer.share.share_session_handler import SHARE_ACQUIRE_MODES
from kproto.errors import KafkaConfigurationError


@dataclasses.dataclass(frozen=True)
class ShareConsumerConfig:
    """The share settings (lower-cased, checked), typed for the share engine."""

    share_acknowledgement_mode: str = "implicit"
    share_acquire_mode: str = "batch_optimized"


SHARE_DEFAULTS: dict[str, Any] = dataclasses.asdict(ShareConsumerConfig())
ACKNOWLEDGEMENT_MODES = ("implicit", "explicit")
# Java's ShareConsumerConfig rejects these consumer-group settings.
UNSUPPORTED = ("auto_offset_reset", "enable_auto_commit", "auto_commit_interval_ms", "group_instance_id",
               "isolation_level", "partition_assignment_strategy", "session_timeout_ms", "heartbeat_interval_ms",
               "group_protocol", "group_remote_assignor", "default_offset_commit_callback",
               "enable_incremental_fetch_sessions", "max_partition_fetch_bytes", "consumer_timeout_ms")


def share_consumer_config(configs: Mapping[str, Any]) -> tuple[ConsumerConfig, ShareConsumerConfig]:
    """``(ConsumerConfig, share settings)`` from a KafkaShareConsumer's keyword arguments."""
    given = dict(configs)
    refused = sorted(k for k in given if k in UNSUPPORTED)
    if refused:
        raise KafkaConfigurationError("{} not supported by KafkaShareConsumer (share groups do not use {})".format(
            ", ".join(refused), "it" if len(refused) == 1 else "them"))
    share = dict(SHARE_DEFAULTS)
    for key in SHARE_DEFAULTS:
        if key in given:
            share[key] = given.pop(key)
    mode = share["share_acknowledgement_mode"]
    if not isinstance(mode, str) or mode.lower() not in ACKNOWLEDGEMENT_MODES:
        raise KafkaConfigurationError("Invalid value {!r} for configuration share_acknowledgement_mode: "
                                      "expected one of {}".format(mode, ", ".join(ACKNOWLEDGEMENT_MODES)))
    share["share_acknowledgement_mode"] = mode.lower()
    acquire = share["share_acquire_mode"]
    if not isinstance(acquire, str) or acquire.lower() not in SHARE_ACQUIRE_MODES:
        raise KafkaConfigurationError("Invalid value {!r} for configuration share_acquire_mode: expected one "
                                      "of {}".format(acquire, ", ".join(SHARE_ACQUIRE_MODES)))
    share["share_acquire_mode"] = acquire.lower()
    if not given.get("group_id"):
        raise KafkaConfigurationError("KafkaShareConsumer needs a group_id (the share group to join)")
    # A share group commits nothing: keep ConsumerConfig from turning auto-commit on.
    given["enable_auto_commit"] = False
    given["group_protocol"] = "consumer"
    return ConsumerConfig(given), ShareConsumerConfig(**share)
