"""The options of the ``kproto`` Spark data source: parsing and validation, no I/O.

Owns the translation of Spark's Kafka source options (``subscribe``, ``startingOffsets``,
``kafka.bootstrap.servers``, ...) into a checked :class:`SourceOptions`, and of the
``kafka.``-prefixed Java client settings into kproto ``KafkaConsumer`` keyword arguments.
Everything wrong is reported here, on the driver, before a task runs: an unknown option,
a malformed value, two options that contradict each other, or a client setting the
consumer refuses (``ConsumerConfig`` validates the translated settings).

Option names are case-insensitive, as in Spark (PySpark hands them over lower-cased).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

from kproto.consumer.config import DEFAULT_CONFIG, ConsumerConfig, parse_isolation_level
from kproto.errors import KafkaConfigurationError
from kproto.structs import IsolationLevel, TopicPartition

log = logging.getLogger("kproto.spark")

EARLIEST = -2  # the JSON sentinels Spark uses inside per-partition offsets
LATEST = -1

# A starting/ending offset spec: "earliest", "latest", {TopicPartition: offset or sentinel},
# or ("timestamp", {TopicPartition: ms}) / ("timestamp", ms) for the *ByTimestamp options.
OffsetSpec = Union[str, dict[Any, Any], tuple[Any, ...]]

# Spark's Kafka source options this source implements (lower-cased).
_SOURCE_OPTIONS = frozenset(o.lower() for o in (
    "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "minPartitions", "maxRecordsPerPartition", "includeHeaders", "groupIdPrefix",
))
# Streaming only (a batch query naming one is refused).
_STREAMING_OPTIONS = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
# kafka.* settings Spark's own source refuses, with the reason it gives.
_REFUSED_CLIENT_SETTINGS = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always returned as bytes (the 'key' binary column)",
    "value.deserializer": "values are always returned as bytes (the 'value' binary column)",
    "enable.auto.commit": "the source keeps its offsets in Spark's checkpoint, never in Kafka",
    "interceptor.classes": "kproto has no interceptors",
}
# Java client names that do not translate by replacing dots with underscores.
_JAVA_ALIASES = {
    "ssl.endpoint.identification.algorithm": "ssl_check_hostname",
}
_JAVA_UNSUPPORTED = {
    "ssl.truststore.location": "kproto reads PEM files: use kafka.ssl.cafile",
    "ssl.keystore.location": "kproto reads PEM files: use kafka.ssl.certfile and kafka.ssl.keyfile",
}
# sasl.jaas.config login modules kproto reads the username and password from.
_JAAS_CREDENTIAL_MODULES = ("PlainLoginModule", "ScramLoginModule")
# Settings kproto's consumer takes only as Python objects; a string option cannot set them.
_OBJECT_SETTINGS = frozenset((
    "ssl_context", "selector", "socket_options", "metric_reporters", "kafka_client",
    "default_offset_commit_callback", "sasl_oauth_token_provider", "partition_assignment_strategy",
    "consumer_timeout_ms",
))
_OPTIONAL_INT_SETTINGS = frozenset(("receive_buffer_bytes", "send_buffer_bytes"))

# Option -> (SourceOptions attribute, type, lowest value).
_SCALAR_OPTIONS = {
    "failOnDataLoss": ("fail_on_data_loss", bool, 0),
    "includeHeaders": ("include_headers", bool, 0),
    "kafkaConsumer.pollTimeoutMs": ("poll_timeout_ms", int, 1),
    "fetchOffset.numRetries": ("fetch_offset_num_retries", int, 0),
    "fetchOffset.retryIntervalMs": ("fetch_offset_retry_interval_ms", int, 0),
    "maxOffsetsPerTrigger": ("max_offsets_per_trigger", int, 1),
    "minOffsetsPerTrigger": ("min_offsets_per_trigger", int, 1),
    "minPartitions": ("min_partitions", int, 1),
    "maxRecordsPerPartition": ("max_records_per_partition", int, 1),
}

DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's default (spark.network.timeout)
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Spark's default maxTriggerDelay, "15m"
# Spark's time strings (JavaUtils.timeStringAsMs): a number, then a unit (milliseconds without one).
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class SourceOptions:
    """The checked options of one ``spark.read``/``spark.readStream`` of format ``kproto``."""

    client_config: dict[Any, Any]  # KafkaConsumer kwargs
    subscribe: Optional[tuple[Any, ...]] = None
    subscribe_pattern: Optional[str] = None
    assign: Optional[tuple[Any, ...]] = None  # TopicPartitions
    starting: OffsetSpec = "earliest"
    ending: OffsetSpec = "latest"
    starting_by_timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    max_offsets_per_trigger: Optional[int] = None
    min_offsets_per_trigger: Optional[int] = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: Optional[int] = None
    max_records_per_partition: Optional[int] = None
    include_headers: bool = False
    streaming: bool = False
    raw: dict[Any, Any] = field(default_factory=dict, compare=False)

    # The client settings the source itself reads, typed (client_settings checked them).
    @property
    def isolation_level(self) -> IsolationLevel:
        return parse_isolation_level(self.client_config.get("isolation_level", IsolationLevel.READ_UNCOMMITTED))

    @property
    def bootstrap_servers(self) -> list[str]:
        servers: list[str] = self.client_config["bootstrap_servers"]
        return servers

    @property
    def request_timeout_ms(self) -> int:
        timeout: int = self.client_config.get("request_timeout_ms", DEFAULT_CONFIG["request_timeout_ms"])
        return timeout


def _fail(message: str) -> KafkaConfigurationError:
    return KafkaConfigurationError("kproto Spark source: " + message)


def _parse_bool(name: str, value: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise _fail("option '{}' must be 'true' or 'false', got {!r}".format(name, value))


def _parse_int(name: str, value: str, lo: int = 1) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise _fail("option '{}' must be an integer, got {!r}".format(name, value)) from None
    if number < lo:
        raise _fail("option '{}' must be >= {}, got {}".format(name, lo, number))
    return number


def _parse_duration_ms(name: str, value: str) -> int:
    """A Spark time string ("15m", "30s", "500ms", "2h"; milliseconds without a unit)."""
    match = re.fullmatch(r"(-?[0-9]+)\s*([a-z]+)?", str(value).strip().lower())
    unit = match.group(2) if match else None
    if match is None or (unit is not None and unit not in _TIME_UNITS_MS):
        raise _fail("option '{}' must be a time such as '15m', '30s' or '500ms', got {!r}".format(name, value))
    ms = int(int(match.group(1)) * _TIME_UNITS_MS[unit or "ms"])
    if ms < 0:
        raise _fail("option '{}' must not be negative, got {!r}".format(name, value))
    return ms


def _parse_json(name: str, value: str) -> Any:
    try:
        return json.loads(value)
    except (TypeError, ValueError) as exc:
        raise _fail("option '{}' is not valid JSON ({}): {!r}".format(name, exc, value)) from None


def _partition_number(name: str, topic: str, key: Any) -> int:
    # Spark's JSON writes partitions as object keys, so strings; lists hold ints.
    if isinstance(key, bool):
        raise _fail("option '{}': partition {!r} of topic '{}' is not an integer".format(name, key, topic))
    try:
        number = int(key)
    except (TypeError, ValueError):
        raise _fail("option '{}': partition {!r} of topic '{}' is not an integer".format(name, key, topic)) from None
    if number < 0 or (isinstance(key, str) and key.strip() != str(number)):
        raise _fail("option '{}': partition {!r} of topic '{}' is not a partition number".format(name, key, topic))
    return number


def parse_assign(value: str) -> tuple[Any, ...]:
    """``{"topicA":[0,1],"topicB":[2,4]}`` -> sorted TopicPartitions."""
    data = _parse_json("assign", value)
    if not isinstance(data, dict) or not data:
        raise _fail("option 'assign' must be a JSON object of topic -> [partitions], e.g. "
                    "{{\"topicA\":[0,1]}}, got {!r}".format(value))
    tps = set()
    for topic, partitions in data.items():
        if not topic or not isinstance(partitions, list) or not partitions:
            raise _fail("option 'assign': topic {!r} needs a non-empty list of partitions".format(topic))
        for p in partitions:
            if not isinstance(p, int) or isinstance(p, bool):
                raise _fail("option 'assign': partition {!r} of topic '{}' is not an integer".format(p, topic))
            tps.add(TopicPartition(topic, _partition_number("assign", topic, p)))
    return tuple(sorted(tps))


def parse_partition_map(name: str, value: str, *, allow: tuple[Any, ...] = ()) -> dict[Any, Any]:
    """``{"t":{"0":23,"1":-2}}`` -> {TopicPartition: int}; values >= 0 or in ``allow``."""
    data = _parse_json(name, value)
    if not isinstance(data, dict) or not data:
        raise _fail("option '{}' must be a JSON object of topic -> {{partition: value}}, got {!r}"
                    .format(name, value))
    result = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict) or not partitions:
            raise _fail("option '{}': topic {!r} needs an object of partition -> value".format(name, topic))
        for key, number in partitions.items():
            tp = TopicPartition(topic, _partition_number(name, topic, key))
            if not isinstance(number, int) or isinstance(number, bool) or (number < 0 and number not in allow):
                allowed = " or ".join(["a non-negative integer"] + [str(a) for a in allow])
                raise _fail("option '{}': value {!r} for {}-{} must be {}".format(
                    name, number, topic, tp.partition, allowed))
            result[tp] = number
    return result


def _parse_offsets(name: str, value: str, *, streaming: bool, ending: bool) -> OffsetSpec:
    text = value.strip()
    low = text.lower()
    if low in ("earliest", "latest"):
        if not streaming and not ending and low == "latest":
            raise _fail("startingOffsets='latest' is not allowed for a batch query (it would read nothing)")
        if not streaming and ending and low == "earliest":
            raise _fail("endingOffsets='earliest' is not allowed for a batch query (it would read nothing)")
        return low
    if not text.startswith("{"):
        raise _fail("option '{}' must be 'earliest', 'latest' or a JSON object like "
                    "{{\"topic\":{{\"0\":23,\"1\":-2}}}} (-2 earliest, -1 latest), got {!r}".format(name, value))
    allowed: tuple[Any, ...] = (EARLIEST, LATEST)
    if not streaming:
        allowed = (LATEST,) if ending else (EARLIEST,)
    parsed = parse_partition_map(name, text, allow=allowed)
    return parsed


def _jaas_credentials(key: str, value: str) -> dict[Any, Any]:
    """``sasl.jaas.config`` of the PLAIN or SCRAM login module as kproto's username and
    password (``...LoginModule required username="u" password="p";``). Other modules
    (OAUTHBEARER's callback handlers, Kerberos) name JVM classes kproto cannot run."""
    text = str(value).strip()
    module = re.match(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b", text)
    if module is None or not module.group(1).endswith(_JAAS_CREDENTIAL_MODULES):
        raise _fail("option '{}': kproto reads only PlainLoginModule / ScramLoginModule credentials from "
                    "sasl.jaas.config (for OAUTHBEARER pass a token provider to KafkaConsumer; Kerberos is "
                    "not supported)".format(key))
    pairs = dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', text[module.end():]))
    if "username" not in pairs or "password" not in pairs:
        raise _fail("option '{}': sasl.jaas.config needs username=\"...\" and password=\"...\"".format(key))
    unescape = lambda v: re.sub(r"\\(.)", r"\1", v)  # noqa: E731
    return {"sasl_plain_username": unescape(pairs["username"]), "sasl_plain_password": unescape(pairs["password"])}


def client_settings(options: Mapping[str, str]) -> dict[Any, Any]:
    """The ``kafka.*`` options as KafkaConsumer kwargs (Java names -> kproto names, typed)."""
    config: dict[Any, Any] = {}
    for key, value in options.items():
        if not key.startswith("kafka."):
            continue
        java = key[len("kafka."):]
        if java in _REFUSED_CLIENT_SETTINGS:
            raise _fail("Kafka option '{}' is not supported: {}".format(java, _REFUSED_CLIENT_SETTINGS[java]))
        if java in _JAVA_UNSUPPORTED:
            raise _fail("Kafka option '{}' is not supported: {}".format(java, _JAVA_UNSUPPORTED[java]))
        if java == "sasl.jaas.config":
            config.update(_jaas_credentials(key, value))
            continue
        name = _JAVA_ALIASES.get(java, java.replace(".", "_"))
        if name not in DEFAULT_CONFIG:
            raise _fail("unknown Kafka client setting '{}' (option '{}'; kproto consumer settings are "
                        "kafka-python's names with dots, e.g. kafka.fetch.max.bytes)".format(java, key))
        if name in _OBJECT_SETTINGS:
            raise _fail("Kafka client setting '{}' cannot be given as a string option".format(java))
        if java == "ssl.endpoint.identification.algorithm":
            config[name] = str(value).strip().lower() == "https"
            continue
        default = DEFAULT_CONFIG[name]
        if isinstance(default, bool):
            config[name] = _parse_bool(key, value)
        elif isinstance(default, int) or name in _OPTIONAL_INT_SETTINGS:
            config[name] = _parse_int(key, value, lo=0)
        else:
            config[name] = str(value)
    if "bootstrap_servers" not in config:
        raise _fail("option 'kafka.bootstrap.servers' is required")
    config["bootstrap_servers"] = [s.strip() for s in config["bootstrap_servers"].split(",") if s.strip()]
    # The source positions every partition itself and never commits.
    config["enable_auto_commit"] = False
    config.setdefault("allow_auto_create_topics", False)
    try:
        ConsumerConfig(config)
    except KafkaConfigurationError as exc:
        raise _fail("invalid Kafka client settings: {}".format(exc)) from None
    return config


def parse_options(options: Mapping[str, str], *, streaming: Optional[bool]) -> SourceOptions:
    """Check every option; raises KafkaConfigurationError naming the first problem."""
    opts = {str(k).lower(): v for k, v in options.items()}
    for key in opts:
        if key.startswith("kafka.") or key in _SOURCE_OPTIONS:
            continue
        if key == "path":
            raise _fail("the Kafka source takes no path: use option 'subscribe', 'subscribePattern' or 'assign'")
        raise _fail("unknown option '{}'".format(key))
    config = client_settings(opts)

    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) != 1:
        raise _fail("exactly one of the options 'subscribe', 'subscribePattern', 'assign' must be given "
                    "(got {})".format(", ".join(repr(c) for c in chosen) or "none"))
    kwargs: dict[str, Any] = {}
    if "subscribe" in opts:
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise _fail("option 'subscribe' must list at least one topic (comma-separated)")
        kwargs["subscribe"] = tuple(dict.fromkeys(topics))
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise _fail("option 'subscribePattern' must not be empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _fail("option 'subscribePattern' is not a valid regular expression: {}".format(exc)) from None
        kwargs["subscribe_pattern"] = pattern
    else:
        kwargs["assign"] = parse_assign(opts["assign"])

    # streaming=None (the DataSource, before Spark says which kind of read it is) checks
    # what both kinds share; reader()/streamReader() check again with the kind.
    kwargs["starting"] = _starting(opts, streaming is not False)
    if streaming:
        for key in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"):
            if key in opts:
                raise _fail("option '{}' is for batch queries only".format(key))
    else:
        kwargs["ending"] = _ending(opts)
        for name in _STREAMING_OPTIONS:
            if streaming is False and name.lower() in opts:
                raise _fail("option '{}' is for streaming queries only".format(name))
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise _fail("option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {!r}"
                    .format(strategy))
    kwargs["starting_by_timestamp_strategy"] = strategy

    for name, (attribute, kind, lo) in _SCALAR_OPTIONS.items():
        key = name.lower()
        if key in opts:
            kwargs[attribute] = (_parse_bool(name, opts[key]) if kind is bool
                                 else _parse_int(name, opts[key], lo=lo))
    if "maxtriggerdelay" in opts:
        kwargs["max_trigger_delay_ms"] = _parse_duration_ms("maxTriggerDelay", opts["maxtriggerdelay"])
    low, high = kwargs.get("min_offsets_per_trigger"), kwargs.get("max_offsets_per_trigger")
    if low is not None and high is not None and low > high:
        raise _fail("option 'minOffsetsPerTrigger' ({}) is higher than 'maxOffsetsPerTrigger' ({})".format(low, high))
    if "groupidprefix" in opts:
        # Spark names its consumer groups with it; kproto's tasks use no group at all.
        log.info("option groupIdPrefix has no effect: kproto reads without a consumer group")
    return SourceOptions(client_config=config, streaming=bool(streaming), raw=dict(opts), **kwargs)


def _by_timestamp(opts: dict[Any, Any], single: str, per_partition: str) -> Optional[tuple[Any, ...]]:
    if single in opts:
        return ("timestamp", _parse_int(single, opts[single], lo=0))
    if per_partition in opts:
        return ("timestamp", parse_partition_map(per_partition, opts[per_partition]))
    return None


def _starting(opts: dict[Any, Any], streaming: bool) -> OffsetSpec:
    # Spark's precedence: startingTimestamp, then startingOffsetsByTimestamp, then startingOffsets.
    spec = _by_timestamp(opts, "startingtimestamp", "startingoffsetsbytimestamp")
    if spec is not None:
        return spec
    if "startingoffsets" in opts:
        return _parse_offsets("startingOffsets", opts["startingoffsets"], streaming=streaming, ending=False)
    return "latest" if streaming else "earliest"


def _ending(opts: dict[Any, Any]) -> OffsetSpec:
    spec = _by_timestamp(opts, "endingtimestamp", "endingoffsetsbytimestamp")
    if spec is not None:
        return spec
    if "endingoffsets" in opts:
        return _parse_offsets("endingOffsets", opts["endingoffsets"], streaming=False, ending=True)
    return "latest"
