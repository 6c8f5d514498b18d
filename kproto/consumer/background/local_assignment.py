"""Assignments by topic id, and the small future helpers the membership code chains on.

Owns ``LocalAssignment`` (Java's ``AbstractMembershipManager.LocalAssignment``): the
partitions a heartbeat response assigned, keyed by topic id, with a local epoch bumped on
every change so "same partitions, acknowledged again" is still a change the heartbeat state
notices. Also the client-generated member id (KIP-1082).
"""

from __future__ import annotations

import base64
import uuid
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Mapping, Optional

from kproto.structs import TopicPartition


def generate_member_id() -> str:
    """A client-generated member id (KIP-1082), spelled like Java's ``Uuid.toString()``."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def completed_future(result: Any = None) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(result)
    return future


def when_complete(future: Future[Any], callback: Callable[[Optional[BaseException]], None]) -> None:
    """Run ``callback(error_or_None)`` when ``future`` completes (at once if it has)."""
    future.add_done_callback(lambda f: callback(f.exception()))


def chain(source: Future[Any], target: Future[Any], transform: Callable[[Any], Any] = lambda value: value) -> None:
    """Complete ``target`` with ``source``'s outcome (unless the reaper got there first): an
    event's future from the manager future that does its work."""

    def _copy(error: Optional[BaseException]) -> None:
        if target.done():
            return
        if error is not None:
            target.set_exception(error)
        else:
            target.set_result(transform(source.result()))

    when_complete(source, _copy)


class LocalAssignment:
    """An assignment by topic id, with a local epoch bumped on every change.

    The heartbeat state resends the owned partitions whenever this object changes, which
    includes a change of local epoch with the same partitions (an acknowledgement).
    """

    __slots__ = ("local_epoch", "partitions")

    def __init__(self, local_epoch: int, partitions: Mapping[uuid.UUID, Iterable[int]]) -> None:
        self.local_epoch = local_epoch
        self.partitions: dict[uuid.UUID, frozenset[int]] = {
            topic_id: frozenset(parts) for topic_id, parts in partitions.items() if parts}

    def is_none(self) -> bool:
        return self.local_epoch == -1

    def update_with(self, partitions: Mapping[uuid.UUID, Iterable[int]]) -> Optional["LocalAssignment"]:
        """A new assignment with the next local epoch, or None if ``partitions`` is the same."""
        candidate = LocalAssignment(self.local_epoch + 1, partitions)
        if not self.is_none() and candidate.partitions == self.partitions:
            return None
        return candidate

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LocalAssignment) and self.local_epoch == other.local_epoch
                and self.partitions == other.partitions)

    def __hash__(self) -> int:
        return hash((self.local_epoch, frozenset(self.partitions.items())))

    def __repr__(self) -> str:
        parts = {str(k): sorted(v) for k, v in self.partitions.items()}
        return "LocalAssignment(local_epoch={}, partitions={})".format(self.local_epoch, parts)


LocalAssignment.NONE = LocalAssignment(-1, {})  # type: ignore[attr-defined]


def by_topic_id(assigned: Iterable[tuple[uuid.UUID, TopicPartition]]) -> dict[uuid.UUID, set[int]]:
    by_id: dict[uuid.UUID, set[int]] = {}
    for topic_id, tp in assigned:
        by_id.setdefault(topic_id, set()).add(tp.partition)
    return by_id
