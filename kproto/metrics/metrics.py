"""Metrics: the registry of sensors and metrics (Java's ``org.apache.kafka.common.metrics.Metrics``).

Owns every ``Sensor`` (by name) and every ``KafkaMetric`` (by ``MetricName``), the
default ``MetricConfig`` (its tags, e.g. ``client-id``, go into every name made by
``metric_name``), the clock (``time_ms``, fed in: tests use a fake one, nothing here
sleeps) and the reporters. Reporters follow kafka-python's ``AbstractMetricsReporter``:
``init(existing_metrics)`` when added, ``metric_change(metric)`` for every metric added,
``metric_removal(metric)`` for every one removed, ``close()`` when the registry closes.

Deferred registration (``add_deferred``): an owner that makes many metrics on a hot path
(the consumer's per-partition lags and leads: six metrics per partition, on the
partition's first fetched records) may hold them back while nobody looks, registering
them from a callback the registry runs before every read (``metrics``, ``metric``)
and before a reporter is added. A reader sees every metric that exists by
then, as if each had been registered at once; an owner registers at once while reporters
are attached (they are told of each metric as it is made: ``has_reporters``).

The registry's dictionaries are guarded by one RLock; reporters are called under it (as
Java's synchronized registry does), so a reporter must not call back into the registry
from another thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from kproto.metrics.metric_name import MetricConfig, MetricName
from kproto.metrics.sensor import KafkaMetric, Sensor
from kproto.metrics.stats import Gauge, Measurable

log = logging.getLogger("kproto.metrics")


def wall_clock_ms() -> int:
    """Java's ``Time.SYSTEM.milliseconds()``: the default clock of the registry."""
    return int(time.time() * 1000)


class Metrics:
    """The registry; see the module docstring."""

    def __init__(self, config: Optional[MetricConfig] = None, reporters: Iterable[Any] = (),
                 time_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config or MetricConfig()
        self.time_ms = time_ms
        self._lock = threading.RLock()
        self._sensors: dict[str, Sensor] = {}
        self._children: dict[str, list[str]] = {}
        self._metrics: dict[MetricName, KafkaMetric] = {}
        self._reporters: list[Any] = []
        self._deferred: list[Callable[[], None]] = []
        self._closed = False
        for reporter in reporters:
            self.add_reporter(reporter)

    # --- names -----------------------------------------------------------------------

    def metric_name(self, name: str, group: str, description: str = "",
                    tags: Optional[Mapping[str, str]] = None) -> MetricName:
        """A MetricName with the config's default tags, overridden by ``tags``."""
        combined = dict(self.config.tags)
        combined.update(tags or {})
        return MetricName(name, group, description, combined)

    # --- sensors ---------------------------------------------------------------------

    def get_sensor(self, name: str) -> Optional[Sensor]:
        """The sensor called ``name``, or None. An owner's lookup of its own sensors, on hot
        paths: it does not register what owners hold back (``add_deferred``), whose
        sensors are found once the registry was read."""
        with self._lock:
            return self._sensors.get(name)

    def sensor(self, name: str, config: Optional[MetricConfig] = None, parents: Iterable[Sensor] = (),
               lock: Optional[Any] = None) -> Sensor:
        """The sensor called ``name``, created (with ``parents`` and, if given, a ``lock``
        it shares with other sensors) if there is none yet."""
        with self._lock:
            sensor = self._sensors.get(name)
            if sensor is None:
                parents = tuple(parents)
                sensor = Sensor(self, name, parents, config or self.config, self.time_ms, lock)
                self._sensors[name] = sensor
                for parent in parents:
                    self._children.setdefault(parent.name, []).append(name)
            return sensor

    def remove_sensor(self, name: str) -> None:
        """Remove the sensor, its metrics and (as Java) the sensors that have it as a parent."""
        with self._lock:
            sensor = self._sensors.pop(name, None)
            if sensor is None:
                return
            for metric in sensor.metrics():
                self.remove_metric(metric.metric_name)
            for parent in sensor.parents:
                siblings = self._children.get(parent.name)
                if siblings and name in siblings:
                    siblings.remove(name)
            for child in self._children.pop(name, []):
                self.remove_sensor(child)

    # --- metrics ---------------------------------------------------------------------

    def add_metric(self, metric_name: MetricName, measurable: Union[Measurable, Gauge],
                   config: Optional[MetricConfig] = None) -> KafkaMetric:
        """A metric outside any sensor (a gauge, usually); a duplicate name is a ValueError."""
        metric = KafkaMetric(threading.Lock(), metric_name, measurable, config or self.config, self.time_ms)
        self.register_metric(metric)
        return metric

    def add_metric_if_absent(self, metric_name: MetricName, measurable: Union[Measurable, Gauge],
                             config: Optional[MetricConfig] = None) -> KafkaMetric:
        with self._lock:
            existing = self._metrics.get(metric_name)
            return existing if existing is not None else self.add_metric(metric_name, measurable, config)

    def register_metric(self, metric: KafkaMetric) -> None:
        with self._lock:
            if metric.metric_name in self._metrics:
                raise ValueError("A metric named {!r} already exists".format(metric.metric_name))
            self._metrics[metric.metric_name] = metric
            for reporter in self._reporters:
                self._notify(reporter, "metric_change", metric)

    def remove_metric(self, metric_name: MetricName) -> Optional[KafkaMetric]:
        with self._lock:
            metric = self._metrics.pop(metric_name, None)
            if metric is not None:
                for reporter in self._reporters:
                    self._notify(reporter, "metric_removal", metric)
            return metric

    def metric(self, metric_name: MetricName) -> Optional[KafkaMetric]:
        self._register_deferred()
        with self._lock:
            return self._metrics.get(metric_name)

    @property
    def metrics(self) -> dict[MetricName, KafkaMetric]:
        """A snapshot ``{MetricName: KafkaMetric}`` (kafka-python's ``metrics(raw=True)``)."""
        self._register_deferred()
        with self._lock:
            return dict(self._metrics)

    # --- deferred registration (see the module docstring) -------------------------------

    def add_deferred(self, register: Callable[[], None]) -> None:
        """Call ``register()`` before every read of the registry and before a reporter is
        added: it registers the metrics its owner held back."""
        with self._lock:
            self._deferred.append(register)

    def has_reporters(self) -> bool:
        """Whether reporters are attached (an owner then registers at once, not deferred)."""
        return bool(self._reporters)

    def _register_deferred(self) -> None:
        # Outside the registry's lock: an owner takes its own lock first, then the
        # registry's (the consumer's documented lock order).
        for register in self._deferred:
            register()

    # --- reporters and lifecycle -------------------------------------------------------

    def add_reporter(self, reporter: Any) -> None:
        self._register_deferred()
        with self._lock:
            reporter.init(list(self._metrics.values()))
            self._reporters.append(reporter)

    @staticmethod
    def _notify(reporter: Any, method: str, metric: KafkaMetric) -> None:
        # A broken reporter must not break the consumer path that recorded the change.
        try:
            getattr(reporter, method)(metric)
        except Exception:  # noqa: BLE001
            log.exception("metrics reporter %r failed in %s(%s)", reporter, method, metric.metric_name)

    def close(self) -> None:
        """Close the reporters and forget every sensor and metric."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for reporter in self._reporters:
                try:
                    reporter.close()
                except Exception:  # noqa: BLE001
                    log.exception("metrics reporter %r failed to close", reporter)
            self._reporters.clear()
            self._sensors.clear()
            self._children.clear()
            self._metrics.clear()


def by_group(metrics: Metrics, now_ms: Optional[int] = None) -> dict[str, dict[str, Any]]:
    """``{group: {name: value}}``, kafka-python's ``metrics(raw=False)``.

    That shape drops the tags, so per-topic and per-partition metrics share names with the
    client-wide ones; where names collide the one with the fewest tags (the client-wide
    one) is given, so the answer does not depend on dictionary order. Read tagged metrics
    with ``metrics(raw=True)``.
    """
    now_ms = metrics.time_ms() if now_ms is None else now_ms
    out: dict[str, dict[str, Any]] = {}
    width: dict[tuple[str, str], int] = {}
    for metric_name, metric in metrics.metrics.items():
        key = (metric_name.group, metric_name.name)
        tags = len(metric_name.tags)
        if key in width and width[key] <= tags:
            continue
        width[key] = tags
        out.setdefault(metric_name.group, {})[metric_name.name] = metric.metric_value(now_ms)
    return out
