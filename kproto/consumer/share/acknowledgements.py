"""Acknowledgements of acquired records (Java's ``AcknowledgeType`` and ``Acknowledgements``).

Owns the acknowledgement types, the two argument forms of ``acknowledge``
(``acknowledge_arguments``), one partition's acknowledgements as an offset -> type map,
and their wire form: ``to_batches`` turns them into ascending, non-overlapping
``(first_offset, last_offset, [type])`` batches, one per run of consecutive offsets with
the same type, the form ShareFetch and ShareAcknowledge carry. A set of acknowledgements
also carries its outcome once the broker answered (``complete``): None, or the error the
partition's answer (or the whole request) failed with.

``GAP`` (0) is not a user type: it acknowledges an acquired offset that holds no record
(a control record, a compacted one), so the broker can move past it.
"""

from __future__ import annotations

import enum
from typing import Any, Iterable, Optional

from kproto.errors import IllegalArgumentError

GAP = 0


class AcknowledgeType(enum.IntEnum):
    """How the application acknowledged a delivered record (the protocol's type codes)."""

    ACCEPT = 1   # processed: the record is done
    RELEASE = 2  # not processed: deliver it again (delivery_count + 1), to any member
    REJECT = 3   # unprocessable: never deliver it again (archived)
    RENEW = 4    # still working on it: renew the acquisition lock (ShareFetch/ShareAcknowledge v2+)


def acknowledge_type(value: object) -> AcknowledgeType:
    """``value`` as an AcknowledgeType (the enum, its name in any case, or its code)."""
    if isinstance(value, AcknowledgeType):
        return value
    try:
        if isinstance(value, str):
            return AcknowledgeType[value.upper()]
        if isinstance(value, int) and not isinstance(value, bool):
            return AcknowledgeType(value)
    except (KeyError, ValueError):
        pass
    raise IllegalArgumentError("unknown acknowledgement type {!r} (one of {})".format(
        value, ", ".join(t.name for t in AcknowledgeType)))


def acknowledge_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]
                          ) -> tuple[Any, Optional[tuple[str, int, int]], AcknowledgeType]:
    """The arguments of ``KafkaShareConsumer.acknowledge``, whose two forms are Java's two
    overloads: ``(record, type=ACCEPT)`` gives ``(record, None, type)``;
    ``(topic, partition, offset, type)`` (a record that failed to be delivered, type
    required as in Java) gives ``(None, (topic, partition, offset), type)``. Three or more
    arguments (or ``topic=``) pick the second form: the first takes at most two."""
    by_offset = "topic" in kwargs or len(args) + len(kwargs) >= 3
    # The two forms bound by plain calls (the interpreter's own argument binding): the
    # record form is called once per record in explicit mode, where inspect.signature's
    # binding cost ~15-25 µs a call.
    try:
        if not by_offset:
            record, type_ = _by_record(*args, **kwargs)
            return record, None, acknowledge_type(type_)
        topic, partition, offset, type_ = _by_offset(*args, **kwargs)
    except TypeError as exc:
        raise IllegalArgumentError("acknowledge(record, type=ACCEPT) or acknowledge(topic, partition, offset, type): "
                                   "{}".format(exc)) from None
    kind = acknowledge_type(type_)
    if not isinstance(topic, str) or not topic:
        raise IllegalArgumentError("topic must be a non-empty str, not {!r}".format(topic))
    for name, value in (("partition", partition), ("offset", offset)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise IllegalArgumentError("{} must be an int >= 0, not {!r}".format(name, value))
    return None, (topic, partition, offset), kind


def _by_record(record: Any, type: Any = AcknowledgeType.ACCEPT) -> tuple[Any, Any]:  # noqa: A002
    """``acknowledge(record, type)``'s arguments, bound."""
    return record, type


def _by_offset(topic: Any, partition: Any, offset: Any, type: Any) -> tuple[Any, Any, Any, Any]:  # noqa: A002
    """``acknowledge(topic, partition, offset, type)``'s arguments, bound."""
    return topic, partition, offset, type


class Acknowledgements:
    """One partition's acknowledgements, offset -> type, and their outcome."""

    __slots__ = ("_types", "error", "completed")

    def __init__(self, types: Optional[dict[int, int]] = None) -> None:
        self._types: dict[int, int] = dict(types or {})
        self.error: Optional[BaseException] = None
        self.completed = False

    def add(self, offset: int, type_: int) -> None:
        self._types[offset] = int(type_)

    def add_offsets(self, offsets: Iterable[int], type_: int) -> None:
        self._types.update(dict.fromkeys(offsets, int(type_)))

    def add_all(self, other: "Acknowledgements") -> None:
        self._types.update(other._types)

    def get(self, offset: int) -> Optional[int]:
        return self._types.get(offset)

    def __len__(self) -> int:
        return len(self._types)

    def __bool__(self) -> bool:
        return bool(self._types)

    def offsets(self, include_gaps: bool = False) -> set[int]:
        return {o for o, t in self._types.items() if include_gaps or t != GAP}

    def items(self) -> Iterable[tuple[int, int]]:
        return sorted(self._types.items())

    def to_batches(self) -> list[tuple[int, int, list[int]]]:
        """Runs of consecutive offsets with one type, ascending."""
        batches: list[tuple[int, int, list[int]]] = []
        for offset, type_ in sorted(self._types.items()):
            if batches and offset == batches[-1][1] + 1 and type_ == batches[-1][2][0]:
                batches[-1] = (batches[-1][0], offset, batches[-1][2])
            else:
                batches.append((offset, offset, [type_]))
        return batches

    def complete(self, error: Optional[BaseException]) -> None:
        self.error = error
        self.completed = True

    def __repr__(self) -> str:
        return "Acknowledgements({}, error={!r})".format(self.to_batches(), self.error)
