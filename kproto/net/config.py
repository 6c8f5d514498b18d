"""NetworkClient settings: names and defaults (kafka-python's and Java's), bootstrap parsing.

Owns the settings the network layer reads (``NetworkClientConfig``, built once per client
and passed to its helpers). Unknown keys are ignored by ``from_config``, so the consumer
can hand over its whole configuration.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Union

from kproto import __version__, errors
from kproto.net.connection import DEFAULT_RECEIVE_MESSAGE_MAX_BYTES


@dataclasses.dataclass(frozen=True)
class NetworkClientConfig:
    """The settings the network layer reads (kafka-python's names and defaults, Java's
    where kafka-python has none), taken once from the consumer's configuration and handed
    to every helper of the client: Java's ``CommonClientConfigs`` part of a client's config.
    """

    bootstrap_servers: Union[str, Sequence[str]] = "localhost:9092"
    client_id: str = "kproto"
    client_software_name: str = "kproto"
    client_software_version: str = __version__
    request_timeout_ms: int = 30_000
    connections_max_idle_ms: int = 540_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1_000
    socket_connection_setup_timeout_ms: int = 10_000
    max_in_flight_requests_per_connection: int = 5
    receive_message_max_bytes: int = DEFAULT_RECEIVE_MESSAGE_MAX_BYTES
    receive_buffer_bytes: Optional[int] = None
    send_buffer_bytes: Optional[int] = None
    metadata_max_age_ms: int = 300_000
    retry_backoff_ms: int = 100
    # Java's retry.backoff.max.ms (KIP-580): metadata refreshes back off exponentially
    # from retry_backoff_ms up to this (kafka-python has no such setting).
    retry_backoff_max_ms: int = 1_000
    allow_auto_create_topics: bool = False
    # Java's metadata.recovery.strategy and metadata.recovery.rebootstrap.trigger.ms
    # (KIP-899, KIP-1102; Java's defaults since 4.0): see kproto.net.metadata_updater.
    metadata_recovery_strategy: str = "rebootstrap"
    metadata_recovery_rebootstrap_trigger_ms: int = 300_000
    security_protocol: str = "PLAINTEXT"
    ssl_context: Optional[ssl.SSLContext] = None
    ssl_cafile: Optional[str] = None
    ssl_certfile: Optional[str] = None
    ssl_keyfile: Optional[str] = None
    # str, bytes or a callable, as ssl.SSLContext.load_cert_chain takes.
    ssl_password: Any = None
    ssl_crlfile: Optional[str] = None
    ssl_ciphers: Optional[str] = None
    ssl_check_hostname: bool = True
    # SASL (security_protocol SASL_PLAINTEXT/SASL_SSL; kproto.net.sasl), kafka-python's names.
    sasl_mechanism: Optional[str] = None
    sasl_plain_username: Optional[str] = None
    sasl_plain_password: Optional[str] = None
    # An object with token() (kproto.net.sasl.OAuthBearerMechanism).
    sasl_oauth_token_provider: Any = None
    # (sasl_kerberos_* stay consumer settings only: GSSAPI is refused, see kproto.net.sasl.)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "NetworkClientConfig":
        """From a ConsumerConfig or keyword arguments: the keys named like a field; the
        others are ignored, so the consumer can hand over its whole configuration."""
        return cls(**{name: config[name] for name in _FIELD_NAMES if name in config})


_FIELD_NAMES = tuple(field.name for field in dataclasses.fields(NetworkClientConfig))


def parse_address(text: str, *, default_host: Optional[str] = None,
                  default_port: Optional[int] = None) -> tuple[str, int]:
    """``host:port`` or ``[ipv6]:port`` -> (host, port); the one address parser (the
    consumer's bootstrap servers, the tools' --bootstrap-server, --upstream, --listen).

    With ``default_port`` a host alone is enough (an unbracketed IPv6 literal is a host);
    with ``default_host`` a port alone (``9092`` or ``:9092``). Anything else raises
    ``KafkaConfigurationError`` naming the text.
    """
    item = text.strip()
    if item.startswith("["):  # [ipv6]:port
        host, _, rest = item[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else rest
    elif item.count(":") == 1:
        host, port = item.split(":")
    elif item.count(":") > 1 or not item.isdigit():
        host, port = item, ""
    else:
        host, port = "", item
    host = host or default_host or ""
    if not port and default_port is not None:
        port = str(default_port)
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:  # 0: a port the OS picks (--listen)
        raise errors.KafkaConfigurationError("not a HOST:PORT address: {!r}".format(text))
    return host, int(port)


def parse_bootstrap_servers(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """``"a:9092,b"`` or ``["a:9092", "[::1]:9093"]`` -> [(host, port), ...] (default 9092)."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        if not item.strip():
            continue
        try:
            out.append(parse_address(item, default_port=9092))
        except errors.KafkaConfigurationError:
            raise errors.KafkaConfigurationError("bad bootstrap server {!r}".format(item.strip())) from None
    if not out:
        raise errors.KafkaConfigurationError("bootstrap_servers is empty")
    return out
