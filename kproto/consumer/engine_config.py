"""EngineConfig: every setting a consumer engine reads, typed, taken once from ConsumerConfig.

Java's consumers read their settings from ``ConsumerConfig`` in their constructors
(``ClassicKafkaConsumer``, ``AsyncKafkaConsumer``, ``ShareConsumerImpl``) into fields and
the parts the pipelines take (``FetchConfig``, ``GroupRebalanceConfig``); here the engine's
composition root builds one ``EngineConfig`` and passes it (or one of its parts) down, so
no code below it looks a key up in a mapping and mypy checks every name. Its parts:
``fetch`` (:class:`~kproto.consumer.fetch.fetch_config.FetchConfig`), ``group``
(:class:`~kproto.consumer.group_rebalance_config.GroupRebalanceConfig`) and ``network``
(:class:`~kproto.net.config.NetworkClientConfig`); the fields are what the engines' shells
read themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.group_rebalance_config import GroupRebalanceConfig
from kproto.net.config import NetworkClientConfig
from kproto.structs import IsolationLevel


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    client_id: str
    # None without a group (the consumer then only assigns partitions itself).
    group_id: Optional[str]
    group_protocol: str
    auto_offset_reset: str
    default_api_timeout_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    # False without a group_id (ConsumerConfig turns it off there).
    enable_auto_commit: bool
    exclude_internal_topics: bool
    isolation_level: IsolationLevel
    max_poll_records: int
    metric_group_prefix: str
    # The metrics registry's settings (kproto.metrics.consumer_metrics.build_metrics).
    metrics_enabled: bool
    metrics_num_samples: int
    metrics_sample_window_ms: int
    metric_reporters: Sequence[Any]
    bootstrap_servers: Union[str, Sequence[str]]
    # kafka-python's iterator timeout (float("inf"): none).
    consumer_timeout_ms: float
    # The classic group's assignors as given (names, classes or instances; the classic
    # coordinator resolves them) and the callback of a commit without one.
    partition_assignment_strategy: Any
    default_offset_commit_callback: Callable[[Any, Any], Any]
    fetch: FetchConfig
    group: GroupRebalanceConfig
    network: NetworkClientConfig

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "EngineConfig":
        """From a validated ConsumerConfig."""
        fetch = FetchConfig.from_config(config)
        return cls(
            client_id=config["client_id"],
            group_id=config["group_id"],
            group_protocol=str(config["group_protocol"]).lower(),
            auto_offset_reset=config["auto_offset_reset"],
            default_api_timeout_ms=config["default_api_timeout_ms"],
            request_timeout_ms=config["request_timeout_ms"],
            retry_backoff_ms=config["retry_backoff_ms"],
            enable_auto_commit=bool(config["enable_auto_commit"]),
            exclude_internal_topics=bool(config["exclude_internal_topics"]),
            isolation_level=fetch.isolation_level,
            max_poll_records=config["max_poll_records"],
            metric_group_prefix=config["metric_group_prefix"],
            metrics_enabled=bool(config["metrics_enabled"]),
            metrics_num_samples=config["metrics_num_samples"],
            metrics_sample_window_ms=config["metrics_sample_window_ms"],
            metric_reporters=tuple(config["metric_reporters"]),
            bootstrap_servers=config["bootstrap_servers"],
            consumer_timeout_ms=config["consumer_timeout_ms"],
            partition_assignment_strategy=config["partition_assignment_strategy"],
            default_offset_commit_callback=config["default_offset_commit_callback"],
            fetch=fetch,
            group=GroupRebalanceConfig.from_config(config),
            network=NetworkClientConfig.from_config(config),
        )
