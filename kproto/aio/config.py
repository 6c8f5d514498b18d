"""aiokafka's constructor arguments as a kproto ``ConsumerConfig`` (no I/O).

Owns the translation: aiokafka and kafka-python share most names, so most arguments pass
through; the ones only aiokafka's own engine uses are dropped (``loop``,
``consumer_timeout_ms``, ``api_version="auto"``, ``max_poll_records=None``). A consumer
with a ``group_id`` joins a classic group (the default, as in aiokafka and Java) unless
``group_protocol="consumer"``; there the classic group's settings (``partition_assignment_strategy``,
``session_timeout_ms``, ``heartbeat_interval_ms``) are dropped (the broker's group
configuration owns them). aiokafka's ``rebalance_timeout_ms`` has no kproto setting: the
classic JoinGroup carries ``max_poll_interval_ms``, as Java's does. Everything else is
validated by ``ConsumerConfig``: an unknown or bad setting raises
``KafkaConfigurationError``.
"""

from __future__ import annotations

import logging
from typing import Any

from kproto.consumer.config import ConsumerConfig
from kproto.errors import KafkaConfigurationError

log = logging.getLogger("kproto.aio")

# aiokafka's engine settings with no meaning here.
_DROPPED = ("loop", "consumer_timeout_ms")
# The classic group's settings, which a KIP-848 member does not send.
_CLASSIC_GROUP_ONLY = ("partition_assignment_strategy", "session_timeout_ms", "heartbeat_interval_ms")


def aio_consumer_config(configs: dict[str, Any]) -> ConsumerConfig:
    """The validated configuration for ``AIOKafkaConsumer(**configs)``."""
    configs = dict(configs)
    for key in _DROPPED:
        configs.pop(key, None)
    if configs.get("api_version") == "auto":
        configs.pop("api_version")
    if "max_poll_records" in configs and configs["max_poll_records"] is None:
        configs.pop("max_poll_records")
    if configs.pop("rebalance_timeout_ms", None) is not None:
        log.debug("rebalance_timeout_ms ignored: the classic JoinGroup carries max_poll_interval_ms")
    if configs.get("group_id") and str(configs.get("group_protocol", "classic")).lower() == "consumer":
        for key in _CLASSIC_GROUP_ONLY:
            if key in configs:
                log.debug("%s ignored: the KIP-848 group's broker-side settings apply", key)
                configs.pop(key)
    return ConsumerConfig(configs)
