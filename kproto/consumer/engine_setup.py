"""What a consumer engine builds first from its configuration: one builder for every shell.

Owns the application-side set-up the caller's-thread engine (``ClassicKafkaConsumer``),
the background-thread engine (``AsyncKafkaConsumer``) and the event-loop shell
(``kproto.aio``'s ``AIOKafkaConsumer``) share, as Java's consumers each do in their
constructors: the typed settings (:class:`~kproto.consumer.engine_config.EngineConfig`),
the ``SubscriptionState`` stamped with the client id, and the metrics (the registry, the
fetch and consumer metrics, and for a KIP-848 group member its coordinator metrics; all
None when ``metrics_enabled`` is off). Built before any thread starts: the managers record
into the metrics (see DESIGN.md "Metrics").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Optional

from kproto.consumer.engine_config import EngineConfig
from kproto.consumer.fetch.fetch_metrics_manager import FetchMetricsManager
from kproto.consumer.subscription_state import SubscriptionState
from kproto.metrics.consumer_metrics import CoordinatorMetrics, KafkaConsumerMetrics, build_metrics
from kproto.metrics.metrics import Metrics


@dataclasses.dataclass(frozen=True)
class EngineSetup:
    settings: EngineConfig
    subscriptions: SubscriptionState
    metrics: Optional[Metrics]
    fetch_metrics: Optional[FetchMetricsManager]
    consumer_metrics: Optional[KafkaConsumerMetrics]
    # A KIP-848 member's (classic=False); None without a group, without metrics, or when
    # the caller builds its own (the classic engine, once its coordinator exists).
    coordinator_metrics: Optional[CoordinatorMetrics]


def build_engine_setup(config: Mapping[str, Any], settings: Optional[EngineConfig] = None, *,
                       kip848_coordinator_metrics: bool = True) -> EngineSetup:
    """The settings, subscriptions and metrics of an engine built on ``config`` (a
    validated ConsumerConfig); ``settings``: its EngineConfig, if the caller built it."""
    if settings is None:
        settings = EngineConfig.from_config(config)
    subscriptions = SubscriptionState(settings.auto_offset_reset)
    subscriptions.event_source = settings.client_id
    metrics = build_metrics(config)
    fetch_metrics = consumer_metrics = coordinator_metrics = None
    if metrics is not None:
        prefix = settings.metric_group_prefix
        fetch_metrics = FetchMetricsManager(metrics, subscriptions, prefix, settings.isolation_level)
        consumer_metrics = KafkaConsumerMetrics(metrics, prefix)
        if settings.group_id and kip848_coordinator_metrics:
            coordinator_metrics = CoordinatorMetrics(
                metrics, subscriptions.num_assigned_partitions, prefix, classic=False)
    return EngineSetup(settings, subscriptions, metrics, fetch_metrics, consumer_metrics, coordinator_metrics)
