"""The base class of every generated message and struct, and the encode/decode entry points.

The generated code in ``kproto.messages`` is straight-line per version; this module holds the
parts that are the same for every class: lazy schema defaults, ``__eq__``, ``__repr__``,
``to_dict()``, the version dispatch, and the translation of low-level failures into
``kproto.errors`` exceptions (``CorruptMessageError`` naming API, version and byte offset when
decoding; ``IllegalArgumentError`` when a value cannot be encoded).

A field absent from the decoded version (or never set) is not stored: ``__getattr__`` supplies
the schema default on first access and stores it, so decoding skips work for absent fields and
mutable defaults are never shared between instances.
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable, ClassVar, TypeVar

from kproto.errors import CorruptMessageError, IllegalArgumentError, KafkaError
from kproto.protocol.primitives import DecodeFailure, read_tagged_fields

__all__ = ["ProtocolStruct", "NOTSET", "unsupported_field", "read_unknown_tags",
           "add_unknown_tag", "tag_size_mismatch", "too_many", "too_short"]

T = TypeVar("T", bound="ProtocolStruct")

_STRUCT_OFFSET = re.compile(r"at offset (\d+)")


class _NotSet:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOTSET"


# Default of constructor parameters whose schema default is mutable (a list or a struct).
NOTSET: Any = _NotSet()


class ProtocolStruct:
    """A Kafka message, header or nested struct. Subclasses are generated."""

    __slots__ = ()

    _name: ClassVar[str] = "?"
    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}
    _factories: ClassVar[dict[str, Callable[[], Any]]] = {}
    _first_version: ClassVar[int] = 0
    _encoders: ClassVar[tuple[Any, ...] | None] = None
    _decoders: ClassVar[tuple[Any, ...] | None] = None
    # Declared for the type checker only: a message class's API key (not a ClassVar:
    # ApiVersions' nested struct has an ``api_key`` field), and the request/response pair
    # the generated modules link once both classes exist. Nested structs have none.
    api_key: int
    response_class: ClassVar[type[ProtocolStruct]]
    request_class: ClassVar[type[ProtocolStruct]]
    # A slot of every generated class: tagged fields this schema does not know, kept raw.
    _unknown_tagged_fields: list[tuple[int, bytes]] | None

    def __getattr__(self, name: str) -> Any:
        # Only reached for a slot that holds no value yet: supply the schema default.
        if name == "_unknown_tagged_fields":
            return None
        cls = type(self)
        if name in cls._defaults:
            value = cls._defaults[name]
        else:
            factory = cls._factories.get(name)
            if factory is None:
                raise AttributeError("{} has no field {!r}".format(cls._name, name))
            value = factory()
        setattr(self, name, value)
        return value

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for name in self._fields:
            if getattr(self, name) != getattr(other, name):
                return False
        return (self._unknown_tagged_fields or None) == (other._unknown_tagged_fields or None)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = ["{}={}".format(name, _short_repr(getattr(self, name))) for name in self._fields]
        unknown = self._unknown_tagged_fields
        if unknown:
            parts.append("_unknown_tagged_fields={!r}".format(unknown))
        return "{}({})".format(self._name, ", ".join(parts))

    def to_dict(self) -> dict[str, Any]:
        """The nested field tree as plain dicts, lists and values (records/bytes as bytes)."""
        out = {name: _plain(getattr(self, name)) for name in self._fields}
        if self._unknown_tagged_fields:
            out["_unknown_tagged_fields"] = {tag: bytes(raw)
                                             for tag, raw in self._unknown_tagged_fields}
        return out

    def encode(self, version: int) -> bytes:
        """The body bytes of this message in ``version`` (no request/response header)."""
        fn = _lookup(type(self), type(self)._encoders, version)
        out = bytearray()
        try:
            fn(self, out)
        except _FieldNotInVersion as exc:
            raise IllegalArgumentError("{} v{} cannot carry a non-default value: {}".format(
                self._name, version, exc)) from None
        except KafkaError:
            raise
        except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise IllegalArgumentError("{} v{}: cannot encode: {}".format(
                self._name, version, exc)) from exc
        return bytes(out)

    @classmethod
    def decode(cls: type[T], data: bytes | bytearray | memoryview, version: int, *,
               allow_trailing: bool = False) -> T:
        """Decode ``version`` of this message from ``data`` (the body, without header).

        Records fields are zero-copy views of ``data``. Bytes left over after the message are
        an error unless ``allow_trailing`` (e.g. a newer ConsumerProtocol version read with an
        older schema, which Kafka allows).
        """
        fn = _lookup(cls, cls._decoders, version)
        mv = data if isinstance(data, memoryview) else memoryview(data)
        if mv.ndim != 1 or mv.format not in ("B", "b", "c"):
            mv = mv.cast("B")
        elif mv.format != "B":
            mv = mv.cast("B")
        try:
            obj, pos = fn(mv, 0)
        except DecodeFailure as exc:
            raise CorruptMessageError(exc.reason, api=cls._name, version=version,
                                      offset=exc.offset) from None
        except struct.error as exc:
            match = _STRUCT_OFFSET.search(str(exc))
            offset = int(match.group(1)) if match else len(mv)
            raise CorruptMessageError("truncated", api=cls._name, version=version,
                                      offset=offset) from None
        except IndexError:
            raise CorruptMessageError("truncated", api=cls._name, version=version,
                                      offset=len(mv)) from None
        except (ValueError, OverflowError, MemoryError) as exc:
            raise CorruptMessageError(str(exc), api=cls._name, version=version) from None
        if pos != len(mv) and not allow_trailing:
            raise CorruptMessageError("{} trailing bytes".format(len(mv) - pos), api=cls._name,
                                      version=version, offset=pos)
        return obj


def _lookup(cls: type[ProtocolStruct], table: tuple[Any, ...] | None, version: int) -> Callable[..., Any]:
    if table is None:
        raise IllegalArgumentError("{} is a nested struct; encode/decode its message".format(
            cls._name))
    index = version - cls._first_version
    if not isinstance(version, int) or index < 0 or index >= len(table) or table[index] is None:
        raise IllegalArgumentError("{} has no version {!r} (supported: {}-{})".format(
            cls._name, version, cls._first_version, cls._first_version + len(table) - 1))
    return table[index]


def _short_repr(value: Any) -> str:
    if isinstance(value, memoryview):
        return "<memoryview {} bytes>".format(value.nbytes)
    return repr(value)


def _plain(value: Any) -> Any:
    if isinstance(value, ProtocolStruct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value


# --- helpers the generated code calls --------------------------------------------------

class _FieldNotInVersion(Exception):
    """Internal: a field holds a non-default value the version being encoded cannot carry."""


def unsupported_field(obj: ProtocolStruct, attr: str, versions: str) -> None:
    """Raise for a non-default value in a field the chosen version cannot carry."""
    raise _FieldNotInVersion("field {}.{} = {} exists only in versions {}".format(
        obj._name, attr, _short_repr(getattr(obj, attr)), versions))


def add_unknown_tag(obj: ProtocolStruct, tag: int, raw: bytes) -> None:
    unknown = obj._unknown_tagged_fields
    if unknown is None:
        unknown = []
        setattr(obj, "_unknown_tagged_fields", unknown)  # a slot of the generated subclass
    unknown.append((tag, raw))


def read_unknown_tags(obj: ProtocolStruct, mv: memoryview, pos: int) -> int:
    """Read a tagged-field section where the schema knows no tags: keep every field raw."""
    fields, pos = read_tagged_fields(mv, pos)
    for tag, start, end in fields:
        add_unknown_tag(obj, tag, bytes(mv[start:end]))
    return pos


def tag_size_mismatch(tag: int, start: int, end: int, used: int) -> None:
    raise DecodeFailure("tagged field {} has {} bytes but its value used {}".format(
        tag, end - start, used - start), start)


def too_short(what: str, size: int, pos: int, left: int) -> None:
    raise DecodeFailure("{} of {} bytes but only {} left".format(what, size, left), pos)


def too_many(count: int, pos: int, left: int) -> None:
    if count < -1:
        raise DecodeFailure("negative array length {}".format(count), pos)
    raise DecodeFailure("array of {} elements cannot fit in {} bytes".format(count, left), pos)
