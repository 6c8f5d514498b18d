"""What the kproto.aio tests share: running a coroutine under asyncio's debug mode with
no thread started and no "Task was destroyed" / "Unclosed" report, draining records, and a
rebalance listener that records what it was told."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
import warnings
from typing import Any, Awaitable, Callable

from tests.threads import TestThread

DEADLINE_S = 60
_BAD = ("Task was destroyed", "Unclosed", "was never awaited", "Exception in callback",
        "exception was never retrieved")


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    """``asyncio.run(main(), debug=True)``; fails if a thread (other than a test's own
    ``TestThread``) was started while it ran or asyncio (or a ResourceWarning) reported a
    leaked task, transport or coroutine."""
    collector = _Collector()
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.addHandler(collector)
    before = {t.ident for t in threading.enumerate()}
    seen_threads: set = set()

    async def watched() -> Any:
        async def watch() -> None:
            while True:
                # A test's own helper threads (a Java peer's reader) are no consumer's.
                seen_threads.update(t.ident for t in threading.enumerate() if not isinstance(t, TestThread))
                await asyncio.sleep(0.05)
        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            return await main()
        finally:
            watcher.cancel()
            try:
                await watcher
            except asyncio.CancelledError:
                pass

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            result = asyncio.run(watched(), debug=True)
            gc.collect()
    finally:
        asyncio_log.removeHandler(collector)
    started = seen_threads - before
    assert not started, "threads started: {}".format(
        [t.name for t in threading.enumerate() if t.ident in started])
    bad = [m for m in collector.messages if any(b in m for b in _BAD)]
    bad += [str(w.message) for w in caught if any(b in str(w.message) for b in _BAD)]
    assert not bad, bad
    return result


async def drain(consumer: Any, n: int, timeout_s: float = DEADLINE_S) -> dict:
    """getmany() until ``n`` distinct (partition, offset) pairs arrived; {pair: record}."""
    seen: dict = {}
    deadline = time.monotonic() + timeout_s
    while len(seen) < n:
        assert time.monotonic() < deadline, "got {} of {}".format(len(seen), n)
        for tp, records in (await consumer.getmany(timeout_ms=200)).items():
            for r in records:
                seen[(tp.partition, r.offset)] = r
    return seen


class ListenerLog:
    """An aiokafka rebalance listener (coroutine callbacks) recording ``(kind, sorted partitions)``."""

    def __init__(self) -> None:
        self.events: list = []

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(("revoked", sorted(revoked)))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(("assigned", sorted(assigned)))

    async def on_partitions_lost(self, lost: Any) -> None:
        self.events.append(("lost", sorted(lost)))
