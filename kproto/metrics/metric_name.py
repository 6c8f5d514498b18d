"""MetricName and MetricConfig: what identifies a metric and how its samples are kept.

Java's ``org.apache.kafka.common.MetricName`` and ``...metrics.MetricConfig``. A name is
``(name, group, tags)``; the description is carried along but, as in Java, takes no part
in equality or hashing, so two sensors asking for the same metric find the same one.
"""

from __future__ import annotations

from typing import Mapping, Optional


class MetricName:
    """``name`` within ``group``, told apart by ``tags`` (e.g. client-id, topic, partition)."""

    __slots__ = ("name", "group", "description", "tags", "_key", "_hash")

    def __init__(self, name: str, group: str, description: str = "",
                 tags: Optional[Mapping[str, str]] = None) -> None:
        if not name or not group:
            raise ValueError("a metric needs a name and a group")
        self.name = name
        self.group = group
        self.description = description
        self.tags: dict[str, str] = dict(tags or {})
        self._key = (name, group, frozenset(self.tags.items()))
        # Hashed once: a name is looked up several times as its metric is registered (the
        # consumer makes six per partition, on the partition's first fetched records).
        self._hash = hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetricName) and self._key == other._key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return "MetricName(name={!r}, group={!r}, description={!r}, tags={!r})".format(
            self.name, self.group, self.description, self.tags)


class MetricConfig:
    """How sampled stats window their data (Java's defaults: 2 samples of 30 s).

    ``event_window`` ends a sample after that many events (Java's ``eventWindow``,
    unbounded by default); ``tags`` are added to every name the registry makes.
    """

    __slots__ = ("samples", "time_window_ms", "event_window", "tags")

    def __init__(self, samples: int = 2, time_window_ms: int = 30000, event_window: int = 2 ** 63 - 1,
                 tags: Optional[Mapping[str, str]] = None) -> None:
        if samples < 1:
            raise ValueError("samples must be at least 1, not {}".format(samples))
        if time_window_ms < 1:
            raise ValueError("time_window_ms must be at least 1, not {}".format(time_window_ms))
        self.samples = samples
        self.time_window_ms = time_window_ms
        self.event_window = event_window
        self.tags: dict[str, str] = dict(tags or {})
