"""Sensor and KafkaMetric: where values are recorded and where metrics are read.

Java's ``Sensor`` and ``KafkaMetric``. A sensor is a named handle that records one kind
of measurement (a fetch latency, a number of bytes) into its stats, then into its parent
sensors; each stat is exposed as one ``KafkaMetric`` (a ``Meter`` as two). Recording and
reading take the sensor's lock, as Java's ``synchronized`` sensor does, because several
threads record: the application thread (poll, collection), the classic heartbeat thread
(responses it completes) and the KIP-848 background thread (every response). Parents are
recorded after the child's lock is released, so a child never holds two locks.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from kproto.metrics.metric_name import MetricConfig, MetricName
from kproto.metrics.stats import CompoundStat, Gauge, Measurable, Stat

if TYPE_CHECKING:
    from kproto.metrics.metrics import Metrics


class KafkaMetric:
    """One named value: a stat of a sensor, or a gauge read on demand."""

    __slots__ = ("metric_name", "measurable", "config", "_lock", "_time_ms")

    def __init__(self, lock: Any, metric_name: MetricName, measurable: Union[Measurable, Gauge],
                 config: MetricConfig, time_ms: Callable[[], int]) -> None:
        self.metric_name = metric_name
        self.measurable = measurable
        self.config = config
        self._lock = lock
        self._time_ms = time_ms

    def metric_value(self, now_ms: int) -> Any:
        """The value at ``now_ms`` (a sampled stat purges windows older than that)."""
        with self._lock:
            if isinstance(self.measurable, Gauge):
                return self.measurable.value(self.config, now_ms)
            return self.measurable.measure(self.config, now_ms)

    def value(self, now_ms: Optional[int] = None) -> Any:
        """The value now (kafka-python's ``KafkaMetric.value()``)."""
        return self.metric_value(self._time_ms() if now_ms is None else now_ms)

    def __repr__(self) -> str:
        return "KafkaMetric({!r})".format(self.metric_name)


class Sensor:
    """Records values into its stats and its parents' (see the module docstring)."""

    def __init__(self, registry: "Metrics", name: str, parents: tuple["Sensor", ...], config: MetricConfig,
                 time_ms: Callable[[], int], lock: Optional[Any] = None) -> None:
        self.name = name
        self.parents = parents
        self.config = config
        self._registry = registry
        self._time_ms = time_ms
        self._stats: list[Any] = []
        self._recorders: tuple[Any, ...] = ()  # (stat.record, config) pairs: bound once, not per record
        self._metrics: dict[MetricName, KafkaMetric] = {}
        # Sensors may share one lock (``Metrics.sensor(lock=...)``): the consumer's
        # per-partition lag and lead sensors do, and it also guards the values their
        # FetchMetricsManager holds back for them (read under it, handed over first).
        self.lock = threading.Lock() if lock is None else lock
        for parent in parents:
            if parent is self:
                raise ValueError("sensor {!r} cannot be its own parent".format(name))

    def record(self, value: float = 1.0, now_ms: Optional[int] = None) -> None:
        """Record ``value`` at ``now_ms`` (default: the registry's clock) here and in the parents."""
        if now_ms is None:
            now_ms = self._time_ms()
        with self.lock:
            for record, config in self._recorders:
                record(config, value, now_ms)
        for parent in self.parents:
            parent.record(value, now_ms)

    def add(self, metric: Union[MetricName, CompoundStat], stat: Optional[Stat] = None,
            config: Optional[MetricConfig] = None) -> bool:
        """``add(metric_name, stat)`` or ``add(compound_stat)`` (a Meter names its own metrics).

        Returns False (and changes nothing) if the metric is already on this sensor."""
        config = config or self.config
        if isinstance(metric, CompoundStat):
            parts = metric.stats()
            if any(name in self._metrics for name, _ in parts):
                return False
            self._add_stat(metric, config)
            for name, measurable in parts:
                self._register(name, measurable, config)
            return True
        if stat is None:
            raise ValueError("add(metric_name, stat): the stat is missing")
        if metric in self._metrics:
            return False
        self._add_stat(stat, config)
        self._register(metric, stat, config)
        return True

    def _add_stat(self, stat: Any, config: MetricConfig) -> None:
        with self.lock:
            self._stats.append((stat, config))
            self._recorders = tuple((s.record, c) for s, c in self._stats)

    def _register(self, name: MetricName, measurable: Measurable, config: MetricConfig) -> None:
        kafka_metric = KafkaMetric(self.lock, name, measurable, config, self._time_ms)
        self._registry.register_metric(kafka_metric)
        self._metrics[name] = kafka_metric

    def metrics(self) -> list[KafkaMetric]:
        return list(self._metrics.values())
