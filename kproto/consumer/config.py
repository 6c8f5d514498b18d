"""Consumer configuration: kafka-python 3.x's KafkaConsumer keyword arguments, validated.

Owns the table of every accepted setting with its default (the same defaults as
kafka-python's ``KafkaConsumer.DEFAULT_CONFIG``, plus Java settings kafka-python lacks, by
their Java names in snake_case: the KIP-848 settings ``group_protocol`` and
``group_remote_assignor``, ``retry_backoff_max_ms``, KIP-580's cap on the exponential
retry backoff, and ``metadata_recovery_strategy`` /
``metadata_recovery_rebootstrap_trigger_ms``, KIP-899/KIP-1102's return to the bootstrap
servers), the validation done once at construction, and ``ConsumerConfig``, the read-only
mapping both engines read.

Everything wrong with a configuration raises ``KafkaConfigurationError`` at construction,
naming the setting: an unknown key, a wrong type, a value out of range or outside its
enumeration, or two settings that contradict each other. Nothing is checked lazily later.
"""

from __future__ import annotations

import logging
import math
import selectors
import socket
import ssl
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kproto import __version__
from kproto.errors import KafkaConfigurationError
from kproto.net.config import parse_bootstrap_servers
from kproto.structs import IsolationLevel

log = logging.getLogger("kproto.consumer")

INT32_MAX = 2**31 - 1

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
OFFSET_RESET_STRATEGIES = ("earliest", "latest", "none")
# kafka-python (and Kafka before 0.9) accepted these old names.
_DEPRECATED_OFFSET_RESET = {"smallest": "earliest", "largest": "latest"}
GROUP_PROTOCOLS = ("classic", "consumer")
METADATA_RECOVERY_STRATEGIES = ("rebootstrap", "none")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "GSSAPI", "OAUTHBEARER", "SCRAM-SHA-256", "SCRAM-SHA-512")
DNS_LOOKUPS = ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only", "default")
# The one table of built-in assignor names (the classic engine's resolver maps them to
# classes): kproto's names, and Java's class names so a Java or librdkafka configuration
# string can be reused.
ASSIGNOR_NAMES = ("range", "roundrobin", "sticky", "cooperative-sticky")
JAVA_ASSIGNOR_NAMES: dict[str, str] = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def builtin_assignor_name(name: str) -> str | None:
    """The kproto name (one of ``ASSIGNOR_NAMES``) of an assignor name or Java class name,
    case-insensitive for kproto's names; None if it names no built-in assignor."""
    name = name.strip()
    canonical = JAVA_ASSIGNOR_NAMES.get(name, name.lower())
    return canonical if canonical in ASSIGNOR_NAMES else None


def _default_offset_commit_callback(offsets: Any, response: Any) -> bool:
    return True


DEFAULT_CONFIG: dict[str, Any] = {
    "bootstrap_servers": "localhost",
    "client_id": "kproto-" + __version__,
    "client_rack": "",
    "group_id": None,
    "group_instance_id": None,
    "group_protocol": "classic",
    "group_remote_assignor": None,
    "key_deserializer": None,
    "value_deserializer": None,
    "enable_incremental_fetch_sessions": True,
    "fetch_max_wait_ms": 500,
    "fetch_min_bytes": 1,
    "fetch_max_bytes": 52428800,
    "max_partition_fetch_bytes": 1 * 1024 * 1024,
    "request_timeout_ms": 30000,
    "default_api_timeout_ms": 60000,
    "retry_backoff_ms": 100,
    # Java's retry.backoff.max.ms (KIP-580); kafka-python has no such key. Metadata
    # refreshes and KIP-848/FindCoordinator retries back off from retry_backoff_ms to it.
    "retry_backoff_max_ms": 1000,
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 30000,
    "max_in_flight_requests_per_connection": 5,
    "auto_offset_reset": "latest",
    "enable_auto_commit": True,
    "auto_commit_interval_ms": 5000,
    "default_offset_commit_callback": _default_offset_commit_callback,
    "check_crcs": True,
    "isolation_level": "read_uncommitted",
    "allow_auto_create_topics": True,
    "metadata_max_age_ms": 5 * 60 * 1000,
    # Java's metadata.recovery.strategy / metadata.recovery.rebootstrap.trigger.ms (KIP-899,
    # KIP-1102; kafka-python has neither): when no known broker answers, go back to
    # bootstrap_servers. Java's defaults since 4.0.
    "metadata_recovery_strategy": "rebootstrap",
    "metadata_recovery_rebootstrap_trigger_ms": 300_000,
    "client_dns_lookup": "use_all_dns_ips",
    # kafka-python's default is (RangePartitionAssignor, RoundRobinPartitionAssignor);
    # kproto names them and the classic engine resolves the names.
    "partition_assignment_strategy": ("range", "roundrobin"),
    "max_poll_records": 500,
    "max_poll_interval_ms": 300000,
    "session_timeout_ms": 45000,
    "heartbeat_interval_ms": 3000,
    "receive_buffer_bytes": None,
    "send_buffer_bytes": None,
    "receive_message_max_bytes": 100_000_000,
    "socket_options": [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    "consumer_timeout_ms": float("inf"),
    "security_protocol": "PLAINTEXT",
    "ssl_context": None,
    "ssl_check_hostname": True,
    "ssl_cafile": None,
    "ssl_certfile": None,
    "ssl_keyfile": None,
    "ssl_crlfile": None,
    "ssl_password": None,
    "ssl_ciphers": None,
    "api_version": None,
    "bootstrap_timeout_ms": 30000,
    "connections_max_idle_ms": 9 * 60 * 1000,
    "metric_reporters": [],
    "metrics_enabled": True,
    "metrics_num_samples": 2,
    "metrics_sample_window_ms": 30000,
    "metric_group_prefix": "consumer",
    "selector": selectors.DefaultSelector,
    "exclude_internal_topics": True,
    "sasl_mechanism": None,
    "sasl_plain_username": None,
    "sasl_plain_password": None,
    "sasl_kerberos_name": None,
    "sasl_kerberos_service_name": "kafka",
    "sasl_kerberos_domain_name": None,
    "sasl_oauth_token_provider": None,
    "proxy_url": None,
    "socks5_proxy": None,  # deprecated alias of proxy_url, as in kafka-python
    # kafka-python lets tests swap the network client class; None means kproto's own.
    "kafka_client": None,
}

# Settings only one group protocol understands; setting one explicitly for the other
# protocol is a contradiction (Kafka's ConsumerConfig rejects the same combinations).
_CLASSIC_ONLY = ("partition_assignment_strategy", "session_timeout_ms", "heartbeat_interval_ms")
_CONSUMER_ONLY = ("group_remote_assignor",)


def _fail(key: str, value: Any, expected: str) -> KafkaConfigurationError:
    return KafkaConfigurationError("invalid value {!r} for {}: expected {}".format(value, key, expected))


def _int(lo: int | None = 0, hi: int | None = INT32_MAX, optional: bool = False) -> Callable[[str, Any], Any]:
    def check(key: str, value: Any) -> Any:
        if value is None and optional:
            return None
        # bool is an int subclass; True as a byte count is a mistake, not a number.
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(key, value, "an integer" + (" or None" if optional else ""))
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise _fail(key, value, "an integer in [{}, {}]".format(lo, hi))
        return value
    return check


def _bool(key: str, value: Any) -> Any:
    if not isinstance(value, bool):
        raise _fail(key, value, "True or False")
    return value


def _str(optional: bool = False, nonempty: bool = False) -> Callable[[str, Any], Any]:
    def check(key: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise _fail(key, value, "a string" + (" or None" if optional else ""))
        if nonempty and not value.strip():
            raise _fail(key, value, "a non-empty string")
        return value
    return check


def _enum(choices: tuple[str, ...], optional: bool = False, fold: Callable[[str], str] = str) -> Callable[[str, Any], Any]:
    def check(key: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, str) or fold(value) not in choices:
            raise _fail(key, value, "one of " + ", ".join(repr(c) for c in choices))
        return fold(value)
    return check


_isolation_level_name = _enum(ISOLATION_LEVELS)


def parse_isolation_level(value: Any, key: str = "isolation_level") -> IsolationLevel:
    """``"read_uncommitted"``/``"read_committed"`` (or an IsolationLevel) as the enum; the
    configuration parses it once and every engine reads the enum. What kafka-python 3
    takes is taken too: its own ``IsolationLevel`` (an int enum) or the number, and the
    names in any case, with ``-`` for ``_``."""
    if isinstance(value, IsolationLevel):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return IsolationLevel(int(value))
    if isinstance(value, str):
        value = value.strip().lower().replace("-", "_")
    return IsolationLevel[_isolation_level_name(key, value).upper()]


def _callable(optional: bool = True) -> Callable[[str, Any], Any]:
    def check(key: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if not callable(value):
            raise _fail(key, value, "a callable" + (" or None" if optional else ""))
        return value
    return check


def _deserializer(key: str, value: Any) -> Any:
    # A plain callable(bytes) as kafka-python takes, or an object with Java's
    # deserialize(topic, data) method.
    if value is None or callable(value) or callable(getattr(value, "deserialize", None)):
        return value
    raise _fail(key, value, "None, a callable taking bytes, or an object with deserialize(topic, data)")


def _any(key: str, value: Any) -> Any:
    return value


def _bootstrap_servers(key: str, value: Any) -> Any:
    servers = [value] if isinstance(value, str) else value
    if not isinstance(servers, (list, tuple)) or not servers:
        raise _fail(key, value, "a 'host[:port]' string or a non-empty list of them")
    for server in servers:
        if not isinstance(server, str) or not server.strip():
            raise _fail(key, value, "a 'host[:port]' string or a non-empty list of them")
    # The network layer's own parser, so both agree on the syntax; then sane ports.
    try:
        addresses = parse_bootstrap_servers(servers)
    except KafkaConfigurationError:
        raise _fail(key, value, "'host[:port]' strings with a numeric port") from None
    for host, port in addresses:
        if not host or not 0 < port < 65536:
            raise _fail(key, value, "'host[:port]' strings with a host and a port from 1 to 65535")
    return value


def _timeout_ms(key: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
        raise _fail(key, value, "a non-negative number of milliseconds (float('inf') for none)")
    return value


def _assignors(key: str, value: Any) -> Any:
    # The shapes the classic engine's resolver takes: names (also Java's class names, or a
    # comma-separated string), assignor classes or instances, alone or in a list. Checked
    # here so a bad value fails at construction even without group_id (the resolver, which
    # builds the instances, runs only when a group coordinator is made).
    if isinstance(value, str):
        items: list[Any] = [part for part in value.split(",") if part.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    if not items:
        raise _fail(key, value, "a non-empty list of assignor names or assignor classes/instances")
    seen: set[str] = set()
    for item in items:
        if isinstance(item, str):
            name = builtin_assignor_name(item)
            if name is None:
                raise _fail(key, item, "an assignor name among " + ", ".join(ASSIGNOR_NAMES))
        elif item is None or isinstance(item, (bool, int, float, bytes)):
            raise _fail(key, item, "an assignor name, class or instance")
        else:
            name = getattr(item, "name", None)
            if not isinstance(name, str) or not name or not callable(getattr(item, "assign", None)):
                raise _fail(key, item, "an assignor (with a name and assign())")
        if name in seen:
            raise _fail(key, value, "assignors with distinct names ({!r} twice)".format(name))
        seen.add(name)
    return value if isinstance(value, str) else tuple(items)


def _api_version(key: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = tuple(int(part) for part in value.split("."))
        except ValueError:
            raise _fail(key, value, "None, a tuple of ints like (3, 7) or a string like '3.7'") from None
    if (not isinstance(value, tuple) or not value
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
        raise _fail(key, value, "None, a tuple of ints like (3, 7) or a string like '3.7'")
    return value


def _ssl_context(key: str, value: Any) -> Any:
    if value is not None and not isinstance(value, ssl.SSLContext):
        raise _fail(key, value, "None or an ssl.SSLContext")
    return value


def _socket_options(key: str, value: Any) -> Any:
    if not isinstance(value, (list, tuple)) or not all(isinstance(o, tuple) and len(o) == 3 for o in value):
        raise _fail(key, value, "a list of (level, option, value) tuples")
    return list(value)


def _reporters(key: str, value: Any) -> Any:
    if not isinstance(value, (list, tuple)) or not all(callable(r) for r in value):
        raise _fail(key, value, "a list of metric reporter classes")
    return list(value)


def _token_provider(key: str, value: Any) -> Any:
    if value is not None and not callable(getattr(value, "token", None)):
        raise _fail(key, value, "None or an object with a token() method")
    return value


_VALIDATORS: dict[str, Callable[[str, Any], Any]] = {
    "bootstrap_servers": _bootstrap_servers,
    "client_id": _str(),
    "client_rack": _str(),
    "group_id": _str(optional=True, nonempty=True),
    "group_instance_id": _str(optional=True, nonempty=True),
    "group_protocol": _enum(GROUP_PROTOCOLS, fold=str.lower),
    "group_remote_assignor": _str(optional=True, nonempty=True),
    "key_deserializer": _deserializer,
    "value_deserializer": _deserializer,
    "enable_incremental_fetch_sessions": _bool,
    "fetch_max_wait_ms": _int(),
    "fetch_min_bytes": _int(),
    "fetch_max_bytes": _int(),
    "max_partition_fetch_bytes": _int(),
    "request_timeout_ms": _int(),
    "default_api_timeout_ms": _int(),
    "retry_backoff_ms": _int(),
    "retry_backoff_max_ms": _int(),
    "reconnect_backoff_ms": _int(),
    "reconnect_backoff_max_ms": _int(),
    "max_in_flight_requests_per_connection": _int(lo=1),
    "auto_offset_reset": _enum(OFFSET_RESET_STRATEGIES),
    "enable_auto_commit": _bool,
    "auto_commit_interval_ms": _int(),
    "default_offset_commit_callback": _callable(optional=False),
    "check_crcs": _bool,
    "isolation_level": lambda key, value: parse_isolation_level(value, key).name.lower(),
    "allow_auto_create_topics": _bool,
    "metadata_max_age_ms": _int(),
    "metadata_recovery_strategy": _enum(METADATA_RECOVERY_STRATEGIES, fold=str.lower),
    "metadata_recovery_rebootstrap_trigger_ms": _int(hi=None),
    "client_dns_lookup": _enum(DNS_LOOKUPS),
    "partition_assignment_strategy": _assignors,
    "max_poll_records": _int(lo=1),
    "max_poll_interval_ms": _int(lo=1),
    "session_timeout_ms": _int(lo=1),
    "heartbeat_interval_ms": _int(lo=1),
    "receive_buffer_bytes": _int(lo=1, optional=True),
    "send_buffer_bytes": _int(lo=1, optional=True),
    "receive_message_max_bytes": _int(lo=1),
    "socket_options": _socket_options,
    "consumer_timeout_ms": _timeout_ms,
    "security_protocol": _enum(SECURITY_PROTOCOLS),
    "ssl_context": _ssl_context,
    "ssl_check_hostname": _bool,
    "ssl_cafile": _str(optional=True),
    "ssl_certfile": _str(optional=True),
    "ssl_keyfile": _str(optional=True),
    "ssl_crlfile": _str(optional=True),
    "ssl_password": _any,  # str, bytes or a callable, as ssl.SSLContext.load_cert_chain takes
    "ssl_ciphers": _str(optional=True),
    "api_version": _api_version,
    "bootstrap_timeout_ms": _int(),
    "connections_max_idle_ms": _int(lo=1, hi=None),
    "metric_reporters": _reporters,
    "metrics_enabled": _bool,
    "metrics_num_samples": _int(lo=1),
    "metrics_sample_window_ms": _int(lo=1),
    "metric_group_prefix": _str(),
    "selector": _callable(optional=False),
    "exclude_internal_topics": _bool,
    "sasl_mechanism": _enum(SASL_MECHANISMS, optional=True),
    "sasl_plain_username": _str(optional=True),
    "sasl_plain_password": _str(optional=True),
    "sasl_kerberos_name": _any,
    "sasl_kerberos_service_name": _str(),
    "sasl_kerberos_domain_name": _str(optional=True),
    "sasl_oauth_token_provider": _token_provider,
    "proxy_url": _str(optional=True),
    "socks5_proxy": _str(optional=True),
    "kafka_client": _callable(),
}
assert set(_VALIDATORS) == set(DEFAULT_CONFIG)


def _check_combinations(config: dict[str, Any], user: frozenset[str]) -> None:
    """Settings that are each valid but contradict each other."""
    if not config["fetch_max_wait_ms"] < config["request_timeout_ms"] < config["connections_max_idle_ms"]:
        raise KafkaConfigurationError(
            "connections_max_idle_ms ({}) must be larger than request_timeout_ms ({}) which must be "
            "larger than fetch_max_wait_ms ({})".format(
                config["connections_max_idle_ms"], config["request_timeout_ms"], config["fetch_max_wait_ms"]))
    protocol = config["group_protocol"]
    if protocol == "classic":
        if config["heartbeat_interval_ms"] >= config["session_timeout_ms"]:
            raise KafkaConfigurationError(
                "heartbeat_interval_ms ({}) must be lower than session_timeout_ms ({})".format(
                    config["heartbeat_interval_ms"], config["session_timeout_ms"]))
        unsupported = [key for key in _CONSUMER_ONLY if key in user and config[key] is not None]
    else:
        unsupported = [key for key in _CLASSIC_ONLY if key in user]
    if unsupported:
        raise KafkaConfigurationError(
            "{} not supported with group_protocol={!r}".format(", ".join(sorted(unsupported)), protocol))
    if config["retry_backoff_ms"] > config["retry_backoff_max_ms"]:
        # Java warns and backs off a constant retry_backoff_max_ms; two explicit settings
        # that contradict each other are refused here, as for the reconnect pair.
        raise KafkaConfigurationError(
            "retry_backoff_ms ({}) must not exceed retry_backoff_max_ms ({})".format(
                config["retry_backoff_ms"], config["retry_backoff_max_ms"]))
    if config["reconnect_backoff_ms"] > config["reconnect_backoff_max_ms"]:
        raise KafkaConfigurationError(
            "reconnect_backoff_ms ({}) must not exceed reconnect_backoff_max_ms ({})".format(
                config["reconnect_backoff_ms"], config["reconnect_backoff_max_ms"]))
    if config["group_instance_id"] is not None and config["group_id"] is None:
        raise KafkaConfigurationError("group_instance_id requires group_id (static membership is group membership)")
    if config["security_protocol"].startswith("SASL_") and config["sasl_mechanism"] is None:
        raise KafkaConfigurationError(
            "security_protocol={} needs sasl_mechanism".format(config["security_protocol"]))


class ConsumerConfig(Mapping[Any, Any]):
    """A validated, read-only consumer configuration.

    Read it as a mapping (``config["fetch_min_bytes"]``) or by attribute
    (``config.fetch_min_bytes``). ``user_supplied`` is the set of keys the caller passed,
    so engines can tell an explicit value from a default.
    """

    __slots__ = ("_values", "user_supplied")

    def __init__(self, configs: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        given = dict(configs or {})
        given.update(kwargs)
        unknown = sorted(set(given) - set(DEFAULT_CONFIG))
        if unknown:
            raise KafkaConfigurationError("Unrecognized configs: {}".format(", ".join(unknown)))
        values = dict(DEFAULT_CONFIG)
        if isinstance(given.get("auto_offset_reset"), str) and given["auto_offset_reset"] in _DEPRECATED_OFFSET_RESET:
            new = _DEPRECATED_OFFSET_RESET[given["auto_offset_reset"]]
            log.warning("use auto_offset_reset=%s (%s is deprecated)", new, given["auto_offset_reset"])
            given["auto_offset_reset"] = new
        for key, value in given.items():
            values[key] = _VALIDATORS[key](key, value)
        if "retry_backoff_max_ms" not in given and values["retry_backoff_ms"] > values["retry_backoff_max_ms"]:
            # A kafka-python configuration (it has no retry_backoff_max_ms) asking for a
            # longer retry_backoff_ms than Java's default cap keeps its constant backoff.
            values["retry_backoff_max_ms"] = values["retry_backoff_ms"]
        if values["socks5_proxy"] is not None and values["proxy_url"] is None:
            log.warning("socks5_proxy is deprecated; use proxy_url")
            values["proxy_url"] = values["socks5_proxy"]
        user = frozenset(given)
        _check_combinations(values, user)
        if values["group_id"] is None and values["enable_auto_commit"]:
            # Nothing to commit to without a group; kafka-python silently turns it off.
            if "enable_auto_commit" in user:
                log.warning("enable_auto_commit=True has no effect without group_id; disabling it")
            values["enable_auto_commit"] = False
        # The broker may exceed fetch_max_bytes by one partition's first batch and the
        # response framing; keep the frame-size guard above that (as kafka-python does).
        floor = values["fetch_max_bytes"] + values["max_partition_fetch_bytes"]
        if values["receive_message_max_bytes"] < floor:
            values["receive_message_max_bytes"] = floor
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "user_supplied", user)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("ConsumerConfig is read-only; build a new one with replace()")

    def replace(self, **changes: Any) -> "ConsumerConfig":
        """A new config with ``changes`` applied (validated again), keeping the user's keys."""
        given = {key: self._values[key] for key in self.user_supplied}
        given.update(changes)
        return ConsumerConfig(given)

    def __repr__(self) -> str:
        shown = {k: v for k, v in self._values.items() if "password" not in k}
        return "ConsumerConfig({!r})".format(shown)
