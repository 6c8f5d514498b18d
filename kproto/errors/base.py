"""The hand-written exception families of ``kproto.errors``.

Owns the roots (``KafkaError``, ``RetriableError``, ``InvalidMetadataError``), the
client-side errors (corrupt bytes, timeouts, bad configuration, illegal state,
authentication) and ``BrokerResponseError``, the base of the per-code classes that
``kproto.errors.codes`` generates. Imports nothing from kproto, so the generated module can
import this one and nothing else. Class names follow kafka-python's ``kafka.errors``. Import
the names from ``kproto.errors``, their public home.
"""

from __future__ import annotations

import enum
from typing import Any, Optional


class KafkaError(Exception):
    """Root of every kproto exception."""

    retriable: bool = False
    # Whether the metadata should be refreshed before retrying (as in kafka-python).
    invalid_metadata: bool = False

    def __str__(self) -> str:
        if not self.args:
            return self.__class__.__name__
        return "{}: {}".format(self.__class__.__name__, super().__str__())


class RetriableError(KafkaError):
    """An error after which the same operation may succeed if retried (after a backoff)."""

    retriable = True


class InvalidMetadataError(RetriableError):
    """A retriable error that means the client's cluster metadata is stale: refresh, then retry."""

    invalid_metadata = True


# --- client-side errors --------------------------------------------------------------


class IllegalStateError(KafkaError):
    """The client was used in a way its current state does not allow."""


class IllegalArgumentError(KafkaError, ValueError):
    """An argument (or configuration value) is invalid."""


class KafkaConfigurationError(IllegalArgumentError):
    """Unknown or invalid consumer configuration; raised at construction."""


class CorruptMessageError(KafkaError):
    """Protocol bytes could not be decoded (truncated, garbage, invalid varint, absurd length).

    ``api``/``version``/``offset`` say where decoding failed when known.
    """

    def __init__(self, message: str = "", *, api: str | None = None, version: int | None = None,
                 offset: int | None = None) -> None:
        self.api = api
        self.version = version
        self.offset = offset
        where = []
        if api is not None:
            where.append(api if version is None else "{} v{}".format(api, version))
        if offset is not None:
            where.append("at byte {}".format(offset))
        if where:
            message = "{} ({})".format(message, ", ".join(where)) if message else ", ".join(where)
        super().__init__(message)


class CorruptRecordError(CorruptMessageError):
    """A record batch failed its CRC or could not be decoded.

    ``topic``, ``partition`` and ``offset`` say where, when known. ``offsets`` is, for a
    share consumer, the acquired offsets of the corrupt batch (Java's
    ``ShareInFlightBatchException.offsets()``): they are REJECTed with the next
    acknowledgements unless, in explicit mode, the application acknowledges some by offset
    first (``acknowledge(topic, partition, offset, type)``); empty elsewhere.
    """

    offsets: frozenset[int] = frozenset()  # also for the broker error code's subclass

    def __init__(self, message: str = "", *, topic: str | None = None, partition: int | None = None,
                 offset: int | None = None, offsets: frozenset[int] = frozenset()) -> None:
        self.topic = topic
        self.partition = partition
        self.record_offset = offset
        self.offsets = offsets
        where = []
        if topic is not None:
            where.append("{}-{}".format(topic, partition))
        if offset is not None:
            where.append("offset {}".format(offset))
        if where:
            message = "{} ({})".format(message, ", ".join(where))
        KafkaError.__init__(self, message)
        self.api = None
        self.version = None
        self.offset = offset


class InvalidCaptureError(KafkaError, ValueError):
    """A packet capture that cannot be read: not pcap or pcapng, a corrupt header or block,
    a record longer than any capture holds. ``offset`` is the file position when known."""

    def __init__(self, message: str = "", *, offset: int | None = None) -> None:
        self.offset = offset
        if offset is not None:
            message = "{} (at byte {} of the file)".format(message, offset)
        super().__init__(message)


class UnsupportedCodecError(KafkaError):
    """A batch uses a compression codec that is unknown, or whose optional package is missing."""


class KafkaTimeoutError(RetriableError):
    """An operation did not complete within its timeout."""


class MetadataTimeoutError(KafkaTimeoutError):
    """No cluster metadata arrived within the timeout (the ``TimeoutException`` of Java's
    metadata waits). ``failures`` names the brokers that were tried and why each failed,
    as ``(host:port, consecutive failures, last error)``; the message says the same, so a
    wait that ran out is never just "no metadata"."""

    def __init__(self, message: str, failures: "list[tuple[str, int, BaseException]] | None" = None) -> None:
        self.failures = list(failures or ())
        if self.failures:
            message = "{}; {}".format(message, describe_connection_failures(self.failures))
        elif failures is not None:
            message += "; no connection failed: the brokers were reached but did not answer in time"
        super().__init__(message)


def describe_connection_failures(failures: "list[tuple[str, int, BaseException]]") -> str:
    """``tried host:port (n times): reason; ...`` for :meth:`NetworkClient.connection_failures`."""
    parts = []
    for address, count, error in failures:
        reason = error.args[0] if isinstance(error, KafkaError) and error.args else str(error)
        parts.append("{} ({} {}): {}".format(address, count, "try" if count == 1 else "tries", reason))
    return "tried " + "; ".join(parts)


class RequestTimeoutError(KafkaTimeoutError):
    """A request got no response within its request timeout; its connection is closed."""


class NoBrokersAvailable(InvalidMetadataError):
    """None of the bootstrap servers could be reached."""


class KafkaConnectionError(InvalidMetadataError):
    """A connection failed or was closed; requests in flight on it fail with this."""


class NodeNotReadyError(RetriableError):
    """The connection to the node is not established (or not yet negotiated)."""


class TooManyInFlightRequests(RetriableError):
    """The connection already has ``max_in_flight_requests_per_connection`` requests out."""


class StaleMetadata(InvalidMetadataError):
    """The cluster metadata does not (yet) know what was asked for."""


class UnknownBrokerIdError(KafkaError):
    """A node id that the cluster metadata does not know."""


class Cancelled(RetriableError):
    """The request was abandoned before its response arrived (client closed)."""


class ProtocolError(KafkaError):
    """The peer broke the protocol (e.g. a response with an unexpected correlation id)."""


class CorrelationIdError(ProtocolError):
    """A response's correlation id is not the one of the oldest request in flight."""


class InvalidReceiveError(ProtocolError):
    """A frame's size prefix is negative or over ``receive_message_max_bytes``."""


class UnrecognizedBrokerVersion(KafkaError):
    """The broker supports no version of an API the client needs."""


# kafka-python's name for ProtocolError.
KafkaProtocolError = ProtocolError


class ConcurrentModificationError(KafkaError):
    """A KafkaConsumer was called from a second thread (only ``wakeup()`` is allowed)."""


class WakeupException(KafkaError):
    """A blocking call was interrupted by ``KafkaConsumer.wakeup()``."""


class AuthenticationError(KafkaError):
    """Authentication with a broker failed (Java's ``AuthenticationException``).

    Never retriable: the consumer raises it from ``poll()`` and blocking calls instead of
    reconnecting with backoff forever. Broker codes 33, 34 and 58 derive from it.
    """


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication failed: bad credentials, a server signature that does not
    verify, a malformed server message, or the broker closing the connection during the
    exchange (Java's ``SaslAuthenticationException``)."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake with a broker failed: its certificate did not verify (unknown CA,
    expired, host name mismatch), or it refused ours with an alert, which TLS 1.3 delivers
    at the first read after the handshake (Java's ``SslAuthenticationException``). A TCP
    refusal, or a connection closed before any TLS record, stays a retriable
    ``KafkaConnectionError``."""


class CommitFailedError(KafkaError):
    """A commit cannot be completed because the group rebalanced or the member was fenced."""


class ToolError(KafkaError):
    """A tool (``python -m kproto consume | trace | fuzz``) cannot go on: a run-time problem
    reported as one line on stderr (exit status 1)."""


class ToolUsageError(ToolError, ValueError):
    """A tool's command line is wrong (an unknown API, an empty version range, a missing
    option, an address that is not HOST:PORT): a one-line reason."""


class FuzzTargetError(ToolError):
    """The fuzzer's broker cannot be reached or answers nothing usable (a one-line reason)."""


class EmbeddedBrokerError(ToolError):
    """The embedded demo broker (``kproto.tools.embedded``) could not be found, started or
    seeded."""


class CoverageError(ToolError):
    """The fuzzer's coverage source (a JaCoCo agent in TCP-server mode) answered something
    that is not JaCoCo execution data, or the connection broke."""


class ConsumerStoppedError(KafkaError):
    """The asyncio consumer (``kproto.aio``) was stopped, or not started (aiokafka's name)."""


class IllegalOperation(KafkaError):
    """The call needs something the consumer was not configured with, e.g. a commit without
    a ``group_id`` (aiokafka's name)."""


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto_offset_reset='none'``."""


class LogTruncationError(KafkaError):
    """The log was truncated below the consumer's position (detected by OffsetForLeaderEpoch)."""

    def __init__(self, message: str = "", divergent_offsets: dict[Any, Any] | None = None) -> None:
        super().__init__(message)
        self.divergent_offsets = dict(divergent_offsets or {})


class RecordTooLargeError(KafkaError):
    """A record batch is larger than the fetch size; raise ``max_partition_fetch_bytes``."""


class DeserializationExceptionOrigin(enum.Enum):
    """Which deserializer failed (Java's ``RecordDeserializationException.DeserializationExceptionOrigin``)."""

    KEY = "KEY"
    VALUE = "VALUE"


class RecordDeserializationError(KafkaError):
    """A key or value deserializer failed (Java's ``RecordDeserializationException``).

    Carries what Java's does: ``topic_partition``, ``offset``, ``origin`` (KEY or VALUE,
    None when unknown), the record's ``timestamp`` and ``timestamp_type``, its raw
    ``key_buffer`` and ``value_buffer`` (bytes or None) and ``headers``; the deserializer's
    exception is the ``__cause__``. A plain consumer seeks past ``offset`` to continue; a
    share consumer in explicit mode may acknowledge the record by offset.
    """

    Origin = DeserializationExceptionOrigin

    def __init__(self, message: str, topic_partition: object = None, offset: int = -1, *,
                 origin: Optional[DeserializationExceptionOrigin] = None, timestamp: int = -1,
                 timestamp_type: int = -1, key_buffer: Optional[bytes] = None,
                 value_buffer: Optional[bytes] = None, headers: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.topic_partition = topic_partition
        self.offset = offset
        self.origin = origin
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key_buffer = key_buffer
        self.value_buffer = value_buffer
        self.headers = headers


# --- broker error codes --------------------------------------------------------------


class BrokerResponseError(KafkaError):
    """A Kafka error code returned by a broker. Subclasses set ``errno``/``message``.

    ``message`` is the code's name in Kafka's ``Errors`` enum (kafka-python keeps the
    name in the same attribute); ``description`` a one-line meaning.
    """

    errno: int = -1
    message: str = "UNKNOWN"
    description: str = ""

    def __str__(self) -> str:
        extra = super().__str__().split(": ", 1)
        detail = extra[1] if len(extra) > 1 else ""
        text = "[Error {}] {}".format(self.errno, self.__class__.__name__)
        return text + (": " + detail if detail else "")


# Public as members of kproto.errors, which re-exports them (repr, tracebacks, pickling).
for _cls in [obj for obj in list(globals().values()) if isinstance(obj, type) and issubclass(obj, KafkaError)]:
    _cls.__module__ = "kproto.errors"
del _cls

__all__ = [
    "KafkaError", "RetriableError", "InvalidMetadataError", "IllegalStateError",
    "IllegalArgumentError", "KafkaConfigurationError", "CorruptMessageError", "CorruptRecordError",
    "InvalidCaptureError", "ConsumerStoppedError", "IllegalOperation", "ToolError", "ToolUsageError",
    "FuzzTargetError", "EmbeddedBrokerError", "CoverageError",
    "UnsupportedCodecError", "KafkaTimeoutError", "MetadataTimeoutError", "describe_connection_failures", "RequestTimeoutError", "NoBrokersAvailable",
    "KafkaConnectionError", "NodeNotReadyError", "TooManyInFlightRequests", "StaleMetadata",
    "UnknownBrokerIdError", "Cancelled", "ProtocolError", "CorrelationIdError",
    "InvalidReceiveError", "UnrecognizedBrokerVersion", "KafkaProtocolError",
    "ConcurrentModificationError", "WakeupException", "AuthenticationError",
    "SaslAuthenticationError", "SslAuthenticationError", "CommitFailedError",
    "NoOffsetForPartitionError", "LogTruncationError", "RecordTooLargeError",
    "RecordDeserializationError", "DeserializationExceptionOrigin", "BrokerResponseError",
]
