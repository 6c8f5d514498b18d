"""What a consumer engine builds first from its settings: one builder for every shell.

Owns the application-side set-up the caller's-thread engine (``ClassicKafkaConsumer``),
the background-thread engine (``AsyncKafkaConsumer``) and the event-loop shell
(``kproto.aio``'s ``AIOKafkaConsumer``) share, as Java's consumers each do in their
constructors, from the typed settings (:class:`~kproto.consumer.engine_config.EngineConfig`):
the ``SubscriptionState`` stamped with the client id, and the metrics (the registry, the
fetch and consumer metrics, and for a KIP-848 group member its coordinator metrics; all
None when ``metrics_enabled`` is off; ``engine_metrics``, the registry alone, serves the
share engine too). Built before any thread starts: the managers record into the metrics
(see DESIGN.md "Metrics").
"""

from __future__ import annotations

import dataclasses
from typing import Optional

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


def engine_metrics(settings: EngineConfig) -> Optional[Metrics]:
    """The engine's metrics registry (None when ``metrics_enabled`` is off)."""
    return build_metrics(enabled=settings.metrics_enabled, num_samples=settings.metrics_num_samples,
                         sample_window_ms=settings.metrics_sample_window_ms, client_id=settings.client_id,
                         reporters=settings.metric_reporters)


def build_engine_setup(settings: EngineConfig, *, kip848_coordinator_metrics: bool = True) -> EngineSetup:
    """The subscriptions and metrics of an engine with ``settings``."""
    subscriptions = SubscriptionState(settings.auto_offset_reset)
    subscriptions.event_source = settings.client_id
    metrics = engine_metrics(settings)
    fetch_metrics = consumer_metrics = coordinator_metrics = None
    if metrics is not None:
        prefix = settings.metric_group_prefix
        fetch_metrics = FetchMetricsManager(metrics, subscriptions, prefix, settings.isolation_level)
        consumer_metrics = KafkaConsumerMetrics(metrics, prefix)
        if settings.group_id and kip848_coordinator_metrics:
            coordinator_metrics = CoordinatorMetrics(
                metrics, subscriptions.num_assigned_partitions, prefix, classic=False)
    return EngineSetup(settings, subscriptions, metrics, fetch_metrics, consumer_metrics, coordinator_metrics)
