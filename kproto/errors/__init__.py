"""One exception family for kproto: every exception it raises, importable from here.

A package of two halves and this face. ``kproto.errors.base`` is written by hand: the
roots, the client-side errors (corrupt bytes, timeouts, bad configuration, illegal state)
and ``BrokerResponseError``. ``kproto.errors.codes`` is generated from one table
(codegen/error_codes.py) and imports only the base: one class per Kafka protocol error code
(its code, name, whether it is retriable, a one-line meaning) and the ``ErrorCode`` IntEnum
to branch on. This module re-exports both and owns the one lookup from a response's error
code to its exception (``for_code``). Class names follow kafka-python's ``kafka.errors`` so
code written against it keeps catching the same names.
"""

from __future__ import annotations

from kproto.errors.base import *  # noqa: F401,F403
from kproto.errors.base import BrokerResponseError
from kproto.errors.codes import *  # noqa: F401,F403
from kproto.errors.codes import BY_CODE as _GENERATED, ErrorCode, UnknownError

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
