"""The share consumer's fetch and acknowledgement metrics (Java's ``ShareFetchMetricsManager``).

Group ``<prefix>-share-fetch-manager-metrics``: ``fetch-latency-avg/max``,
``fetch-rate/total`` and ``bytes-fetched`` (``fetch-size-avg/max``,
``bytes-consumed-rate/total``) recorded per ShareFetch response on the background thread;
``records-consumed-rate/total`` and ``records-per-request-avg`` from the records handed to
the application; ``acknowledgements-send-rate/total`` and
``acknowledgements-error-rate/total`` per acknowledged offset once its answer (or failure)
is known. Sensors take their own locks, so both threads record.
"""

from __future__ import annotations

from kproto.metrics.metrics import Metrics
from kproto.metrics.stats import Avg, Max, Meter, WindowedCount


class ShareFetchMetricsManager:
    def __init__(self, metrics: Metrics, prefix: str = "consumer") -> None:
        self.metrics = metrics
        group = prefix + "-share-fetch-manager-metrics"
        name = metrics.metric_name

        def meter(sensor_name: str, what: str, count: bool = False) -> Meter:
            return Meter(name(sensor_name + "-rate", group, "The average number of {} per second".format(what)),
                         name(sensor_name + "-total", group, "The total number of {}".format(what)),
                         WindowedCount() if count else None)

        self.fetch_latency = metrics.sensor("share-fetch-latency")
        self.fetch_latency.add(name("fetch-latency-avg", group, "The average time taken for a share fetch request."),
                               Avg())
        self.fetch_latency.add(name("fetch-latency-max", group, "The max time taken for any share fetch request."),
                               Max())
        self.fetch_latency.add(meter("fetch", "share fetch requests", count=True))
        self.bytes_fetched = metrics.sensor("share-bytes-fetched")
        self.bytes_fetched.add(name("fetch-size-avg", group, "The average number of bytes fetched per request"), Avg())
        self.bytes_fetched.add(name("fetch-size-max", group, "The maximum number of bytes fetched per request"), Max())
        self.bytes_fetched.add(meter("bytes-consumed", "bytes consumed"))
        self.records_fetched = metrics.sensor("share-records-fetched")
        self.records_fetched.add(name("records-per-request-avg", group,
                                      "The average number of records in each poll() return"), Avg())
        self.records_fetched.add(meter("records-consumed", "records consumed"))
        self.acknowledgements_sent = metrics.sensor("share-acknowledgements-send")
        self.acknowledgements_sent.add(meter("acknowledgements-send", "record acknowledgements sent"))
        self.acknowledgement_errors = metrics.sensor("share-acknowledgements-error")
        self.acknowledgement_errors.add(meter("acknowledgements-error", "record acknowledgements that failed"))

    def record_fetch(self, latency_ms: float, size_bytes: int) -> None:
        self.fetch_latency.record(latency_ms)
        self.bytes_fetched.record(size_bytes)

    def record_records(self, count: int) -> None:
        self.records_fetched.record(count)

    def record_acknowledgements(self, count: int, failed: bool) -> None:
        if count:
            self.acknowledgements_sent.record(count)
            if failed:
                self.acknowledgement_errors.record(count)
