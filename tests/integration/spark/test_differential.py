"""kproto's source beside Spark's own: the same reads through ``format("kafka")`` (Spark's
JVM source, ``spark-sql-kafka-0-10``) and ``format("kproto")`` give the same rows on Apache
Kafka 4.4.

Spark's source is the package of the installed PySpark's version, resolved by Maven from
``tests/ground/spark/pom.xml`` (:func:`tests.brokers.maven.spark_kafka_jars`) and handed to
Spark as local jars (``spark.jars``); the test extra pins a PySpark whose package is served.
``KPROTO_SPARK_KAFKA_VERSION`` picks another package version (a local try against a newer
PySpark). The module skips when the package cannot be resolved.

Rows compared: key, value, topic, partition, offset, timestamp, timestampType, headers.
One SparkSession for the module (both sources in it).
"""

from __future__ import annotations

import json
import os
import time

import pytest

pytest.importorskip("pyspark", reason="the Spark data source needs pyspark: pip install 'kproto[spark]'")
pytest.importorskip("pyarrow", reason="the Spark data source needs pyarrow: pip install 'kproto[spark]'")

from tests.brokers.seeding import CODECS  # noqa: E402
from tests.integration.spark.session import spark_session  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.broker_kinds("apache_kafka")]

COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType")


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    import pyspark

    from tests.brokers import maven

    version = os.environ.get("KPROTO_SPARK_KAFKA_VERSION") or pyspark.__version__
    try:
        jars = maven.spark_kafka_jars(version, os.path.join(os.path.dirname(pyspark.__file__), "jars"))
    except maven.MavenUnavailable as exc:
        pytest.skip("Spark's Kafka source {} is not available: {}".format(version, str(exc).splitlines()[0]))
    with spark_session(tmp_path_factory, **{"spark.jars": ",".join(jars)}) as session:
        yield session


def both(spark, broker, **options) -> tuple[list, list]:
    """The rows of the same read through Spark's source and kproto's, as sorted tuples."""
    out = []
    for fmt in ("kafka", "kproto"):
        reader = spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap_servers)
        for key, value in options.items():
            reader = reader.option(key, value)
        df = reader.load()
        columns = list(COLUMNS) + (["headers"] if "headers" in df.columns else [])
        rows = [tuple(_plain(v) for v in row) for row in df.select(*columns).collect()]
        out.append(sorted(rows, key=lambda r: r[:3]))
    return out[0], out[1]


def _plain(value):
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):  # headers: Row(key, value)
        return tuple((h[0], None if h[1] is None else bytes(h[1])) for h in value)
    return value


def test_every_codec_with_headers_gives_the_same_rows(spark, broker):
    topic = broker.new_topic(partitions=len(CODECS))
    for p, codec in enumerate(CODECS):
        broker.produce(topic, 300, partitions=[p], codec=codec, start_index=p * 300)
    theirs, ours = both(spark, broker, subscribe=topic, includeHeaders="true")
    assert len(ours) == 300 * len(CODECS)
    assert ours == theirs


def test_subscribe_pattern_assign_and_json_offsets_give_the_same_rows(spark, broker):
    prefix = "dif%d" % time.monotonic_ns()
    first, second = broker.new_topic(partitions=2, prefix=prefix), broker.new_topic(partitions=3, prefix=prefix)
    broker.produce(first, 200)
    broker.produce(second, 300)
    theirs, ours = both(spark, broker, subscribePattern=prefix + ".*")
    assert len(ours) == 500 and ours == theirs
    theirs, ours = both(spark, broker, assign=json.dumps({first: [1], second: [0, 2]}),
                        startingOffsets=json.dumps({first: {"1": 10}, second: {"0": -2, "2": 50}}),
                        endingOffsets=json.dumps({first: {"1": 60}, second: {"0": 30, "2": -1}}))
    assert ours and ours == theirs


def test_timestamp_offsets_give_the_same_rows(spark, broker):
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 400)
    stamps = sorted(w.timestamp for w in written)
    start, end = stamps[100], stamps[300]
    theirs, ours = both(spark, broker, subscribe=topic, startingTimestamp=str(start), endingTimestamp=str(end))
    assert ours and ours == theirs
    by_partition = {topic: {"0": start, "1": start}}
    theirs, ours = both(spark, broker, subscribe=topic, startingOffsetsByTimestamp=json.dumps(by_partition))
    assert ours and ours == theirs


def test_min_partitions_splits_give_the_same_rows(spark, broker):
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 1000)
    theirs, ours = both(spark, broker, subscribe=topic, minPartitions="7")
    assert len(ours) == 1000 and ours == theirs


@pytest.mark.needs("transactions")
def test_read_committed_over_aborted_transactions_gives_the_same_rows(spark, broker):
    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 20)
    broker.produce_transactions(topic, committed=10, aborted=10, start_index=100)
    broker.produce(topic, 5, start_index=200)
    theirs, ours = both(spark, broker, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
    assert len(ours) == 35 and ours == theirs
