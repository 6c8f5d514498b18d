"""One exception family for kproto.

Owns every exception kproto raises: client-side errors (corrupt bytes, timeouts, bad
configuration, illegal state) and one class per Kafka protocol error code, with the
code, its name, whether it is retriable, and a one-line meaning. Class names follow
kafka-python's ``kafka.errors`` so code written against it keeps catching the same
names. Everything that maps a response's error code to an exception goes through
``for_code``.
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


class UnsupportedCodecError(KafkaError):
    """A batch uses a compression codec that is unknown, or whose optional package is missing."""


class KafkaTimeoutError(KafkaError):
    """An operation did not complete within its timeout."""

    retriable = True


class NoBrokersAvailable(KafkaError):
    """None of the bootstrap servers could be reached."""

    retriable = True
    invalid_metadata = True


class KafkaConnectionError(KafkaError):
    """A connection failed or was closed; requests in flight on it fail with this."""

    retriable = True
    invalid_metadata = True


class ProtocolError(KafkaError):
    """The peer broke the protocol (e.g. a response with an unexpected correlation id)."""


class ConcurrentModificationError(KafkaError):
    """A KafkaConsumer was called from a second thread (only ``wakeup()`` is allowed)."""


class WakeupException(KafkaError):
    """A blocking call was interrupted by ``KafkaConsumer.wakeup()``."""


class CommitFailedError(KafkaError):
    """A commit cannot be completed because the group rebalanced or the member was fenced."""


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto_offset_reset='none'``."""


class LogTruncationError(KafkaError):
    """The log was truncated below the consumer's position (detected by OffsetForLeaderEpoch)."""

    def __init__(self, message: str = "", divergent_offsets: dict | None = None) -> None:
        super().__init__(message)
        self.divergent_offsets = dict(divergent_offsets or {})


class RecordTooLargeError(KafkaError):
    """A record batch is larger than the fetch size; raise ``max_partition_fetch_bytes``."""


# --- broker error codes --------------------------------------------------------------


class BrokerResponseError(KafkaError):
    """A Kafka error code returned by a broker. Subclasses set ``errno``/``message``."""

    errno: int = -1
    message: str = "UNKNOWN"
    description: str = ""

    def __str__(self) -> str:
        extra = super().__str__().split(": ", 1)
        detail = extra[1] if len(extra) > 1 else ""
        text = "[Error {}] {}".format(self.errno, self.__class__.__name__)
        return text + (": " + detail if detail else "")


_BY_CODE: dict[int, type[BrokerResponseError]] = {}


def _register(cls: type[BrokerResponseError]) -> type[BrokerResponseError]:
    _BY_CODE[cls.errno] = cls
    return cls


def for_code(code: int) -> type[BrokerResponseError]:
    """The exception class for a Kafka error code (an ``UnknownError`` subclass if unknown)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = type("UnknownError{}".format(code), (UnknownError,), {"errno": code})
        _BY_CODE[code] = cls
    return cls


@_register
class UnknownError(BrokerResponseError):
    errno = -1
    message = "UNKNOWN_SERVER_ERROR"
    description = "The server experienced an unexpected error when processing the request."


# The rest of the error-code table is filled in by the network-client issue.
