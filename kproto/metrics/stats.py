"""The stats a Sensor feeds: Java's ``org.apache.kafka.common.metrics.stats``.

A stat takes ``record(config, value, now_ms)`` and answers ``measure(config, now_ms)``.
Sampled stats keep ``config.samples`` windows of ``config.time_window_ms``: a record goes
to the current sample, which is replaced by the next one (the oldest is reused) once it is
``time_window_ms`` old or holds ``event_window`` events; a measurement first resets every
sample older than ``samples * time_window_ms`` and then combines the rest. As in Java,
``Avg``, ``Max`` and ``Min`` of windows without events are NaN.

``Rate`` divides a windowed sum (or count) by the elapsed window: from the start of the
oldest sample to now, but never less than ``samples - 1`` whole windows (so a rate seen
just after start-up is not inflated by a tiny elapsed time) and never below 1 ms.

A compound stat (``Meter``) names several metrics: ``stats()`` gives ``(MetricName,
measurable)`` pairs for the sensor to register. ``Value`` keeps the last value;
``CumulativeSum``/``CumulativeCount`` never forget.

Stats hold no lock of their own: the owning Sensor records and measures under its lock.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

from kproto.metrics.metric_name import MetricConfig, MetricName

_NAN = float("nan")
# MetricConfig.event_window's default (Java's Long.MAX_VALUE): no sample ends on a count.
_UNLIMITED_EVENTS = 2 ** 63 - 1


class Measurable:
    """Anything a KafkaMetric can read: ``measure(config, now_ms) -> float``."""

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        raise NotImplementedError


class Gauge:
    """A metric read from elsewhere: ``fn(config, now_ms)`` is its value (Java's Gauge)."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[MetricConfig, int], Any]) -> None:
        self._fn = fn

    def value(self, config: MetricConfig, now_ms: int) -> Any:
        return self._fn(config, now_ms)


class Stat(Measurable):
    """A Measurable fed by a Sensor."""

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        raise NotImplementedError


class _Sample:
    __slots__ = ("initial_value", "value", "event_count", "last_window_ms")

    def __init__(self, initial_value: float, now_ms: int) -> None:
        self.initial_value = initial_value
        self.value = initial_value
        self.event_count = 0
        self.last_window_ms = now_ms

    def reset(self, now_ms: int) -> None:
        self.value = self.initial_value
        self.event_count = 0
        self.last_window_ms = now_ms

    def is_complete(self, now_ms: int, config: MetricConfig) -> bool:
        return now_ms - self.last_window_ms >= config.time_window_ms or self.event_count >= config.event_window


class SampledStat(Stat):
    """Java's SampledStat: ``config.samples`` rolling windows; subclasses update and combine."""

    initial_value = 0.0
    _sample_class = _Sample

    def __init__(self) -> None:
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        # _current_sample and _Sample.is_complete inlined: this runs for every value recorded.
        samples = self._samples
        sample = samples[self._current] if samples else self._current_sample(now_ms)
        if now_ms - sample.last_window_ms >= config.time_window_ms or sample.event_count >= config.event_window:
            sample = self._advance(config, now_ms)
        self.update(sample, value)
        sample.event_count += 1

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(self._sample_class(self.initial_value, now_ms))
        return self._samples[self._current]

    def _advance(self, config: MetricConfig, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % config.samples
        if self._current >= len(self._samples):
            sample = self._sample_class(self.initial_value, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(self._sample_class(self.initial_value, now_ms))
        return min(self._samples, key=lambda s: s.last_window_ms)

    def purge_obsolete_samples(self, config: MetricConfig, now_ms: int) -> None:
        expire_age = config.samples * config.time_window_ms
        for sample in self._samples:
            if now_ms - sample.last_window_ms >= expire_age:
                sample.reset(now_ms)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge_obsolete_samples(config, now_ms)
        return self.combine(self._samples, config, now_ms)

    def update(self, sample: _Sample, value: float) -> None:
        raise NotImplementedError

    def combine(self, samples: list[_Sample], config: MetricConfig, now_ms: int) -> float:
        raise NotImplementedError


class Avg(SampledStat):
    """Mean of the values in the live windows (NaN without events)."""

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        # SampledStat.record with update() inlined: per-partition lag and lead record here
        # for every partition of every poll.
        samples = self._samples
        sample = samples[self._current] if samples else self._current_sample(now_ms)
        if now_ms - sample.last_window_ms >= config.time_window_ms or sample.event_count >= config.event_window:
            sample = self._advance(config, now_ms)
        sample.value += value
        sample.event_count += 1

    def update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def combine(self, samples: list[_Sample], config: MetricConfig, now_ms: int) -> float:
        total = 0.0
        count = 0
        for sample in samples:
            total += sample.value
            count += sample.event_count
        return total / count if count else _NAN


class Max(SampledStat):
    """Largest value in the live windows (NaN without events)."""

    initial_value = -math.inf

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        samples = self._samples  # SampledStat.record with update() inlined, as Avg's
        sample = samples[self._current] if samples else self._current_sample(now_ms)
        if now_ms - sample.last_window_ms >= config.time_window_ms or sample.event_count >= config.event_window:
            sample = self._advance(config, now_ms)
        if value > sample.value:
            sample.value = value
        sample.event_count += 1

    def update(self, sample: _Sample, value: float) -> None:
        if value > sample.value:
            sample.value = value

    def combine(self, samples: list[_Sample], config: MetricConfig, now_ms: int) -> float:
        values = [s.value for s in samples if s.event_count]
        return max(values) if values else _NAN


class Min(SampledStat):
    """Smallest value in the live windows (NaN without events)."""

    initial_value = math.inf

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        samples = self._samples  # SampledStat.record with update() inlined, as Avg's
        sample = samples[self._current] if samples else self._current_sample(now_ms)
        if now_ms - sample.last_window_ms >= config.time_window_ms or sample.event_count >= config.event_window:
            sample = self._advance(config, now_ms)
        if value < sample.value:
            sample.value = value
        sample.event_count += 1

    def update(self, sample: _Sample, value: float) -> None:
        if value < sample.value:
            sample.value = value

    def combine(self, samples: list[_Sample], config: MetricConfig, now_ms: int) -> float:
        values = [s.value for s in samples if s.event_count]
        return min(values) if values else _NAN


class WindowedSum(SampledStat):
    """Sum of the values in the live windows (0 without events)."""

    def update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def combine(self, samples: list[_Sample], config: MetricConfig, now_ms: int) -> float:
        return float(sum(s.value for s in samples))


class WindowedCount(WindowedSum):
    """Number of events in the live windows."""

    def update(self, sample: _Sample, value: float) -> None:
        sample.value += 1.0


_UNIT_MS = {"seconds": 1000.0, "minutes": 60000.0, "hours": 3600000.0}


class Rate(Stat):
    """Per ``unit`` ("seconds", "minutes", "hours") over the elapsed window (Java's Rate)."""

    def __init__(self, unit: str = "seconds", stat: SampledStat | None = None) -> None:
        if unit not in _UNIT_MS:
            raise ValueError("unit must be one of {}, not {!r}".format(sorted(_UNIT_MS), unit))
        self._unit_ms = _UNIT_MS[unit]
        self.stat = stat if stat is not None else WindowedSum()

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.stat.record(config, value, now_ms)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        value = self.stat.measure(config, now_ms)
        return value / (self.window_size(config, now_ms) / self._unit_ms)

    def window_size(self, config: MetricConfig, now_ms: int) -> int:
        self.stat.purge_obsolete_samples(config, now_ms)
        elapsed = now_ms - self.stat.oldest(now_ms).last_window_ms
        full_windows = elapsed // config.time_window_ms
        min_full_windows = config.samples - 1
        if full_windows < min_full_windows:
            # Too few whole windows yet: assume the missing ones were empty.
            elapsed += (min_full_windows - full_windows) * config.time_window_ms
        return max(elapsed, 1)


class CumulativeSum(Stat):
    """Sum of every value ever recorded."""

    def __init__(self, initial: float = 0.0) -> None:
        self.total = initial

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.total += value

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self.total


class CumulativeCount(CumulativeSum):
    """Number of values ever recorded."""

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.total += 1.0


class Value(Stat):
    """The last value recorded (NaN before any)."""

    def __init__(self) -> None:
        self.value = _NAN

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.value = value

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self.value


class CompoundStat:
    """A stat that is several metrics: ``stats() -> [(MetricName, Measurable)]``."""

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        raise NotImplementedError

    def stats(self) -> list[tuple[MetricName, Measurable]]:
        raise NotImplementedError


class _Part(Measurable):
    __slots__ = ("_stat",)

    def __init__(self, stat: Stat) -> None:
        self._stat = stat

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self._stat.measure(config, now_ms)


class Meter(CompoundStat):
    """A rate and its cumulative total (Java's Meter: ``x-rate`` and ``x-total``).

    With a ``WindowedCount`` rate stat the total counts events (each record adds 1),
    otherwise it sums the values.
    """

    def __init__(self, rate_name: MetricName, total_name: MetricName, rate_stat: SampledStat | None = None,
                 unit: str = "seconds") -> None:
        self.rate_name = rate_name
        self.total_name = total_name
        self.rate = Rate(unit, rate_stat if rate_stat is not None else WindowedSum())
        self._counts = isinstance(self.rate.stat, WindowedCount)
        self.total: CumulativeSum = CumulativeSum()

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.rate.record(config, value, now_ms)
        self.total.record(config, 1.0 if self._counts else value, now_ms)

    def stats(self) -> list[tuple[MetricName, Measurable]]:
        return [(self.rate_name, _Part(self.rate)), (self.total_name, _Part(self.total))]


class _ExtremeAndSumSample(_Sample):
    __slots__ = ("total",)

    def __init__(self, initial_value: float, now_ms: int) -> None:
        super().__init__(initial_value, now_ms)
        self.total = 0.0

    def reset(self, now_ms: int) -> None:
        super().reset(now_ms)
        self.total = 0.0


class LatestExtremeAvg(SampledStat, CompoundStat):
    """One measurement's latest value, windowed extreme and windowed average in one stat:
    what Java registers as ``Value``, ``Max`` (or ``Min``) and ``Avg`` on one sensor, with
    the same three metrics and values, recorded in one call instead of three.

    Why the values are the same: a Max and an Avg of one sensor get every value at the same
    ``now_ms``, so their samples open, fill and expire together; one sample holding both
    the extreme and the sum is each of them. The consumer records one per partition per
    poll (``records-lag``/``-max``/``-avg``, ``records-lead``/``-min``/``-avg``), where three
    stat calls per value cost more than the rest of the partition's metrics.
    """

    _sample_class = _ExtremeAndSumSample

    def __init__(self, value_name: Optional[MetricName] = None, extreme_name: Optional[MetricName] = None,
                 avg_name: Optional[MetricName] = None, maximum: bool = True) -> None:
        super().__init__()
        #: The three metrics' names; an owner that records before it registers the stat
        #: (``FetchMetricsManager``) may set them later, before the stat joins a sensor.
        self.names = (value_name, extreme_name, avg_name)
        self.maximum = maximum
        self.initial_value = -math.inf if maximum else math.inf
        self.latest = _NAN
        #: Called (under the sensor's lock) before any of the three metrics is measured: an
        #: owner that records in bulk later (``FetchMetricsManager``'s deferred lags and
        #: leads) hands over what it holds first, so a reader never sees a value missing.
        self.flush: Optional[Callable[[], None]] = None

    def window_end(self, config: MetricConfig) -> Optional[int]:
        """The time from which a record opens a new sample: values recorded at earlier
        times all go into the current one (``record_run``). None when that cannot be told
        (no sample yet) or a sample also ends on a count of events (``event_window`` set)."""
        samples = self._samples
        if not samples or config.event_window < _UNLIMITED_EVENTS:
            return None
        return samples[self._current].last_window_ms + config.time_window_ms

    def record_run(self, config: MetricConfig, values: list[int]) -> None:
        """``record(config, value, t)`` for each of ``values`` in order, every ``t`` before
        ``window_end(config)`` (the caller's promise): none opens a new sample, so the
        current one takes them at once, with the state recording each would leave (for
        integer values whose sum stays below 2**53, exactly: any lag or lead a log has)."""
        sample = self._samples[self._current]
        if self.maximum:
            extreme = max(values)
            if extreme > sample.value:
                sample.value = extreme
        else:
            extreme = min(values)
            if extreme < sample.value:
                sample.value = extreme
        sample.total += sum(values)  # type: ignore[attr-defined]
        sample.event_count += len(values)
        self.latest = values[-1]

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.latest = value
        samples = self._samples  # SampledStat.record inlined, as Avg's
        sample = samples[self._current] if samples else self._current_sample(now_ms)
        if now_ms - sample.last_window_ms >= config.time_window_ms or sample.event_count >= config.event_window:
            sample = self._advance(config, now_ms)
        if (value > sample.value) if self.maximum else (value < sample.value):
            sample.value = value
        sample.total += value  # type: ignore[attr-defined]
        sample.event_count += 1

    def stats(self) -> list[tuple[MetricName, Measurable]]:
        value_name, extreme_name, avg_name = self.names
        if value_name is None or extreme_name is None or avg_name is None:
            raise ValueError("a LatestExtremeAvg joins a sensor only once its three names are set")
        return [(value_name, _Measure(self, _latest)), (extreme_name, _Measure(self, _extreme)),
                (avg_name, _Measure(self, _average))]


def _latest(stat: LatestExtremeAvg, samples: list[Any]) -> float:
    return stat.latest


def _extreme(stat: LatestExtremeAvg, samples: list[Any]) -> float:
    values = [s.value for s in samples if s.event_count]
    if not values:
        return _NAN
    return max(values) if stat.maximum else min(values)


def _average(stat: LatestExtremeAvg, samples: list[Any]) -> float:
    count = 0
    total = 0.0
    for sample in samples:
        total += sample.total
        count += sample.event_count
    return total / count if count else _NAN


class _Measure(Measurable):
    """One of a LatestExtremeAvg's three metrics (expired windows purged first, as a
    SampledStat's measure does)."""

    __slots__ = ("_stat", "_read")

    def __init__(self, stat: LatestExtremeAvg, read: Callable[[LatestExtremeAvg, list[Any]], float]) -> None:
        self._stat = stat
        self._read = read

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        stat = self._stat
        if stat.flush is not None:
            stat.flush()
        stat.purge_obsolete_samples(config, now_ms)
        return self._read(stat, stat._samples)
