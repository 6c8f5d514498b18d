"""PySpark data source ``kproto``: read Kafka topics into Spark, batch and streaming.

A pure-Python replacement for Spark's JVM Kafka source (``spark-sql-kafka``), with its
schema and options, built on PySpark's Python Data Source API (PySpark >= 4.0, extra
``kproto[spark]``)::

    import kproto.spark
    kproto.spark.register(spark)
    df = (spark.read.format("kproto")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

Modules: ``options`` (option parsing and checks), ``planning`` (offset ranges, splitting,
offsets JSON, rate limit), ``resolver`` (driver-side offset lookups), ``reader`` (a task's
read into PyArrow batches), ``consumer_pool`` (the task consumers a worker keeps between
tasks), ``source`` (the PySpark classes). Importing this package
loads neither pyspark nor pyarrow: ``register`` and ``KafkaDataSource`` load them.
"""

from __future__ import annotations

from typing import Any

SOURCE_NAME = "kproto"


def register(spark: Any) -> None:
    """Register the ``kproto`` format in ``spark`` (a SparkSession)."""
    from kproto.spark.source import register as _register

    _register(spark)


def __getattr__(name: str) -> Any:
    if name in ("KafkaDataSource", "KafkaBatchReader", "KafkaStreamReader", "spark_schema"):
        from kproto.spark import source

        return getattr(source, name)
    raise AttributeError("module 'kproto.spark' has no attribute {!r}".format(name))


__all__ = ["SOURCE_NAME", "register", "KafkaDataSource", "KafkaBatchReader", "KafkaStreamReader",
           "spark_schema"]
