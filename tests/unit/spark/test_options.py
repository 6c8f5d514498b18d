"""kproto.spark.options: Spark's Kafka source options parsed and checked (no Spark, no broker)."""

from __future__ import annotations

import pytest

from kproto.errors import KafkaConfigurationError
from kproto.spark.options import EARLIEST, LATEST, parse_options
from kproto.structs import IsolationLevel, TopicPartition

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


def parse(streaming: bool | None = False, **extra: str):
    options = dict(BASE)
    options.update(extra)
    return parse_options(options, streaming=streaming)


def test_defaults_batch_and_streaming():
    batch = parse()
    assert (batch.starting, batch.ending) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.client_config == {"bootstrap_servers": ["127.0.0.1:9092"], "enable_auto_commit": False,
                                   "allow_auto_create_topics": False}
    assert parse(streaming=True).starting == "latest"


def test_option_names_are_case_insensitive_and_topics_split():
    opts = parse_options({"KAFKA.BOOTSTRAP.SERVERS": "a:1, b:2", "Subscribe": "x, y,x",
                          "STARTINGOFFSETS": "Latest"}, streaming=True)
    assert opts.subscribe == ("x", "y")
    assert opts.client_config["bootstrap_servers"] == ["a:1", "b:2"]
    assert opts.starting == "latest"


def test_json_offsets_and_assign():
    opts = parse(startingOffsets='{"t":{"0":5,"1":-2}}', endingOffsets='{"t":{"0":9,"1":-1}}')
    assert opts.starting == {TopicPartition("t", 0): 5, TopicPartition("t", 1): EARLIEST}
    assert opts.ending == {TopicPartition("t", 0): 9, TopicPartition("t", 1): LATEST}
    opts = parse_options({"kafka.bootstrap.servers": "h:1", "assign": '{"b":[1,0],"a":[2]}'}, streaming=False)
    assert opts.assign == (TopicPartition("a", 2), TopicPartition("b", 0), TopicPartition("b", 1))


def test_timestamps_take_precedence_as_in_spark():
    opts = parse(startingOffsets="earliest", startingOffsetsByTimestamp='{"t":{"0":1000}}')
    assert opts.starting == ("timestamp", {TopicPartition("t", 0): 1000})
    opts = parse(startingOffsetsByTimestamp='{"t":{"0":1000}}', startingTimestamp="7", endingTimestamp="9")
    assert (opts.starting, opts.ending) == (("timestamp", 7), ("timestamp", 9))


def test_kafka_settings_translate_to_kproto_names_and_types():
    opts = parse(**{"kafka.isolation.level": "read_committed", "kafka.fetch.max.bytes": "1048576",
                    "kafka.check.crcs": "false", "kafka.security.protocol": "PLAINTEXT",
                    "kafka.client.id": "spark-job", "kafka.ssl.endpoint.identification.algorithm": ""})
    config = opts.client_config
    assert config["isolation_level"] == "read_committed" and opts.isolation_level is IsolationLevel.READ_COMMITTED
    assert config["fetch_max_bytes"] == 1048576 and config["check_crcs"] is False
    assert config["client_id"] == "spark-job" and config["ssl_check_hostname"] is False


def test_sasl_jaas_config_of_the_plain_and_scram_modules_gives_the_credentials():
    # What a Java Spark Kafka job carries, quotes and separators inside the values included.
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="al\\"ice" password="p=w;d";')
    opts = parse(**{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                    "kafka.sasl.jaas.config": jaas})
    config = opts.client_config
    assert (config["security_protocol"], config["sasl_mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (config["sasl_plain_username"], config["sasl_plain_password"]) == ('al"ice', "p=w;d")


def test_kafka_group_id_names_every_consumer_of_the_query_and_commits_stay_off():
    from kproto.spark.reader import task_consumer_config

    opts = parse(groupIdPrefix="ignored", **{"kafka.group.id": "billing-reader"})
    assert opts.client_config["group_id"] == "billing-reader"
    task = task_consumer_config(opts)  # an executor's consumer
    assert task["group_id"] == "billing-reader" and task["enable_auto_commit"] is False
    assert "group_id" not in parse().client_config  # no group unless asked for


def test_other_source_options():
    opts = parse(streaming=True, maxOffsetsPerTrigger="100", minPartitions="4", failOnDataLoss="False",
                 includeHeaders="true", maxRecordsPerPartition="10", **{"kafkaConsumer.pollTimeoutMs": "5000"})
    assert (opts.max_offsets_per_trigger, opts.min_partitions, opts.max_records_per_partition) == (100, 4, 10)
    assert opts.fail_on_data_loss is False and opts.include_headers and opts.poll_timeout_ms == 5000


BAD = [
    ({"subscribe": None}, "exactly one of the options 'subscribe'"),
    ({"assign": '{"t":[0]}'}, "exactly one of the options"),
    ({"kafka.bootstrap.servers": None}, "kafka.bootstrap.servers' is required"),
    ({"sbuscribe": "t"}, "unknown option 'sbuscribe'"),
    ({"path": "/x"}, "takes no path"),
    ({"minOffsetsPerTrigger": "5"}, "'minOffsetsPerTrigger' is for streaming queries only"),
    ({"maxTriggerDelay": "5s"}, "'maxTriggerDelay' is for streaming queries only"),
    ({"startingOffsets": "latest"}, "not allowed for a batch query"),
    ({"endingOffsets": "earliest"}, "not allowed for a batch query"),
    ({"startingOffsets": "first"}, "must be 'earliest', 'latest' or a JSON object"),
    ({"startingOffsets": '{"t":{"0":-1}}'}, "must be a non-negative integer or -2"),
    ({"endingOffsets": '{"t":{"0":-2}}'}, "must be a non-negative integer or -1"),
    ({"startingOffsets": '{"t":{"x":1}}'}, "is not an integer"),
    ({"startingOffsets": '{"t":'}, "is not valid JSON"),
    ({"startingOffsetsByTimestamp": '{"t":{"0":-5}}'}, "must be a non-negative integer"),
    ({"startingOffsetsByTimestampStrategy": "skip"}, "must be 'error' or 'latest'"),
    ({"minPartitions": "0"}, "'minPartitions' must be >= 1"),
    ({"minPartitions": "many"}, "must be an integer"),
    ({"failOnDataLoss": "yes"}, "must be 'true' or 'false'"),
    ({"maxOffsetsPerTrigger": "10"}, "for streaming queries only"),
    ({"subscribe": " , "}, "at least one topic"),
    ({"subscribe": None, "subscribePattern": "t-("}, "not a valid regular expression"),
    ({"subscribe": None, "assign": '{"t":[]}'}, "non-empty list of partitions"),
    ({"subscribe": None, "assign": '["t"]'}, "JSON object of topic"),
    ({"kafka.auto.offset.reset": "earliest"}, "set the source option 'startingOffsets'"),
    ({"kafka.value.deserializer": "x"}, "always returned as bytes"),
    ({"kafka.enable.auto.commit": "true"}, "never in Kafka"),
    ({"kafka.ssl.truststore.location": "/x.jks"}, "PEM"),
    ({"kafka.sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"},
     "only PlainLoginModule / ScramLoginModule"),
    ({"kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u";'},
     'needs username="..." and password="..."'),
    ({"kafka.no.such.setting": "1"}, "unknown Kafka client setting 'no.such.setting'"),
    ({"kafka.selector": "x"}, "cannot be given as a string"),
    ({"kafka.isolation.level": "dirty"}, "isolation_level"),
    ({"kafka.fetch.max.bytes": "lots"}, "must be an integer"),
    ({"kafka.request.timeout.ms": "10", "kafka.fetch.max.wait.ms": "500"}, "must be larger than"),
]


def test_min_offsets_per_trigger_and_max_trigger_delay_as_spark_reads_them():
    opts = parse(streaming=True, minOffsetsPerTrigger="100")
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (100, 15 * 60 * 1000)  # Spark's 15m
    for text, ms in (("30s", 30_000), ("2m", 120_000), ("1h", 3_600_000), ("250ms", 250), ("750", 750),
                     (" 3 min ", 180_000)):
        assert parse(streaming=True, minOffsetsPerTrigger="1", maxTriggerDelay=text).max_trigger_delay_ms == ms
    for bad, message in (({"maxTriggerDelay": "soon"}, "must be a time"), ({"maxTriggerDelay": "5 weeks"}, "must be a time"),
                         ({"maxTriggerDelay": "-1s"}, "must not be negative"),
                         ({"minOffsetsPerTrigger": "0"}, "'minOffsetsPerTrigger' must be >= 1"),
                         ({"minOffsetsPerTrigger": "500", "maxOffsetsPerTrigger": "100"}, "is higher than")):
        with pytest.raises(KafkaConfigurationError, match=_escape(message)):
            parse_options(dict(BASE, **bad), streaming=True)


@pytest.mark.parametrize("change, message", BAD, ids=[m for _, m in BAD])
def test_bad_options_fail_with_a_clear_message(change, message):
    options = dict(BASE)
    for key, value in change.items():
        if value is None:
            options.pop(key)
        else:
            options[key] = value
    with pytest.raises(KafkaConfigurationError, match="kproto Spark source: .*" + _escape(message)):
        parse_options(options, streaming=False)


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_streaming_refuses_batch_only_options_and_undecided_mode_accepts_both():
    with pytest.raises(KafkaConfigurationError, match="'endingoffsets' is for batch queries only"):
        parse(streaming=True, endingOffsets="latest")
    # The DataSource checks before Spark says which kind of read it is.
    assert parse(streaming=None, maxOffsetsPerTrigger="5").max_offsets_per_trigger == 5


def test_importing_the_package_loads_neither_pyspark_nor_pyarrow():
    import subprocess
    import sys

    code = ("import sys, kproto, kproto.spark, kproto.spark.options, kproto.spark.planning, "
            "kproto.spark.resolver, kproto.spark.reader; "
            "print(sorted(m for m in ('pyspark', 'pyarrow', 'py4j') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
