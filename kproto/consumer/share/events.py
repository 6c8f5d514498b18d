"""The share consumer's events (Java's ``ShareFetchEvent``, ``ShareAcknowledgeSyncEvent``, ...).

Application events carry the acknowledgements the application made since the last call
(``AckEntry``: the node and session generation that delivered the records, the partition,
and an ``Acknowledgements``), so the background thread owns them from then on. The one
background event of the engine, ``ShareAcknowledgementCommitCallbackEvent``, brings
completed acknowledgements back for the application's acknowledgement commit callback.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from kproto.consumer.background.events import ApplicationEvent, BackgroundEvent, CompletableApplicationEvent
from kproto.consumer.share.acknowledgements import Acknowledgements
from kproto.structs import TopicIdPartition


class AckEntry:
    """Acknowledgements for one partition, for the node session that delivered the records."""

    __slots__ = ("node_id", "generation", "tip", "acks")

    def __init__(self, node_id: int, generation: int, tip: TopicIdPartition, acks: Acknowledgements) -> None:
        self.node_id = node_id
        self.generation = generation
        self.tip = tip
        self.acks = acks

    def __repr__(self) -> str:
        return "AckEntry(node={}, gen={}, {}, {})".format(self.node_id, self.generation, self.tip, self.acks)


class ShareSubscriptionChangeEvent(CompletableApplicationEvent):
    def __init__(self, topics: Iterable[str], deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.topics = list(topics)


class ShareFetchEvent(ApplicationEvent):
    """``poll``: acknowledgements so far, and the wish for more records."""

    def __init__(self, entries: list[AckEntry], settles: Optional[int] = None) -> None:
        super().__init__()
        self.entries = entries
        # The first event of a poll (its ShareFetchBuffer round): it carries the
        # acknowledgements of every record the application held before that poll, so
        # fetching from those nodes is safe again once it is queued.
        self.settles = settles


class ShareAcknowledgeSyncEvent(CompletableApplicationEvent):
    """``commit()``: the future completes with ``{TopicIdPartition: error or None}``."""

    def __init__(self, entries: list[AckEntry], deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.entries = entries


class ShareAcknowledgeAsyncEvent(ApplicationEvent):
    def __init__(self, entries: list[AckEntry]) -> None:
        super().__init__()
        self.entries = entries


class ShareAcknowledgeOnCloseEvent(CompletableApplicationEvent):
    """``close()``/``unsubscribe()``: last acknowledgements, then every share session closed."""

    def __init__(self, entries: list[AckEntry], deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.entries = entries


class ShareLeaveGroupEvent(CompletableApplicationEvent):
    """The leave heartbeat (epoch -1); completes when it was answered or failed."""


class StopFindCoordinatorOnCloseEvent(ApplicationEvent):
    pass


class ShareAcknowledgementCommitCallbackEvent(BackgroundEvent):
    """Acknowledgements the broker answered (or that failed), for the commit callback."""

    def __init__(self, entries: list[Any]) -> None:
        super().__init__()
        self.entries = entries
