"""SelectorMetrics: the consumer's network-level metrics (Java's ``Selector.SelectorMetrics``).

Implements ``kproto.net.network_listener.NetworkListener`` by duck typing (``kproto.metrics``
sits below ``kproto.net`` and imports none of it); the engines pass one to their
``NetworkClient(network_listener=...)``. Java's names:

* group ``<prefix>-metrics``: ``connection-count``, ``connection-creation-rate/total``,
  ``connection-close-rate/total``, ``network-io-rate/total`` (socket reads and writes that
  moved bytes), ``outgoing-byte-rate/total``, ``request-rate/total``,
  ``request-size-avg/max``, ``incoming-byte-rate/total``, ``response-rate/total``,
  ``select-rate/total``, ``io-wait-time-ns-avg/total``, ``io-wait-ratio``,
  ``io-time-ns-avg/total``, ``io-ratio``;
* group ``<prefix>-node-metrics``, tag ``node-id`` = ``node-<id>``, registered when a
  connection to the node is established and kept after it closes (as Java):
  ``outgoing-byte-rate/total``, ``request-rate/total``, ``request-size-avg/max``,
  ``incoming-byte-rate/total``, ``response-rate/total``, ``request-latency-avg/max``. As in
  Java's consumer the node latency is that of Fetch requests only (Java records it from its
  fetch path; group requests such as a parked JoinGroup would swamp it otherwise).
* ``throttle_time_sensor`` (the fetch manager's ``fetch-throttle-time`` sensor): Java's
  NetworkClient records every response's throttle time into it. The fetch pipeline already
  records Fetch responses' own, so this records all the others.

Differences from Java: ``connection-count`` counts established connections (Java counts
its channels, connecting ones included), and a connection that never got established
counts as neither created nor closed. The authentication metrics are not kept.

Samples are stamped with the registry's clock (the network layer's clock is monotonic,
the registry's is wall time by default). Every sensor has its own lock; the node table
is changed under this object's lock, so any thread may record.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from kproto.metrics.metric_name import MetricConfig
from kproto.metrics.metrics import Metrics
from kproto.metrics.sensor import Sensor
from kproto.metrics.stats import Avg, CumulativeSum, Gauge, Max, Meter, Rate, WindowedCount, WindowedSum

_FETCH_API_KEY = 1
_NS_PER_S = 1e9


class _TimeRatio(Rate):
    """Fraction of wall time spent, from recorded nanoseconds (Java's ``Rate(NANOSECONDS)``)."""

    def __init__(self) -> None:
        super().__init__("seconds", WindowedSum())

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.stat.record(config, value / _NS_PER_S, now_ms)


class _NodeSensors:
    __slots__ = ("bytes_sent", "requests_sent", "bytes_received", "responses_received", "latency")

    def __init__(self, metrics: Metrics, group: str, node_id: Any) -> None:
        tags = {"node-id": "node-{}".format(node_id)}
        prefix = "node-{}.".format(node_id)
        name = metrics.metric_name
        self.bytes_sent = _meter(metrics, prefix + "bytes-sent", group, "outgoing-byte",
                                 "outgoing bytes", tags, WindowedSum())
        self.requests_sent = _meter(metrics, prefix + "requests-sent", group, "request", "requests sent", tags,
                                    WindowedCount())
        self.requests_sent.add(name("request-size-avg", group, "The average size of requests sent.", tags), Avg())
        self.requests_sent.add(name("request-size-max", group, "The maximum size of any request sent.", tags), Max())
        self.bytes_received = _meter(metrics, prefix + "bytes-received", group, "incoming-byte", "incoming bytes",
                                     tags, WindowedSum())
        self.responses_received = _meter(metrics, prefix + "responses-received", group, "response",
                                         "responses received", tags, WindowedCount())
        self.latency = metrics.sensor(prefix + "latency")
        self.latency.add(name("request-latency-avg", group, "The average request latency in ms", tags), Avg())
        self.latency.add(name("request-latency-max", group, "The maximum request latency in ms", tags), Max())


def _meter(metrics: Metrics, sensor_name: str, group: str, base: str, what: str, tags: Optional[dict[Any, Any]],
           stat: Any, parents: tuple[Any, ...] = ()) -> Sensor:
    """A sensor with Java's ``<base>-rate`` / ``<base>-total`` meter (``createMeter``)."""
    sensor = metrics.sensor(sensor_name, parents=parents)
    name = metrics.metric_name
    sensor.add(Meter(name(base + "-rate", group, "The number of {} per second".format(what), tags),
                     name(base + "-total", group, "The total number of {}".format(what), tags), stat))
    return sensor


class SelectorMetrics:
    """Records the network listener's events; see the module docstring."""

    def __init__(self, metrics: Metrics, prefix: str = "consumer",
                 throttle_time_sensor: Optional[Sensor] = None) -> None:
        self.metrics = metrics
        self.group = group = prefix + "-metrics"
        self.node_group = prefix + "-node-metrics"
        self._time_ms = metrics.time_ms
        self._lock = threading.Lock()
        self._nodes: dict[Any, _NodeSensors] = {}
        self._open = 0
        self.throttle_time = throttle_time_sensor
        name = metrics.metric_name
        self.connection_closed_sensor = _meter(metrics, "connections-closed", group, "connection-close",
                                               "connections closed", None, WindowedCount())
        self.connection_created_sensor = _meter(metrics, "connections-created", group, "connection-creation",
                                                "new connections established", None, WindowedCount())
        transferred = _meter(metrics, "bytes-sent-received", group, "network-io",
                             "network operations (reads or writes) on all connections", None, WindowedCount())
        self.bytes_sent_sensor = _meter(metrics, "bytes-sent", group, "outgoing-byte",
                                        "outgoing bytes sent to all servers", None, WindowedSum(), (transferred,))
        self.requests_sent = _meter(metrics, "requests-sent", group, "request", "requests sent", None,
                                    WindowedCount())
        self.requests_sent.add(name("request-size-avg", group, "The average size of requests sent."), Avg())
        self.requests_sent.add(name("request-size-max", group, "The maximum size of any request sent."), Max())
        self.bytes_received_sensor = _meter(metrics, "bytes-received", group, "incoming-byte",
                                            "bytes read off all sockets", None, WindowedSum(), (transferred,))
        self.responses_received = _meter(metrics, "responses-received", group, "response", "responses received",
                                         None, WindowedCount())
        self.select_time = _meter(metrics, "select-time", group, "select",
                                  "times the I/O layer checked for new I/O to perform", None, WindowedCount())
        self.select_time.add(name("io-wait-time-ns-avg", group, "The average length of time the I/O thread spent "
                                  "waiting for a socket ready for reads or writes in nanoseconds."), Avg())
        self.select_time.add(name("io-wait-time-ns-total", group, "The total time the I/O thread spent waiting "
                                  "in nanoseconds"), CumulativeSum())
        self.select_time.add(name("io-wait-ratio", group, "The fraction of time the I/O thread spent waiting"),
                             _TimeRatio())
        self.io_time = metrics.sensor("io-time")
        self.io_time.add(name("io-time-ns-avg", group, "The average length of time for I/O per select call in "
                              "nanoseconds."), Avg())
        self.io_time.add(name("io-time-ns-total", group, "The total time the I/O thread spent doing I/O in "
                              "nanoseconds"), CumulativeSum())
        self.io_time.add(name("io-ratio", group, "The fraction of time the I/O thread spent doing I/O"),
                         _TimeRatio())
        metrics.add_metric(name("connection-count", group, "The current number of active connections."),
                           Gauge(lambda config, now: self._open))

    # --- NetworkListener ----------------------------------------------------------------

    def connection_created(self, node_id: Any) -> None:
        with self._lock:
            self._open += 1
            if node_id not in self._nodes:
                self._nodes[node_id] = _NodeSensors(self.metrics, self.node_group, node_id)
        self.connection_created_sensor.record(1.0, self._time_ms())

    def connection_closed(self, node_id: Any) -> None:
        with self._lock:
            self._open -= 1
        self.connection_closed_sensor.record(1.0, self._time_ms())

    def bytes_sent(self, node_id: Any, nbytes: int) -> None:
        now = self._time_ms()
        self.bytes_sent_sensor.record(nbytes, now)
        node = self._nodes.get(node_id)
        if node is not None:
            node.bytes_sent.record(nbytes, now)

    def bytes_received(self, node_id: Any, nbytes: int) -> None:
        now = self._time_ms()
        self.bytes_received_sensor.record(nbytes, now)
        node = self._nodes.get(node_id)
        if node is not None:
            node.bytes_received.record(nbytes, now)

    def request_sent(self, node_id: Any, api_key: int, nbytes: int) -> None:
        now = self._time_ms()
        self.requests_sent.record(nbytes, now)
        node = self._nodes.get(node_id)
        if node is not None:
            node.requests_sent.record(nbytes, now)

    def response_received(self, node_id: Any, api_key: int, nbytes: int, latency_ms: float,
                          throttle_time_ms: int) -> None:
        now = self._time_ms()
        self.responses_received.record(nbytes, now)
        node = self._nodes.get(node_id)
        if node is not None:
            node.responses_received.record(nbytes, now)
            if api_key == _FETCH_API_KEY:
                node.latency.record(latency_ms, now)
        if self.throttle_time is not None and api_key != _FETCH_API_KEY:
            self.throttle_time.record(throttle_time_ms, now)

    def poll_done(self, select_ns: int, io_ns: int) -> None:
        now = self._time_ms()
        self.select_time.record(select_ns, now)
        self.io_time.record(io_ns, now)

    # --- reading ------------------------------------------------------------------------

    @property
    def connection_count(self) -> int:
        """Connections established and not yet closed (the ``connection-count`` gauge)."""
        return self._open

    def nodes(self) -> list[Any]:
        """The node ids that have per-node metrics (every node ever connected to)."""
        with self._lock:
            return list(self._nodes)


def selector_metrics(metrics: Optional[Metrics], prefix: str = "consumer",
                     throttle_time_sensor: Optional[Sensor] = None) -> Optional[SelectorMetrics]:
    """The engines' network listener: None when metrics are off (``metrics`` is None)."""
    return None if metrics is None else SelectorMetrics(metrics, prefix, throttle_time_sensor)
