"""Failing in seconds when no bootstrap server can be talked to.

Owns :func:`await_reachable`, the first metadata wait of a tool that should stop with the
cause rather than wait out ``default_api_timeout_ms``: the Spark source's planner
(:mod:`kproto.spark.resolver`) and ``python -m kproto consume``. Java's consumer keeps
retrying an unreachable cluster until its API timeout (``TimeoutException: Timeout expired
while fetching topic metadata``); so does :class:`KafkaConsumer`, whose ``poll()`` retries
for ever. A tool that starts against a wrong address, port or security protocol learns
that within ``fail_fast_ms``: once every bootstrap address has failed (refused, name not
resolved, closed during the handshake) it raises ``NoBrokersAvailable`` naming each address
and its last error. Brokers that were reached but answer slowly get the rest of the
timeout. A failed TLS verification or SASL login is fatal to the consumer already and is
raised by the first wait as it is.
"""

from __future__ import annotations

from typing import Any, Optional

from kproto.errors import MetadataTimeoutError, NoBrokersAvailable, describe_connection_failures
from kproto.net.config import parse_bootstrap_servers

#: How long a first metadata wait may go unanswered before every bootstrap address having
#: failed ends it (a refused connection fails in milliseconds and is retried with backoff;
#: a few retries of each address fit in this).
FAIL_FAST_MS = 3000


def await_reachable(consumer: Any, bootstrap_servers: Any, who: str, fail_fast_ms: int = FAIL_FAST_MS,
                    timeout_ms: Optional[int] = None) -> None:
    """Wait for cluster metadata (``consumer.bootstrap(refresh=True)``); raise
    ``NoBrokersAvailable`` after ``fail_fast_ms`` when every address of
    ``bootstrap_servers`` has failed, else wait up to ``timeout_ms`` (None:
    ``default_api_timeout_ms``) and raise its ``MetadataTimeoutError``. ``who`` starts the
    error message (e.g. ``kproto Spark source``)."""
    addresses = {"{}:{}".format(host, port) for host, port in parse_bootstrap_servers(bootstrap_servers)}
    try:
        consumer.bootstrap(timeout_ms=fail_fast_ms, refresh=True)
        return
    except MetadataTimeoutError as exc:
        if addresses <= {address for address, _, _ in exc.failures}:
            raise NoBrokersAvailable("{}: no broker of bootstrap servers {} could be reached within {} ms; {}".format(
                who, ",".join(sorted(addresses)), fail_fast_ms, describe_connection_failures(exc.failures))) from None
    consumer.bootstrap(timeout_ms=timeout_ms, refresh=True)
