"""kproto.metrics on a fake clock: sampled windows, Java's Rate, NaN for empty windows,
sensors and parents, the registry and its reporters, kafka-python's metrics() shape, and
the consumer metric sets fed by hand (per-partition removal, per-response aggregation)."""

from __future__ import annotations

import math
import random
import threading

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kproto.consumer.fetch.fetch_metrics_manager import FetchMetricsManager
from kproto.consumer.subscription_state import SubscriptionState
from kproto.metrics import (Avg, CumulativeCount, CumulativeSum, LatestExtremeAvg, Max, Meter, MetricConfig, MetricName,
                            Metrics, Min, Rate, Value, WindowedCount, WindowedSum, by_group)
from kproto.metrics.consumer_metrics import CoordinatorMetrics, KafkaConsumerMetrics, build_metrics, metrics_view
from kproto.structs import IsolationLevel, TopicPartition

from tests.support.clock import FakeClock


CONFIG = MetricConfig(samples=2, time_window_ms=1000)


def test_defaults_are_javas():
    config = MetricConfig()
    assert (config.samples, config.time_window_ms) == (2, 30000)


@pytest.mark.parametrize("stat", [Avg, Max, Min])
def test_empty_windows_measure_nan(stat):
    assert math.isnan(stat().measure(CONFIG, 0))


def test_windows_roll_over_and_expire():
    avg, mx, mn = Avg(), Max(), Min()
    for stat in (avg, mx, mn):
        stat.record(CONFIG, 10, 0)
        stat.record(CONFIG, 30, 400)      # same window
        stat.record(CONFIG, 20, 1500)     # window 0 is complete: a second sample
    assert avg.measure(CONFIG, 1600) == 20.0
    assert (mx.measure(CONFIG, 1600), mn.measure(CONFIG, 1600)) == (30, 10)
    # samples * window after its start, the first sample is reset; the second remains.
    assert avg.measure(CONFIG, 2000) == 20.0
    assert (mx.measure(CONFIG, 2000), mn.measure(CONFIG, 2000)) == (20, 20)
    assert math.isnan(avg.measure(CONFIG, 3500))
    assert math.isnan(mx.measure(CONFIG, 3500))


@pytest.mark.parametrize("maximum", [True, False])
def test_latest_extreme_avg_reads_as_value_extreme_and_avg(maximum):
    # The fused stat the consumer records per partition must read exactly as Java's three
    # stats on one sensor, across window roll-overs, event-window limits and expiry.
    config = MetricConfig(samples=3, time_window_ms=1000, event_window=5)
    rng = random.Random(7)
    name = MetricName("m", "g")
    fused = LatestExtremeAvg(name, name, name, maximum=maximum)
    latest, extreme, average = (measurable for _, measurable in fused.stats())
    value, ext, avg = Value(), (Max() if maximum else Min()), Avg()
    now = 0
    for _ in range(400):
        now += rng.choice([0, 0, 1, 150, 999, 1000, 2500, 4000])
        v = rng.randint(-50, 50)
        for stat in (fused, value, ext, avg):
            stat.record(config, v, now)
        at = now + rng.choice([0, 10, 1500, 3500])
        for got, want in ((latest, value), (extreme, ext), (average, avg)):
            a, b = got.measure(config, at), want.measure(config, at)
            assert a == b or (math.isnan(a) and math.isnan(b)), (a, b)


def test_a_third_window_reuses_the_oldest_sample():
    total = WindowedSum()
    total.record(CONFIG, 1, 0)
    total.record(CONFIG, 2, 1000)
    total.record(CONFIG, 4, 2000)         # overwrites the sample started at 0
    assert total.measure(CONFIG, 2000) == 6.0


def test_rate_assumes_the_missing_windows_over_a_partial_first_window():
    rate = Rate()
    rate.record(CONFIG, 100, 0)
    # Elapsed 0 ms, but samples - 1 = 1 whole window is assumed: 100 per 1 s.
    assert rate.measure(CONFIG, 0) == pytest.approx(100.0)
    # 500 ms elapsed plus the assumed window: 100 per 1.5 s.
    assert rate.measure(CONFIG, 500) == pytest.approx(100 / 1.5)
    rate.record(CONFIG, 50, 1200)
    # One whole window has passed: no padding, 150 per 1.5 s.
    assert rate.measure(CONFIG, 1500) == pytest.approx(100.0)


def test_rate_units_and_count_rates():
    per_hour = Rate("hours", WindowedCount())
    per_hour.record(CONFIG, 123, 0)       # counts the event, not its value
    assert per_hour.measure(CONFIG, 1000) == pytest.approx(3600.0)
    with pytest.raises(ValueError):
        Rate("fortnights")


def test_cumulative_and_value_stats():
    total, count, value = CumulativeSum(), CumulativeCount(), Value()
    assert math.isnan(value.measure(CONFIG, 0))
    for i, v in enumerate((5, 7)):
        for stat in (total, count, value):
            stat.record(CONFIG, v, i * 100_000)
    assert (total.measure(CONFIG, 10 ** 9), count.measure(CONFIG, 10 ** 9)) == (12, 2)
    assert value.measure(CONFIG, 0) == 7


def test_meter_gives_rate_and_total():
    clock = FakeClock(0)
    metrics = Metrics(CONFIG, time_ms=clock)
    sensor = metrics.sensor("bytes")
    sensor.add(Meter(metrics.metric_name("b-rate", "g"), metrics.metric_name("b-total", "g")))
    counter = metrics.sensor("calls")
    counter.add(Meter(metrics.metric_name("c-rate", "g"), metrics.metric_name("c-total", "g"), WindowedCount()))
    for value in (10, 30):
        sensor.record(value)
        counter.record(value)
    values = by_group(metrics)["g"]
    assert values["b-total"] == 40 and values["c-total"] == 2
    assert values["b-rate"] == pytest.approx(40.0) and values["c-rate"] == pytest.approx(2.0)


def test_sensor_records_into_parents_and_reads_at_the_clock():
    clock = FakeClock(0)
    metrics = Metrics(CONFIG, time_ms=clock)
    parent = metrics.sensor("all")
    parent.add(metrics.metric_name("all-max", "g"), Max())
    child = metrics.sensor("one", parents=[parent])
    child.add(metrics.metric_name("one-max", "g"), Max())
    child.record(7)
    parent.record(3)
    got = {name.name: m.value() for name, m in metrics.metrics.items()}
    assert got == {"all-max": 7, "one-max": 7}
    clock.now = 5000                        # both windows expired
    assert all(math.isnan(m.value()) for m in metrics.metrics.values())
    assert metrics.sensor("one") is child   # get-or-create
    assert child.add(metrics.metric_name("one-max", "g"), Max()) is False


class CountingLock:
    """A lock that counts how often it was taken."""

    def __init__(self):
        self._lock = threading.Lock()
        self.taken = 0

    def acquire(self, blocking=True):
        self.taken += 1
        return self._lock.acquire(blocking)

    def release(self):
        self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()


def test_sensors_given_one_lock_record_and_are_read_under_it():
    metrics = Metrics(CONFIG, time_ms=FakeClock(0))
    lock = CountingLock()
    one, two = metrics.sensor("one", lock=lock), metrics.sensor("two", lock=lock)
    own = metrics.sensor("own")
    for sensor, name in ((one, "one-max"), (two, "two-max"), (own, "own-max")):
        sensor.add(metrics.metric_name(name, "g"), Max())
    assert one.lock is two.lock is lock and own.lock is not lock
    taken = lock.taken
    one.record(3, 100)
    two.record(5, 100)
    own.record(7, 100)
    values = {name.name: m.value(200) for name, m in metrics.metrics.items()}
    assert values == {"one-max": 3, "two-max": 5, "own-max": 7}
    assert lock.taken - taken == 4  # two records and two reads; the own sensor's are not on it
    assert lock.acquire(blocking=False)
    lock.release()


class Reporter:
    def __init__(self):
        self.events = []

    def init(self, metrics):
        self.events.append(("init", sorted(m.metric_name.name for m in metrics)))

    def metric_change(self, metric):
        self.events.append(("change", metric.metric_name.name))

    def metric_removal(self, metric):
        self.events.append(("removal", metric.metric_name.name))

    def configure(self, configs):
        pass

    def close(self):
        self.events.append(("close",))


def test_registry_names_removal_and_reporters():
    metrics = Metrics(MetricConfig(tags={"client-id": "c1"}), time_ms=FakeClock())
    name = metrics.metric_name("x", "g", "described", {"topic": "t"})
    assert name.tags == {"client-id": "c1", "topic": "t"}
    assert name == MetricName("x", "g", "other description", {"topic": "t", "client-id": "c1"})
    parent = metrics.sensor("p")
    parent.add(metrics.metric_name("p-avg", "g"), Avg())
    reporter = Reporter()
    metrics.add_reporter(reporter)
    child = metrics.sensor("c", parents=[parent])
    child.add(name, Value())
    with pytest.raises(ValueError):
        metrics.add_metric(name, Value())
    metrics.remove_sensor("p")               # takes its child sensor along, as Java
    assert metrics.get_sensor("c") is None and metrics.metrics == {}
    metrics.close()
    assert reporter.events == [("init", ["p-avg"]), ("change", "x"), ("removal", "p-avg"), ("removal", "x"),
                               ("close",)]


def test_by_group_prefers_the_client_wide_metric_on_a_name_clash():
    metrics = Metrics(CONFIG, time_ms=FakeClock())
    for tags, value in (({"topic": "a"}, 1), ({}, 2), ({"topic": "b"}, 3)):
        sensor = metrics.sensor("s{}".format(value))
        sensor.add(metrics.metric_name("bytes-consumed-total", "grp", tags=tags), CumulativeSum())
        sensor.record(value)
    assert by_group(metrics) == {"grp": {"bytes-consumed-total": 2}}
    assert metrics_view(metrics, raw=True) == metrics.metrics
    assert metrics_view(None, raw=False) is None


def test_build_metrics_honours_kafka_python_settings():
    made = []

    class MyReporter(Reporter):
        def __init__(self):
            super().__init__()
            made.append(self)

    assert build_metrics(enabled=False) is None
    metrics = build_metrics(num_samples=3, sample_window_ms=500, client_id="me", reporters=[MyReporter])
    assert (metrics.config.samples, metrics.config.time_window_ms) == (3, 500)
    assert metrics.metric_name("n", "g").tags == {"client-id": "me"}
    assert [r.events for r in made] == [[("init", [])]]


# --- consumer metric sets ------------------------------------------------------------------

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _subscriptions(*tps):
    subs = SubscriptionState("earliest")
    subs.assign_from_user(list(tps))
    for tp in tps:
        subs.seek(tp, 5)
        subs.update_high_watermark(tp, 12)
        subs.update_log_start_offset(tp, 2)
    return subs


def _tagged(metrics, name):
    return {(m.tags.get("topic"), m.tags.get("partition")): v.value()
            for m, v in metrics.metrics.items() if m.name == name and "partition" in m.tags}


def test_partition_lag_and_lead_and_their_removal_on_unassignment():
    metrics = Metrics(CONFIG, time_ms=FakeClock())
    subs = _subscriptions(TP0, TP1)
    manager = FetchMetricsManager(metrics, subs)
    manager.maybe_update_assignment()
    for tp in (TP0, TP1):
        manager.record_partition_lag_and_lead(tp)
    assert _tagged(metrics, "records-lag") == {("t", "0"): 7, ("t", "1"): 7}
    assert _tagged(metrics, "records-lead-min") == {("t", "0"): 3, ("t", "1"): 3}
    assert _tagged(metrics, "preferred-read-replica") == {("t", "0"): -1, ("t", "1"): -1}
    values = by_group(metrics)["consumer-fetch-manager-metrics"]
    assert (values["records-lag-max"], values["records-lead-min"]) == (7, 3)

    subs.assign_from_user([TP1])
    manager.maybe_update_assignment()
    for name in ("records-lag", "records-lag-avg", "records-lag-max", "records-lead", "records-lead-avg",
                 "records-lead-min", "preferred-read-replica"):
        assert set(_tagged(metrics, name)) == {("t", "1")}, name


PARTITION_METRICS = ["records-lag", "records-lag-avg", "records-lag-max", "records-lead", "records-lead-avg",
                     "records-lead-min"]


@pytest.mark.parametrize("attached", ["before", "after"])
def test_reporters_learn_of_partition_metrics_as_they_exist(attached):
    """A reporter attached before the assignment is told of a partition's gauge when the
    partition is assigned and of its six lag and lead metrics when its first lag is
    recorded (their registration is not held back while reporters listen); one attached
    after finds all seven among the metrics its init() gets, with their values."""
    metrics = Metrics(CONFIG, time_ms=FakeClock())
    subs = _subscriptions(TP0)
    manager = FetchMetricsManager(metrics, subs)
    reporter = Reporter()
    if attached == "before":
        metrics.add_reporter(reporter)
    manager.maybe_update_assignment()
    if attached == "before":
        assert reporter.events[1:] == [("change", "preferred-read-replica")]
    manager.record_partition_lag_and_lead(TP0)
    if attached == "before":
        told = [name for event, name in reporter.events[2:] if event == "change"]
        assert sorted(told) == PARTITION_METRICS
    else:
        metrics.add_reporter(reporter)
        ((event, names),) = reporter.events
        assert event == "init" and set(PARTITION_METRICS + ["preferred-read-replica"]) <= set(names)
    assert _tagged(metrics, "records-lag") == {("t", "0"): 7}
    assert _tagged(metrics, "records-lead-min") == {("t", "0"): 3}
    assert _tagged(metrics, "preferred-read-replica") == {("t", "0"): -1}


def test_response_totals_are_recorded_once_every_partition_reported():
    metrics = Metrics(CONFIG, time_ms=FakeClock())
    manager = FetchMetricsManager(metrics, _subscriptions(TP0, TP1))
    aggregator = manager.new_aggregator([TP0, TP1])
    aggregator.record(TP0, 100, 4)
    values = by_group(metrics)["consumer-fetch-manager-metrics"]
    assert values["records-consumed-total"] == 0 and math.isnan(values["fetch-size-avg"])
    aggregator.record(TP0, 100, 4)           # a partition reports once
    aggregator.record(TP1, 50, 1)
    values = by_group(metrics)["consumer-fetch-manager-metrics"]
    assert (values["bytes-consumed-total"], values["records-consumed-total"]) == (150, 5)
    assert (values["fetch-size-avg"], values["records-per-request-avg"]) == (150, 5)
    per_topic = {m.name: v.value() for m, v in metrics.metrics.items() if m.tags.get("topic") == "t"
                 and "partition" not in m.tags}
    assert per_topic["bytes-consumed-total"] == 150 and per_topic["records-consumed-total"] == 5


def test_answers_without_records_count_once_in_the_response_totals():
    metrics = Metrics(CONFIG, time_ms=FakeClock())
    manager = FetchMetricsManager(metrics, _subscriptions(TP0, TP1))
    other = TopicPartition("u", 0)
    aggregator = manager.new_aggregator([TP0, TP1, other])
    aggregator.record_empty([TP1, other])
    aggregator.record_empty([TP1])           # a partition reports once
    values = by_group(metrics)["consumer-fetch-manager-metrics"]
    assert values["records-consumed-total"] == 0 and math.isnan(values["fetch-size-avg"])
    aggregator.record(TP0, 100, 4)
    values = by_group(metrics)["consumer-fetch-manager-metrics"]
    assert (values["bytes-consumed-total"], values["records-consumed-total"]) == (100, 4)
    # Topic u had only an empty answer: it is among the response's topics, with nothing.
    per_topic = {(m.tags["topic"], m.name): v.value() for m, v in metrics.metrics.items()
                 if "topic" in m.tags and "partition" not in m.tags}
    assert per_topic[("u", "bytes-consumed-total")] == 0 and per_topic[("u", "records-consumed-total")] == 0
    assert per_topic[("t", "bytes-consumed-total")] == 100
    aggregator.record_empty([TP1])           # all reported: nothing more is recorded
    assert by_group(metrics)["consumer-fetch-manager-metrics"]["bytes-consumed-total"] == 100


def test_poll_timing_on_a_fake_clock():
    clock = FakeClock(10_000)
    metrics = Metrics(CONFIG, time_ms=clock)
    poll = KafkaConsumerMetrics(metrics)
    group = "consumer-metrics"
    assert by_group(metrics)[group]["last-poll-seconds-ago"] == -1
    poll.record_poll_start()
    clock.now += 100
    poll.record_poll_end()                   # first poll: 100 ms in poll, 0 since the last
    clock.now += 300                         # the application works 300 ms
    poll.record_poll_start()
    clock.now += 100
    poll.record_poll_end()
    clock.now += 2500
    values = by_group(metrics, now_ms=clock.now - 2500)[group]
    assert values["time-between-poll-max"] == 400
    assert values["time-between-poll-avg"] == 200
    assert values["poll-idle-ratio-avg"] == pytest.approx((1.0 + 100 / 500) / 2)
    assert by_group(metrics)[group]["last-poll-seconds-ago"] == 2


def test_coordinator_metrics_rebalance_and_listener_timings():
    clock = FakeClock(0)
    metrics = Metrics(CONFIG, time_ms=clock)
    sensors = CoordinatorMetrics(metrics, lambda: 3, classic=False)
    group = "consumer-coordinator-metrics"
    values = by_group(metrics)[group]
    assert "join-total" not in values and values["assigned-partitions"] == 3
    assert values["last-rebalance-seconds-ago"] == -1
    sensors.rebalance_started()
    clock.now = 250
    sensors.rebalance_started()              # one open rebalance keeps its start
    clock.now = 400
    sensors.rebalance_ended()
    sensors.rebalance_ended()                # nothing open: not counted again
    sensors.record_listener("on_partitions_assigned", 12)
    sensors.heartbeat_sent()
    sensors.record_heartbeat(4)
    clock.now = 3400
    values = by_group(metrics, now_ms=400)[group]
    assert (values["rebalance-total"], values["rebalance-latency-max"]) == (1, 400)
    assert values["partition-assigned-latency-max"] == 12
    assert values["heartbeat-total"] == 1 and values["heartbeat-response-time-max"] == 4
    values = by_group(metrics)[group]
    assert values["last-rebalance-seconds-ago"] == 3 and values["last-heartbeat-seconds-ago"] == 3


# --- the per-partition lags and leads, held back and recorded at once --------------------

_PARTS = [TopicPartition("t", p) for p in range(4)]
# One step of a run: ("poll", partitions collected, clock step ms, {partition: (position, high watermark)}),
# ("read",), ("unassign", partition index) or ("reassign",) (all four again).
_steps = st.lists(st.one_of(
    st.tuples(st.just("poll"), st.lists(st.sampled_from(range(4)), max_size=4, unique=True),
              st.integers(-300, 1600),
              st.dictionaries(st.sampled_from(range(4)), st.tuples(st.integers(0, 50), st.integers(0, 80)),
                              max_size=4)),
    st.tuples(st.just("read")),
    st.tuples(st.just("unassign"), st.sampled_from(range(4))),
    st.tuples(st.just("reassign"))), max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps=_steps, hold=st.sampled_from([1, 3, 20_000]))
# Held for partition 0, which goes and comes back: its new metrics start afresh.
@example(steps=[("poll", [0], 10, {0: (5, 20)}), ("unassign", 0), ("reassign",),
                ("poll", [0], 10, {0: (1, 2)}), ("read",)], hold=20_000)
def test_held_back_lags_and_leads_read_as_if_recorded_at_once(steps, hold):
    """The manager holds each poll's lags and leads back and records them in bulk; a
    reference records each value into its own LatestExtremeAvg at once. Every read (of
    every partition's Value, Max/Min and Avg) agrees, across sample windows closing
    (1 s windows here), a clock stepping back, and partitions unassigned (their metrics
    go) and assigned again (new metrics: nothing held for the old ones comes back)."""
    import kproto.consumer.fetch.fetch_metrics_manager as fmm

    saved = fmm._MAX_PENDING_ROWS
    fmm._MAX_PENDING_ROWS = hold
    try:
        clock = FakeClock(0)
        metrics = Metrics(CONFIG, time_ms=clock)
        subs = SubscriptionState("earliest")
        subs.assign_from_user(_PARTS)
        for tp in _PARTS:
            subs.update_log_start_offset(tp, 0)
        manager = FetchMetricsManager(metrics, subs)
        manager.maybe_update_assignment()
        reference: dict = {}

        def ref_stat(tp, kind):
            if (tp, kind) not in reference:
                reference[(tp, kind)] = LatestExtremeAvg(MetricName(kind, "g"), MetricName(kind + "-x", "g"),
                                                         MetricName(kind + "-avg", "g"), maximum=kind == "records-lag")
            return reference[(tp, kind)]

        def expected():
            out = {}
            for (tp, kind), stat in reference.items():
                if tp in subs.assigned_partitions():
                    for name, measurable in stat.stats():
                        suffix = name.name[len(kind):]
                        key = (kind + {"": "", "-x": "-max" if kind == "records-lag" else "-min",
                                       "-avg": "-avg"}[suffix], str(tp.partition))
                        out[key] = measurable.measure(CONFIG, clock.now)
            return out

        def actual():
            return {(m.name, m.tags["partition"]): v.value() for m, v in metrics.metrics.items()
                    if "partition" in m.tags and m.name.startswith("records-")}

        for step in steps:
            if step[0] == "poll":
                _, picked, delta, offsets = step
                clock.now = max(0, clock.now + delta)
                for p, (position, high) in offsets.items():
                    tp = _PARTS[p]
                    if subs.is_assigned(tp):
                        subs.seek(tp, position)
                        subs.update_high_watermark(tp, high)
                collected = [_PARTS[p] for p in picked]
                manager.record_partitions_lag_and_lead(collected)
                for tp, lag, lead in subs.lags_and_leads(collected, IsolationLevel.READ_UNCOMMITTED):
                    if lag is not None:
                        ref_stat(tp, "records-lag").record(CONFIG, lag, clock.now)
                    if lead is not None:
                        ref_stat(tp, "records-lead").record(CONFIG, lead, clock.now)
            elif step[0] == "read":
                assert _same(actual(), expected())
            elif step[0] == "reassign":
                subs.assign_from_user(_PARTS)
                manager.maybe_update_assignment()
            else:
                tp = _PARTS[step[1]]
                subs.assign_from_user([p for p in subs.assigned_partitions() if p != tp])
                manager.maybe_update_assignment()
                for kind in ("records-lag", "records-lead"):
                    reference.pop((tp, kind), None)
        assert _same(actual(), expected())
    finally:
        fmm._MAX_PENDING_ROWS = saved


def _same(a, b):
    return a.keys() == b.keys() and all(
        (math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] for k in a)
