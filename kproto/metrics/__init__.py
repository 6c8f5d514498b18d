"""Client metrics: Java's ``org.apache.kafka.common.metrics`` model, in snake_case.

``Metrics`` (the registry: sensors, metrics, reporters, a fed-in clock), ``MetricName``,
``MetricConfig``, ``Sensor``, ``KafkaMetric`` and the stats (``Avg``, ``Max``, ``Min``,
``Rate``, ``WindowedSum``, ``WindowedCount``, ``CumulativeSum``, ``CumulativeCount``,
``Value``, ``Meter``, ``Gauge``; ``LatestExtremeAvg``, a Value, a Max or Min and an Avg in
one). Standard library only; imports nothing else of kproto.
``consumer_metrics`` holds the consumer's poll and coordinator metric sets;
the fetch metrics live with the fetch pipeline (``kproto.consumer.fetch``).

``by_group(metrics)`` is kafka-python's ``KafkaConsumer.metrics()`` shape.
"""

from __future__ import annotations

from kproto.metrics.metric_name import MetricConfig, MetricName
from kproto.metrics.metrics import Metrics, by_group, wall_clock_ms
from kproto.metrics.sensor import KafkaMetric, Sensor
from kproto.metrics.stats import (Avg, CompoundStat, CumulativeCount, CumulativeSum, Gauge, LatestExtremeAvg, Max,
                                  Measurable, Meter, Min, Rate, SampledStat, Stat, Value, WindowedCount, WindowedSum)


__all__ = ["Avg", "CompoundStat", "CumulativeCount", "CumulativeSum", "Gauge", "KafkaMetric", "LatestExtremeAvg", "Max",
           "Measurable", "Meter", "MetricConfig", "MetricName", "Metrics", "Min", "Rate", "SampledStat", "Sensor", "Stat", "Value",
           "WindowedCount", "WindowedSum", "by_group", "wall_clock_ms"]
