"""One exception family for kproto.

Owns every exception kproto raises: client-side errors (corrupt bytes, timeouts, bad
configuration, illegal state) and one class per Kafka protocol error code, with the
code, its name, whether it is retriable, and a one-line meaning, plus the ``ErrorCode``
IntEnum to branch on. The per-code classes are generated into ``kproto._error_codes``
from one table (codegen/error_codes.py) and re-exported here; the rest is written here.
Class names follow kafka-python's ``kafka.errors`` so code written against it keeps
catching the same names. Everything that maps a response's error code to an exception goes
through ``for_code``.
"""

from __future__ import annotations


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
    """A record batch failed its CRC or could not be decoded."""

    def __init__(self, message: str = "", *, topic: str | None = None, partition: int | None = None,
                 offset: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.record_offset = offset
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


class ConsumerStoppedError(KafkaError):
    """The asyncio consumer (``kproto.aio``) was stopped, or not started (aiokafka's name)."""


class IllegalOperation(KafkaError):
    """The call needs something the consumer was not configured with, e.g. a commit without
    a ``group_id`` (aiokafka's name)."""


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto_offset_reset='none'``."""


class LogTruncationError(KafkaError):
    """The log was truncated below the consumer's position (detected by OffsetForLeaderEpoch)."""

    def __init__(self, message: str = "", divergent_offsets: dict | None = None) -> None:
        super().__init__(message)
        self.divergent_offsets = dict(divergent_offsets or {})


class RecordTooLargeError(KafkaError):
    """A record batch is larger than the fetch size; raise ``max_partition_fetch_bytes``."""


class RecordDeserializationError(KafkaError):
    """A key or value deserializer failed; seek past ``offset`` to continue."""

    def __init__(self, message: str, topic_partition: object = None, offset: int = -1) -> None:
        super().__init__(message)
        self.topic_partition = topic_partition
        self.offset = offset


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


# One class per Kafka error code and the ``ErrorCode`` enum, generated from one table
# (codegen/error_codes.py) and declared statically so type checkers see them. Imported here,
# after the classes they derive from, and re-exported: ``kproto.errors`` is their home.
from kproto._error_codes import *  # noqa: E402,F401,F403
from kproto._error_codes import BY_CODE as _GENERATED, ErrorCode, UnknownError  # noqa: E402

# Codes this Kafka version does not know get an UnknownError subclass on first use, kept here.
_BY_CODE: dict[int, type[BrokerResponseError]] = dict(_GENERATED)


def for_code(code: int) -> type[BrokerResponseError]:
    """The exception class for a Kafka error code (an ``UnknownError`` subclass if unknown).

    The one place a response's error code becomes an exception class; ``NoError`` for 0.
    """
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = type("UnknownError{}".format(code), (UnknownError,), {"errno": code})
        _BY_CODE[code] = cls
    return cls


def error_for(code: int, detail: str | None = None) -> BrokerResponseError | None:
    """An exception instance for a non-zero error code (None for 0), with the broker's text."""
    if code == ErrorCode.NONE:
        return None
    return exception_for(code, detail)


def exception_for(code: int, detail: str | None = None) -> BrokerResponseError:
    """The exception instance for an error code the caller knows is non-zero (Java's
    ``Errors.exception(message)``), with the broker's text."""
    cls = for_code(code)
    return cls(detail) if detail else cls()
