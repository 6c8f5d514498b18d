"""ConsumerConfig: kafka-python's defaults, and every bad setting refused at construction."""

from __future__ import annotations


import pytest

from kproto.consumer.config import DEFAULT_CONFIG, ConsumerConfig
from kproto.errors import KafkaConfigurationError

kafka_group = pytest.importorskip("kafka.consumer.group")


def test_accepts_every_kafka_python_key_with_its_default():
    theirs = kafka_group.KafkaConsumer.DEFAULT_CONFIG
    missing = set(theirs) - set(DEFAULT_CONFIG)
    assert not missing
    # Plain values must match; class/callable defaults are kproto's own equivalents.
    skip = {"client_id", "partition_assignment_strategy", "kafka_client", "default_offset_commit_callback",
            "selector"}
    for key, value in theirs.items():
        if key not in skip:
            assert DEFAULT_CONFIG[key] == value, key


def test_the_defaults_are_the_consumer_class_attribute_as_in_kafka_python():
    from kproto import KafkaConsumer

    assert KafkaConsumer.DEFAULT_CONFIG is DEFAULT_CONFIG
    assert set(kafka_group.KafkaConsumer.DEFAULT_CONFIG) <= set(KafkaConsumer.DEFAULT_CONFIG)


def test_isolation_level_takes_what_kafka_python_3_takes():
    from kafka import IsolationLevel as TheirLevel

    for value in (TheirLevel.READ_COMMITTED, 1, "READ_COMMITTED", "read-committed", " read_committed "):
        assert ConsumerConfig(isolation_level=value).isolation_level == "read_committed", value
    assert ConsumerConfig(isolation_level=TheirLevel.READ_UNCOMMITTED).isolation_level == "read_uncommitted"
    for bad in (2, True, "committed", None):
        with pytest.raises(KafkaConfigurationError, match="isolation_level"):
            ConsumerConfig(isolation_level=bad)


def test_defaults_and_access():
    config = ConsumerConfig(group_id="g")
    assert config["fetch_min_bytes"] == 1 and config.max_poll_records == 500
    assert config.group_protocol == "classic"
    assert config.user_supplied == frozenset({"group_id"})
    assert dict(config)["group_id"] == "g"
    with pytest.raises(AttributeError):
        config.fetch_min_bytes = 5


def test_unknown_key_named():
    with pytest.raises(KafkaConfigurationError, match="fetch_min_byte"):
        ConsumerConfig(fetch_min_byte=1)


@pytest.mark.parametrize("key, value", [
    ("fetch_min_bytes", -1),
    ("fetch_min_bytes", "1"),
    ("fetch_max_bytes", 2**31),
    ("max_poll_records", 0),
    ("max_poll_records", True),
    ("check_crcs", "yes"),
    ("isolation_level", "READ_COMMITTED_PLEASE"),
    ("auto_offset_reset", "sometimes"),
    ("group_protocol", "modern"),
    ("security_protocol", "TLS"),
    ("bootstrap_servers", []),
    ("bootstrap_servers", [""]),
    ("key_deserializer", 42),
    ("consumer_timeout_ms", -5),
    ("consumer_timeout_ms", float("nan")),
    ("partition_assignment_strategy", ["fastest"]),
    ("partition_assignment_strategy", []),
    ("partition_assignment_strategy", "range,Range"),
    ("partition_assignment_strategy", ["range", "org.apache.kafka.clients.consumer.RangeAssignor"]),
    ("partition_assignment_strategy", [object()]),
    ("bootstrap_servers", "host:notaport"),
    ("bootstrap_servers", "host:99999"),
    ("bootstrap_servers", ["ok:9092", "h:0"]),
    ("bootstrap_servers", 9092),
    ("max_partition_fetch_bytes", -1),
    ("fetch_max_wait_ms", float("inf")),
    ("request_timeout_ms", 2**40),
    ("retry_backoff_ms", float("nan")),
    ("max_in_flight_requests_per_connection", 0),
    ("receive_message_max_bytes", -1),
    ("max_poll_interval_ms", 0),
    ("metadata_max_age_ms", -1),
    ("client_id", 123),
    ("enable_auto_commit", "no"),
    ("api_version", "three"),
    ("group_id", ""),
    ("ssl_context", "ctx"),
])
def test_bad_values_name_the_setting(key, value):
    with pytest.raises(KafkaConfigurationError, match=key):
        ConsumerConfig({key: value})


@pytest.mark.parametrize("configs, words", [
    (dict(heartbeat_interval_ms=45000, session_timeout_ms=45000), "heartbeat_interval_ms"),
    (dict(fetch_max_wait_ms=40000), "request_timeout_ms"),
    (dict(request_timeout_ms=600000), "connections_max_idle_ms"),
    (dict(group_protocol="consumer", session_timeout_ms=10000), "session_timeout_ms"),
    (dict(group_protocol="consumer", partition_assignment_strategy=["range"]), "partition_assignment_strategy"),
    (dict(group_remote_assignor="uniform"), "group_remote_assignor"),
    (dict(group_instance_id="a"), "group_instance_id"),
    (dict(reconnect_backoff_ms=5000, reconnect_backoff_max_ms=100), "reconnect_backoff"),
    (dict(security_protocol="SASL_SSL"), "sasl_mechanism"),
])
def test_contradictions(configs, words):
    with pytest.raises(KafkaConfigurationError, match=words):
        ConsumerConfig(configs)


def test_normalisations():
    config = ConsumerConfig(auto_offset_reset="smallest", group_protocol="CONSUMER",
                            group_remote_assignor="uniform", api_version="3.7", group_id="g")
    assert config.auto_offset_reset == "earliest"
    assert config.group_protocol == "consumer"
    assert config.api_version == (3, 7)
    # No group: nothing to auto-commit to.
    assert ConsumerConfig().enable_auto_commit is False
    assert ConsumerConfig(group_id="g").enable_auto_commit is True
    # The frame guard is raised to cover a full fetch.
    config = ConsumerConfig(fetch_max_bytes=200_000_000, receive_message_max_bytes=1000)
    assert config.receive_message_max_bytes == 200_000_000 + config.max_partition_fetch_bytes


@pytest.mark.parametrize("strategy", [
    "range", ["Range", "cooperative-sticky"], "cooperative-sticky,range",
    ["org.apache.kafka.clients.consumer.StickyAssignor"],
])
def test_assignor_spellings_the_classic_engine_resolves(strategy):
    assert ConsumerConfig(partition_assignment_strategy=strategy).partition_assignment_strategy


def test_assignor_classes_and_instances():
    class Mine:
        name = "mine"

        def assign(self, cluster, members):
            return {}

    assert ConsumerConfig(partition_assignment_strategy=Mine).partition_assignment_strategy == (Mine,)
    mine = Mine()
    assert ConsumerConfig(partition_assignment_strategy=[mine, "range"]).partition_assignment_strategy == (mine, "range")


def test_deserializer_forms():
    class Java:
        def deserialize(self, topic, data):
            return data

    assert ConsumerConfig(value_deserializer=bytes.decode).value_deserializer is bytes.decode
    assert isinstance(ConsumerConfig(key_deserializer=Java()).key_deserializer, Java)


def test_replace_revalidates():
    config = ConsumerConfig(group_id="g", max_poll_records=10)
    assert config.replace(max_poll_records=20).max_poll_records == 20
    assert config.replace(max_poll_records=20).group_id == "g"
    with pytest.raises(KafkaConfigurationError):
        config.replace(max_poll_records=-1)


def test_assignor_names_are_the_resolvers():
    """One table of names: every name config accepts resolves to the assignor of that name,
    and every assignor the resolver has a name for is accepted."""
    from kproto.consumer.classic.assignors.resolve import BUILTIN_ASSIGNORS, resolve_assignors
    from kproto.consumer.config import ASSIGNOR_NAMES, JAVA_ASSIGNOR_NAMES, builtin_assignor_name

    assert set(ASSIGNOR_NAMES) == set(BUILTIN_ASSIGNORS)
    for spelling in list(ASSIGNOR_NAMES) + list(JAVA_ASSIGNOR_NAMES) + ["  RANGE "]:
        ConsumerConfig(partition_assignment_strategy=spelling)
        (assignor,) = resolve_assignors(spelling)
        assert assignor.name == builtin_assignor_name(spelling)
    assert builtin_assignor_name("org.apache.kafka.clients.consumer.rangeassignor") is None


def test_isolation_level_reads_as_kafka_pythons_string_and_parses_to_the_enum():
    # consumer.config shows what kafka-python shows; the engines parse it to the enum.
    from kproto.consumer.config import parse_isolation_level
    from kproto.structs import IsolationLevel

    assert ConsumerConfig()["isolation_level"] == "read_uncommitted"
    config = ConsumerConfig(isolation_level="read_committed")
    assert config["isolation_level"] == "read_committed"
    assert parse_isolation_level(config["isolation_level"]) is IsolationLevel.READ_COMMITTED
    assert ConsumerConfig(isolation_level=IsolationLevel.READ_COMMITTED)["isolation_level"] == "read_committed"


def test_group_rebalance_config_reads_the_group_settings_once():
    from kproto.consumer.group_rebalance_config import GroupRebalanceConfig

    group = GroupRebalanceConfig.from_config(ConsumerConfig(dict(
        group_id="g", max_poll_interval_ms=12345, isolation_level="read_committed", enable_auto_commit=False)))
    assert (group.group_id, group.rebalance_timeout_ms, group.require_stable) == ("g", 12345, True)
    assert group.rack_id is None  # client_rack "" means no rack
    assert group.enable_auto_commit is False
    defaults = GroupRebalanceConfig.from_config(ConsumerConfig({}))
    assert (defaults.group_id, defaults.require_stable, defaults.session_timeout_ms) == (None, False, 45000)
