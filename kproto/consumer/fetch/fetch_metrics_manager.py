"""FetchMetricsManager: the ``<prefix>-fetch-manager-metrics`` group, Java's names.

Java's ``FetchMetricsManager`` + ``FetchMetricsRegistry`` + ``FetchMetricsAggregator``.
Who records what (one home for both engines, the shared fetch pipeline):

* ``AbstractFetch.handle_fetch_success`` (the thread that completed the response: the
  application or heartbeat thread in the classic engine, the background thread in the
  KIP-848 one): ``fetch-latency-avg/max``, ``fetch-rate/total``, and
  ``fetch-throttle-time-avg/max`` from the response's ``throttle_time_ms`` (the network
  listener, ``kproto.metrics.selector_metrics``, records every other response's throttle
  time into the same sensor, as Java's NetworkClient does). It hands each ``CompletedFetch`` of the response one
  ``FetchMetricsAggregator``.
* ``CompletedFetch.drain`` (application thread: fully read, stale, errored or dropped)
  reports its bytes (sizes of the batches iterated) and records handed out to the
  aggregator; once every partition of the response has reported, the response's totals
  go to ``fetch-size-avg/max``, ``bytes-consumed-rate/total``, ``records-per-request-avg``,
  ``records-consumed-rate/total`` and the same per topic (tag ``topic``). So the counts
  are per response, not per record, and appear once the response's data was consumed.
* ``FetchCollector`` after each batch of records it takes for a partition (application
  thread; recorded at the end of the collection, one time stamp for all): ``records-lag``/
  ``-avg``/``-max`` and ``records-lead``/``-avg``/``-min`` per partition (tags ``topic``,
  ``partition``) and the client-wide ``records-lag-max`` and ``records-lead-min`` (the
  collection's extremes). Lag is the high watermark (last stable offset under
  read_committed) minus the position, lead the position minus the log start offset.
  The per-partition values are held back (with their time stamps) and go into each
  partition's stat at once, before any of them is read: what a reader sees is what
  recording each at once shows (``record_partitions_lag_and_lead``).
* ``maybe_update_assignment`` (from ``prepare_fetch_requests`` and before metrics are
  read): per-partition sensors and the ``preferred-read-replica`` gauge of partitions no
  longer assigned are removed; newly assigned partitions get the gauge.
* The per-partition sensors and gauges (seven metrics per partition) are registered when
  the registry is next read (``Metrics.add_deferred``), or at once while reporters are
  attached: with many partitions, registering them cost more than the first records.

Every sensor has its own lock, except the per-partition lag and lead sensors, which share
one (the partition lock: it also guards the values held back for them, so a reader of any
of their metrics, holding it, hands those over first); this object's lock guards the
assignment bookkeeping. Lock order: this object's, the registry's, the partition lock.
"""

from __future__ import annotations

import functools
import threading
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable, Optional

from kproto.metrics import Avg, Gauge, LatestExtremeAvg, Max, Meter, Metrics, Min, WindowedCount
from kproto.structs import IsolationLevel, TopicPartition

if TYPE_CHECKING:
    from kproto.consumer.subscription_state import SubscriptionState

#: Lags and leads (rows of partitions) held back at most before they go into the stats.
_MAX_PENDING_ROWS = 20_000


def _partition_sensor_name(tp: TopicPartition, kind: str) -> str:
    """The registry name of ``tp``'s ``records-lag`` or ``records-lead`` sensor."""
    return "{}-{}.{}".format(tp.topic, tp.partition, kind)


class FetchMetricsManager:
    """The fetch metrics of one consumer; see the module docstring."""

    def __init__(self, metrics: Metrics, subscriptions: SubscriptionState, prefix: str = "consumer",
                 isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED) -> None:
        self.metrics = metrics
        self.subscriptions = subscriptions
        self.isolation_level = isolation_level
        self.group = group = prefix + "-fetch-manager-metrics"
        name = metrics.metric_name
        self._lock = threading.Lock()
        self._partition_lock = threading.Lock()  # the per-partition lag/lead sensors'
        self._assignment_id = -1
        self._assigned: frozenset[TopicPartition] = frozenset()
        # Each partition's records-lag and records-lead stat (the one stat of its sensor: the
        # collector records into it, no registry lookup), and the lags and leads held back for
        # them (see record_partitions_lag_and_lead): (time stamp, [(partition, lag, lead),
        # ...]) per collection, under the partition lock.
        self._lag_stats: dict[TopicPartition, LatestExtremeAvg] = {}
        self._lead_stats: dict[TopicPartition, LatestExtremeAvg] = {}
        self._pending: list[tuple[int, list[tuple[TopicPartition, Optional[int], Optional[int]]]]] = []
        self._pending_rows = 0
        # Partition stats whose sensors are not registered yet (see _partition_stat), and
        # the assigned partitions whose preferred-read-replica gauge is.
        self._unregistered: list[tuple[TopicPartition, str, LatestExtremeAvg]] = []
        self._replica_gauges: set[TopicPartition] = set()
        metrics.add_deferred(self._register_partition_metrics)

        self.bytes_fetched = metrics.sensor("bytes-fetched")
        self._add_size_stats(self.bytes_fetched, None)
        self.records_fetched = metrics.sensor("records-fetched")
        self._add_records_stats(self.records_fetched, None)
        self.fetch_latency = metrics.sensor("fetch-latency")
        self.fetch_latency.add(name("fetch-latency-avg", group, "The average time taken for a fetch request."), Avg())
        self.fetch_latency.add(name("fetch-latency-max", group, "The max time taken for any fetch request."), Max())
        self.fetch_latency.add(Meter(name("fetch-rate", group, "The number of fetch requests per second."),
                                     name("fetch-total", group, "The total number of fetch requests."),
                                     WindowedCount()))
        self.records_lag = metrics.sensor("records-lag")
        self.records_lag.add(name("records-lag-max", group, "The maximum lag in terms of number of records for any "
                                  "partition in this window"), Max())
        self.records_lead = metrics.sensor("records-lead")
        self.records_lead.add(name("records-lead-min", group, "The minimum lead in terms of number of records for "
                                   "any partition in this window"), Min())
        self.throttle_time = metrics.sensor("fetch-throttle-time")
        self.throttle_time.add(name("fetch-throttle-time-avg", group, "The average throttle time in ms"), Avg())
        self.throttle_time.add(name("fetch-throttle-time-max", group, "The maximum throttle time in ms"), Max())

    def _add_size_stats(self, sensor: Any, topic: Optional[str]) -> None:
        name = self.metrics.metric_name
        tags = None if topic is None else {"topic": topic}
        where = "" if topic is None else " for a topic"
        sensor.add(name("fetch-size-avg", self.group, "The average number of bytes fetched per request" + where,
                        tags), Avg())
        sensor.add(name("fetch-size-max", self.group, "The maximum number of bytes fetched per request" + where,
                        tags), Max())
        sensor.add(Meter(name("bytes-consumed-rate", self.group, "The average number of bytes consumed per second"
                              + where, tags),
                         name("bytes-consumed-total", self.group, "The total number of bytes consumed" + where,
                              tags)))

    def _add_records_stats(self, sensor: Any, topic: Optional[str]) -> None:
        name = self.metrics.metric_name
        tags = None if topic is None else {"topic": topic}
        where = "" if topic is None else " for a topic"
        sensor.add(name("records-per-request-avg", self.group, "The average number of records in each request"
                        + where, tags), Avg())
        sensor.add(Meter(name("records-consumed-rate", self.group, "The average number of records consumed per "
                              "second" + where, tags),
                         name("records-consumed-total", self.group, "The total number of records consumed" + where,
                              tags)))

    # --- recording ----------------------------------------------------------------------

    def record_latency(self, latency_ms: float) -> None:
        self.fetch_latency.record(latency_ms)

    def record_throttle_time(self, throttle_time_ms: float) -> None:
        self.throttle_time.record(throttle_time_ms)

    def record_fetched(self, total_bytes: int, total_records: int, per_topic: dict[str, list[int]]) -> None:
        """One response's totals, client-wide and per topic."""
        now = self.metrics.time_ms()
        self.bytes_fetched.record(total_bytes, now)
        self.records_fetched.record(total_records, now)
        for topic, (nbytes, nrecords) in per_topic.items():
            sensor = self.metrics.get_sensor("topic." + topic + ".bytes-fetched")
            if sensor is None:
                sensor = self.metrics.sensor("topic." + topic + ".bytes-fetched")
                self._add_size_stats(sensor, topic)
            sensor.record(nbytes, now)
            sensor = self.metrics.get_sensor("topic." + topic + ".records-fetched")
            if sensor is None:
                sensor = self.metrics.sensor("topic." + topic + ".records-fetched")
                self._add_records_stats(sensor, topic)
            sensor.record(nrecords, now)

    def _partition_stat(self, tp: TopicPartition, kind: str) -> LatestExtremeAvg:
        """``tp``'s ``records-lag`` or ``records-lead`` stat, made on the partition's first
        value, as Java's ``recordPartitionLag``/``Lead`` make their sensors. Its sensor and
        metrics are registered when the registry is next read (``Metrics.add_deferred``:
        ``_register_partition_metrics``), or at once while reporters are attached: six
        metrics per partition cost more than the partition's first records (1,000
        partitions: ~40 ms before the first poll could return), and most applications
        never read them."""
        stats = self._lag_stats if kind == "records-lag" else self._lead_stats
        with self._lock:
            stat = stats.get(tp)
            if stat is not None:
                return stat
            # Java's Value, Max (Min) and Avg as one stat: the same metrics, one call per value.
            stat = LatestExtremeAvg(maximum=kind == "records-lag")
            stat.flush = self._fold  # a reader holds the sensor's lock: the partition lock
            stats[tp] = stat
            self._unregistered.append((tp, kind, stat))
        if self.metrics.has_reporters():
            self._register_partition_metrics()  # reporters hear of each metric as it is made
        return stat

    def _register_partition_metrics(self) -> None:
        """The registry's deferred registration: the ``preferred-read-replica`` gauges of
        the partitions assigned and the sensors and metrics of the partition stats made
        since the last read (those of partitions unassigned meanwhile went with them)."""
        if not self._unregistered and len(self._replica_gauges) == len(self._assigned):
            return
        with self._lock:
            for tp in self._assigned - self._replica_gauges:
                self.metrics.add_metric_if_absent(self._replica_name(tp), Gauge(
                    functools.partial(self._preferred_read_replica, tp)))
                self._replica_gauges.add(tp)
            held, self._unregistered = self._unregistered, []
            for tp, kind, stat in held:
                stats = self._lag_stats if kind == "records-lag" else self._lead_stats
                if stats.get(tp) is stat:
                    self._register_partition_stat(tp, kind, stat)

    def _register_partition_stat(self, tp: TopicPartition, kind: str, stat: LatestExtremeAvg) -> None:
        """``stat``'s sensor (on the shared partition lock) and its three metrics (this
        object's lock is held)."""
        sensor_name = _partition_sensor_name(tp, kind)
        # One manager per registry: a sensor of that name from elsewhere would not be on
        # this manager's lock, so it is replaced.
        self.metrics.remove_sensor(sensor_name)
        sensor = self.metrics.sensor(sensor_name, lock=self._partition_lock)
        tags = {"topic": tp.topic, "partition": str(tp.partition)}
        name = self.metrics.metric_name
        what = "latest lag" if kind == "records-lag" else "latest lead"
        maximum = kind == "records-lag"
        stat.names = (name(kind, self.group, "The {} of the partition".format(what), tags),
                      name(kind + ("-max" if maximum else "-min"), self.group,
                           "The {} {} of the partition".format("max" if maximum else "min", kind[8:]), tags),
                      name(kind + "-avg", self.group, "The average {} of the partition".format(kind[8:]), tags))
        sensor.add(stat)

    def record_partition_lag_and_lead(self, tp: TopicPartition) -> None:
        """After records of ``tp`` were taken: its lag and lead at the new position."""
        self.record_partitions_lag_and_lead((tp,))

    def record_partitions_lag_and_lead(self, partitions: Iterable[TopicPartition]) -> None:
        """``record_partition_lag_and_lead`` for each of ``partitions`` (one collection's,
        in order), at one time stamp. The client-wide ``records-lag-max`` and
        ``records-lead-min`` (a Max and a Min and nothing else) get the collection's
        extremes, once: the same values as recording each, since their windows close on
        time, not on a count of events. Each partition's own values (its latest, average
        and extreme) are held back with their time stamp and go into its stat at once with
        the next collections' (``_fold``): before any of these metrics is read, once
        ``_MAX_PENDING_ROWS`` are held, and before an unassigned partition's metrics go.
        What a reader sees is what recording each value at once would show; the work per
        partition of a poll is a fraction (with 1,000 partitions, recording value by value
        cost more than the rest of the partition's metrics)."""
        now = self.metrics.time_ms()
        # Partitions unassigned meanwhile (the KIP-848 background thread reconciles) are left out.
        rows = self.subscriptions.lags_and_leads(partitions, self.isolation_level)
        if not rows:
            return
        lag_stats, lead_stats = self._lag_stats, self._lead_stats
        # A partition's first value creates its sensors now, so its metrics exist as soon as
        # Java's would (never under the partition lock: creating one takes it).
        for tp, lag, lead in [row for row in rows if (row[1] is not None and row[0] not in lag_stats)
                              or (row[2] is not None and row[0] not in lead_stats)]:
            if lag is not None and tp not in lag_stats:
                self._partition_stat(tp, "records-lag")
            if lead is not None and tp not in lead_stats:
                self._partition_stat(tp, "records-lead")
        max_lag = max([row[1] for row in rows if row[1] is not None], default=None)
        min_lead = min([row[2] for row in rows if row[2] is not None], default=None)
        with self._partition_lock:
            self._pending.append((now, rows))
            self._pending_rows += len(rows)
            if self._pending_rows >= _MAX_PENDING_ROWS:
                self._fold()
        if max_lag is not None:
            self.records_lag.record(max_lag, now)
        if min_lead is not None:
            self.records_lead.record(min_lead, now)

    def _fold(self) -> None:
        """Record the held lags and leads into the partitions' stats (the partition lock is
        held). Each stat takes its values at once (``LatestExtremeAvg.record_run``) when
        all of them fall in its current sample, else one by one at their own times, in
        order; a partition whose sensors went (unassigned) has its values dropped with them."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._pending_rows = 0
        lag_values: defaultdict[TopicPartition, list[int]] = defaultdict(list)
        lead_values: defaultdict[TopicPartition, list[int]] = defaultdict(list)
        for _, rows in pending:
            for tp, lag, lead in rows:
                if lag is not None:
                    lag_values[tp].append(lag)
                if lead is not None:
                    lead_values[tp].append(lead)
        config = self.metrics.config  # every partition sensor's (made without one of its own)
        latest = max(now for now, _ in pending)  # clocks may step back: the latest of all
        one_by_one: list[dict[TopicPartition, LatestExtremeAvg]] = [{}, {}]
        for values_of, stats, slow in ((lag_values, self._lag_stats, one_by_one[0]),
                                       (lead_values, self._lead_stats, one_by_one[1])):
            for tp, values in values_of.items():
                stat = stats.get(tp)
                if stat is None:
                    continue
                end = stat.window_end(config)
                if end is not None and latest < end:
                    stat.record_run(config, values)
                else:
                    slow[tp] = stat  # a new sample opens among them (or the first one)
        slow_lag, slow_lead = one_by_one
        if slow_lag or slow_lead:
            for now, rows in pending:
                for tp, lag, lead in rows:
                    if lag is not None and tp in slow_lag:
                        slow_lag[tp].record(config, lag, now)
                    if lead is not None and tp in slow_lead:
                        slow_lead[tp].record(config, lead, now)

    def maybe_update_assignment(self) -> None:
        """Drop the per-partition metrics of unassigned partitions; the new ones' gauges
        come with the deferred registration (``_register_partition_metrics``)."""
        subs = self.subscriptions
        with self._lock:
            assignment_id = subs.assignment_id()
            if assignment_id == self._assignment_id:
                return
            assigned = subs.assigned_partitions()
            gone = self._assigned - assigned
            if gone:
                # Values held for them go in first: as if recorded at once, then removed.
                with self._partition_lock:
                    self._fold()
                    for tp in gone:
                        self._lag_stats.pop(tp, None)
                        self._lead_stats.pop(tp, None)
            for tp in gone:
                for kind in ("records-lag", "records-lead"):
                    self.metrics.remove_sensor(_partition_sensor_name(tp, kind))
                if tp in self._replica_gauges:
                    self._replica_gauges.discard(tp)
                    self.metrics.remove_metric(self._replica_name(tp))
            self._assigned = assigned
            self._assignment_id = assignment_id
        # The new partitions' gauges, as their lag and lead sensors: when the registry is
        # next read, or now if reporters listen.
        if self.metrics.has_reporters():
            self._register_partition_metrics()

    def _replica_name(self, tp: TopicPartition) -> Any:
        return self.metrics.metric_name("preferred-read-replica", self.group, "The current read replica for the "
                                        "partition, or -1 if reading from leader",
                                        {"topic": tp.topic, "partition": str(tp.partition)})

    def _preferred_read_replica(self, tp: TopicPartition, config: Any, now: float) -> int:
        # Java reads it at time 0 (expiry ignored): the engines stamp expiries with their
        # own clocks, which need not be the registry's.
        replica = self.subscriptions.preferred_read_replica(tp, 0)
        return -1 if replica is None else replica

    def new_aggregator(self, partitions: Iterable[TopicPartition]) -> "FetchMetricsAggregator":
        return FetchMetricsAggregator(self, partitions)


class FetchMetricsAggregator:
    """One response's bytes and records, recorded once all its partitions reported."""

    __slots__ = ("_manager", "_unrecorded", "_bytes", "_records", "_topics", "_lock")

    def __init__(self, manager: FetchMetricsManager, partitions: Iterable[TopicPartition]) -> None:
        self._manager = manager
        self._unrecorded = set(partitions)
        self._bytes = 0
        self._records = 0
        self._topics: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def record(self, tp: TopicPartition, nbytes: int, nrecords: int) -> None:
        with self._lock:
            if tp not in self._unrecorded:
                return
            self._unrecorded.discard(tp)
            self._bytes += nbytes
            self._records += nrecords
            totals = self._topics.get(tp.topic)
            if totals is None:
                self._topics[tp.topic] = [nbytes, nrecords]
            else:
                totals[0] += nbytes
                totals[1] += nrecords
            if self._unrecorded:
                return
        self._manager.record_fetched(self._bytes, self._records, self._topics)

    def record_empty(self, partitions: list[TopicPartition]) -> None:
        """``record(tp, 0, 0)`` for each of ``partitions`` (answers without records), under
        one lock: each counts once, and its topic among the response's topics."""
        with self._lock:
            unrecorded = self._unrecorded
            topics = self._topics
            reported = False
            for tp in partitions:
                if tp in unrecorded:
                    unrecorded.discard(tp)
                    reported = True
                    if tp.topic not in topics:
                        topics[tp.topic] = [0, 0]
            if unrecorded or not reported:
                return
        self._manager.record_fetched(self._bytes, self._records, self._topics)
