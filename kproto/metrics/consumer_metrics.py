"""The consumer's own metric sets outside the fetch pipeline, with Java's names.

* ``KafkaConsumerMetrics`` - group ``<prefix>-metrics`` (Java's KafkaConsumerMetrics):
  ``last-poll-seconds-ago``, ``time-between-poll-avg/max``, ``poll-idle-ratio-avg``,
  ``commit-sync-time-ns-total``, ``committed-time-ns-total``. Recorded by the engines
  around ``poll()``, ``commit()`` and ``committed()`` on the application thread.
* ``CoordinatorMetrics`` - group ``<prefix>-coordinator-metrics`` (Java's
  GroupCoordinatorMetrics + ConsumerCoordinatorMetrics for the classic protocol; the
  heartbeat, commit, rebalance and assigned-partitions metrics of the new protocol's
  HeartbeatMetricsManager, OffsetCommitMetricsManager and ConsumerRebalanceMetricsManager).
  ``classic=True`` adds the JoinGroup/SyncGroup sensors only the classic protocol has.
* ``build_metrics(...)`` and ``metrics_view(metrics, raw)``: the registry from
  kafka-python's settings and kafka-python's ``metrics()`` answer, for both engines.

Latencies are passed in (ms, measured by the caller's clock); the moments gauges compare
against ("seconds ago") use the registry's clock. The prefix is kafka-python's
``metric_group_prefix`` ("consumer").
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Optional, TypeVar

from kproto.metrics.metric_name import MetricConfig
from kproto.metrics.metrics import Metrics, by_group, wall_clock_ms
from kproto.metrics.stats import (Avg, CumulativeCount, CumulativeSum, Gauge, Max, Meter, Rate, WindowedCount)


def _seconds_since(metrics: Metrics, then_ms: Optional[float]) -> int:
    if then_ms is None:
        return -1
    return int((metrics.time_ms() - then_ms) // 1000)


class KafkaConsumerMetrics:
    """Poll timing and the time spent in synchronous commits and committed() lookups."""

    def __init__(self, metrics: Metrics, prefix: str = "consumer") -> None:
        self.metrics = metrics
        group = prefix + "-metrics"
        name = metrics.metric_name
        self._last_poll_ms: Optional[int] = None
        self._poll_start_ms = 0
        self._time_since_last_poll_ms = 0
        metrics.add_metric(name("last-poll-seconds-ago", group, "The number of seconds since the last poll() call"),
                           Gauge(lambda config, now: _seconds_since(metrics, self._last_poll_ms)))
        self.time_between_poll = metrics.sensor("time-between-poll")
        self.time_between_poll.add(name("time-between-poll-avg", group,
                                        "The average delay between invocations of poll() in milliseconds"), Avg())
        self.time_between_poll.add(name("time-between-poll-max", group,
                                        "The max delay between invocations of poll() in milliseconds"), Max())
        self.poll_idle = metrics.sensor("poll-idle-ratio-avg")
        self.poll_idle.add(name("poll-idle-ratio-avg", group,
                                "The average fraction of time the consumer's poll() is idle as opposed to waiting "
                                "for the user code to process records"), Avg())
        self.commit_sync = metrics.sensor("commit-sync-time-ns-total")
        self.commit_sync.add(name("commit-sync-time-ns-total", group,
                                  "The total time the consumer has spent in commitSync in nanoseconds"),
                             CumulativeSum())
        self.committed = metrics.sensor("committed-time-ns-total")
        self.committed.add(name("committed-time-ns-total", group,
                                "The total time the consumer has spent in committed in nanoseconds"), CumulativeSum())

    def record_poll_start(self, now_ms: Optional[int] = None) -> None:
        now_ms = self.metrics.time_ms() if now_ms is None else now_ms
        self._poll_start_ms = now_ms
        last = self._last_poll_ms
        self._time_since_last_poll_ms = now_ms - last if last is not None else 0
        self.time_between_poll.record(self._time_since_last_poll_ms, now_ms)
        self._last_poll_ms = now_ms

    def record_poll_end(self, now_ms: Optional[int] = None) -> None:
        now_ms = self.metrics.time_ms() if now_ms is None else now_ms
        poll_time = now_ms - self._poll_start_ms
        denominator = poll_time + self._time_since_last_poll_ms
        # Java divides regardless and records NaN for a 0 ms first poll; skip that one.
        if denominator > 0:
            self.poll_idle.record(poll_time / denominator, now_ms)

    def record_commit_sync(self, ns: int) -> None:
        self.commit_sync.record(ns)

    def record_committed(self, ns: int) -> None:
        self.committed.record(ns)


T = TypeVar("T")


def timed_poll(metrics: Optional[KafkaConsumerMetrics], poll: Callable[..., T], *args: Any) -> T:
    """``poll(*args)`` between ``record_poll_start`` and ``record_poll_end`` (every engine's
    ``poll``, as Java's consumers do; just the call when metrics are off)."""
    if metrics is None:
        return poll(*args)
    metrics.record_poll_start()
    try:
        return poll(*args)
    finally:
        metrics.record_poll_end()


class CoordinatorMetrics:
    """Heartbeats, commits, rebalances, listener timings, assigned partitions (and classic joins)."""

    def __init__(self, metrics: Metrics, assigned_partitions: Callable[[], int], prefix: str = "consumer",
                 classic: bool = True) -> None:
        self.metrics = metrics
        group = prefix + "-coordinator-metrics"
        self.group = group
        name = metrics.metric_name
        self._lock = threading.Lock()
        self._last_heartbeat_send_ms: Optional[int] = None
        self._rebalance_start_ms: Optional[int] = None
        self._last_rebalance_end_ms: Optional[int] = None

        self.heartbeat = self._latency_meter("heartbeat-latency", "heartbeat", group, avg=False,
                                             max_name="heartbeat-response-time-max")
        self.commit = self._latency_meter("commit-latency", "commit", group, avg=True,
                                          max_name="commit-latency-max", avg_name="commit-latency-avg")
        self.join = self.sync = None
        if classic:
            self.join = self._latency_meter("join-latency", "join", group, avg=True, max_name="join-time-max",
                                            avg_name="join-time-avg")
            self.sync = self._latency_meter("sync-latency", "sync", group, avg=True, max_name="sync-time-max",
                                            avg_name="sync-time-avg")
        self.rebalance = metrics.sensor("rebalance-latency")
        self.rebalance.add(name("rebalance-latency-avg", group, "The average time taken for a group to complete a "
                                "successful rebalance, in ms"), Avg())
        self.rebalance.add(name("rebalance-latency-max", group, "The max time taken for a group to complete a "
                                "successful rebalance, in ms"), Max())
        self.rebalance.add(name("rebalance-latency-total", group, "The total number of milliseconds this consumer "
                                "has spent in successful rebalances since creation"), CumulativeSum())
        self.rebalance.add(name("rebalance-total", group, "The total number of successful rebalance events"),
                           CumulativeCount())
        self.rebalance.add(name("rebalance-rate-per-hour", group, "The number of successful rebalance events per "
                                "hour"), Rate("hours", WindowedCount()))
        self.failed_rebalance = metrics.sensor("failed-rebalance")
        self.failed_rebalance.add(name("failed-rebalance-total", group, "The total number of failed rebalance "
                                       "events"), CumulativeCount())
        self.failed_rebalance.add(name("failed-rebalance-rate-per-hour", group, "The number of failed rebalance "
                                       "events per hour"), Rate("hours", WindowedCount()))
        metrics.add_metric(name("last-rebalance-seconds-ago", group, "The number of seconds since the last "
                                "successful rebalance event"),
                           Gauge(lambda config, now: _seconds_since(metrics, self._last_rebalance_end_ms)))
        metrics.add_metric(name("last-heartbeat-seconds-ago", group, "The number of seconds since the last "
                                "coordinator heartbeat was sent"),
                           Gauge(lambda config, now: _seconds_since(metrics, self._last_heartbeat_send_ms)))
        metrics.add_metric(name("assigned-partitions", group, "The number of partitions currently assigned to "
                                "this consumer"), Gauge(lambda config, now: assigned_partitions()))
        self.listener: dict[str, object] = {}
        for method, what in (("on_partitions_revoked", "revoked"), ("on_partitions_assigned", "assigned"),
                             ("on_partitions_lost", "lost")):
            sensor = metrics.sensor("partition-{}-latency".format(what))
            sensor.add(name("partition-{}-latency-avg".format(what), group, "The average time taken for a "
                            "partition-{} rebalance listener callback".format(what)), Avg())
            sensor.add(name("partition-{}-latency-max".format(what), group, "The max time taken for a "
                            "partition-{} rebalance listener callback".format(what)), Max())
            self.listener[method] = sensor

    def _latency_meter(self, sensor_name: str, what: str, group: str, avg: bool, max_name: str,
                       avg_name: str = ""):
        name = self.metrics.metric_name
        sensor = self.metrics.sensor(sensor_name)
        if avg:
            sensor.add(name(avg_name, group, "The average time taken for a {} request".format(what)), Avg())
        sensor.add(name(max_name, group, "The max time taken for a {} request".format(what)), Max())
        sensor.add(Meter(name(what + "-rate", group, "The number of {} calls per second".format(what)),
                         name(what + "-total", group, "The total number of {} calls".format(what)),
                         WindowedCount()))
        return sensor

    # --- recording ---------------------------------------------------------------------

    def heartbeat_sent(self) -> None:
        self._last_heartbeat_send_ms = self.metrics.time_ms()

    def record_heartbeat(self, latency_ms: float) -> None:
        self.heartbeat.record(latency_ms)

    def record_commit(self, latency_ms: float) -> None:
        self.commit.record(latency_ms)

    def record_join(self, latency_ms: float) -> None:
        if self.join is not None:
            self.join.record(latency_ms)

    def record_sync(self, latency_ms: float) -> None:
        if self.sync is not None:
            self.sync.record(latency_ms)

    def record_listener(self, method: str, latency_ms: float) -> None:
        sensor = self.listener.get(method)
        if sensor is not None:
            sensor.record(latency_ms)  # type: ignore[attr-defined]

    def rebalance_started(self) -> None:
        """A rebalance began (classic: JoinGroup sent; new protocol: reconciling); kept if one is open."""
        with self._lock:
            if self._rebalance_start_ms is None:
                self._rebalance_start_ms = self.metrics.time_ms()

    def rebalance_ended(self) -> None:
        with self._lock:
            start, self._rebalance_start_ms = self._rebalance_start_ms, None
            if start is None:
                return
            now = self.metrics.time_ms()
            self._last_rebalance_end_ms = now
        self.rebalance.record(now - start, now)

    def rebalance_failed(self) -> None:
        """A join/sync attempt failed; as Java, the rebalance's start is kept for the retry."""
        self.failed_rebalance.record()


def build_metrics(*, enabled: bool = True, num_samples: int = 2, sample_window_ms: int = 30000,
                  client_id: str = "", reporters: Iterable[Any] = (),
                  time_ms: Callable[[], int] = wall_clock_ms) -> Optional[Metrics]:
    """The consumer's registry from kafka-python's settings (``metrics_enabled``,
    ``metrics_num_samples``, ``metrics_sample_window_ms``, ``client_id``,
    ``metric_reporters``); None when not ``enabled``.

    ``num_samples``/``sample_window_ms`` set the windows, every name gets the ``client-id``
    tag, and each reporter (a class, as kafka-python takes, or a ready instance) is
    instantiated and initialised."""
    if not enabled:
        return None
    metric_config = MetricConfig(samples=num_samples, time_window_ms=sample_window_ms,
                                 tags={"client-id": str(client_id)})
    made = [r() if isinstance(r, type) else r for r in reporters]
    return Metrics(metric_config, made, time_ms)


def metrics_view(metrics: Optional[Metrics], raw: bool) -> Optional[dict[Any, Any]]:
    """kafka-python's ``KafkaConsumer.metrics(raw)``: None without metrics, the registry's
    ``{MetricName: KafkaMetric}`` when raw, else ``{group: {name: value}}``."""
    if metrics is None:
        return None
    return metrics.metrics if raw else by_group(metrics)
