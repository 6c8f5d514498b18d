"""What every group member of the integration tests shows (no tests here).

``MemberViews``: the base of the kproto members (:mod:`tests.support.members`) and the Java
peers (:mod:`tests.brokers.java_peer`): under ``lock``, ``processed`` (topic, partition,
offset) and ``ownership`` (generation, assignment) as the member recorded them, and its
ownership intervals from the rebalance callbacks (``callback_events``, which each kind
supplies from its own record), so a test can mix member kinds. A view raises at once what
the member failed with. ``intervals_from_callbacks``: the intervals' one computation.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from tests.threads import TestThread

# (callback, partitions, CLOCK_MONOTONIC ns) of one rebalance callback.
CallbackEvent = tuple[str, frozenset, int]


def intervals_from_callbacks(events: list[CallbackEvent], ended_ns: Optional[int]
                             ) -> list[tuple[Any, int, Optional[int]]]:
    """Ownership intervals from ``(callback, partitions, ns)``: ``assigned`` adds (eager
    protocols hand the whole assignment after revoking all; cooperative and KIP-848 the
    added partitions), ``revoked`` and ``lost`` end them."""
    open_since: dict[Any, int] = {}
    result: list[tuple[Any, int, Optional[int]]] = []
    for kind, parts, ns in events:
        for tp in parts:
            if kind == "assigned":
                open_since.setdefault(tp, ns)
            elif tp in open_since:
                result.append((tp, open_since.pop(tp), ns))
    result.extend((tp, since, ended_ns) for tp, since in open_since.items())
    return result


class MemberViews(TestThread):
    """A group member's views; a subclass fills ``processed``, ``ownership`` and
    ``ended_ns`` under ``lock`` and implements ``callback_events``."""

    lock: threading.Lock
    processed: list[tuple[str, int, int]]
    ownership: list[tuple[int, frozenset]]
    ended_ns: Optional[int]

    def callback_events(self) -> list[CallbackEvent]:
        """The rebalance callbacks so far (called with ``lock`` held)."""
        raise NotImplementedError

    def processed_set(self) -> set[tuple[str, int, int]]:
        self.raise_if_failed()
        with self.lock:
            return set(self.processed)

    def assignment(self) -> frozenset:
        self.raise_if_failed()
        with self.lock:
            return self.ownership[-1][1] if self.ownership else frozenset()

    def generation(self) -> int:
        self.raise_if_failed()
        with self.lock:
            return self.ownership[-1][0] if self.ownership else -1

    def ownership_intervals(self) -> list[tuple[Any, int, Optional[int]]]:
        """(partition, from, until) in CLOCK_MONOTONIC ns from the rebalance callbacks;
        ``until`` is the member's end (or None while it runs) for what it still owned
        (``assert_never_owned_twice``)."""
        with self.lock:
            events = self.callback_events()
        return intervals_from_callbacks(events, self.ended_ns)
