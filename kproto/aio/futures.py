"""Awaiting an engine event's future on the loop (no thread, no executor).

Owns ``await_event``: the outcome of a ``concurrent.futures.Future`` that the engine's
iteration completes on this same thread, awaited until a deadline. Cancelling the await
leaves the event to finish in the background (the engine never sees the cancellation),
and the outcome is always retrieved, so nothing logs "exception was never retrieved".
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any

from kproto.clock import monotonic_ms
from kproto.errors import KafkaTimeoutError


async def await_event(future: "Future[Any]", deadline_ms: float, what: str) -> Any:
    waiter = asyncio.get_running_loop().create_future()

    def _done(f: "Future[Any]") -> None:
        if waiter.done():
            return
        error = f.exception()
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(f.result())

    future.add_done_callback(_done)
    try:
        done, _ = await asyncio.wait([waiter], timeout=max(0, deadline_ms - monotonic_ms()) / 1000.0)
    finally:
        if not waiter.done():
            waiter.cancel()
        elif not waiter.cancelled():
            waiter.exception()
    if not done:
        raise KafkaTimeoutError("Timed out waiting for {}".format(what))
    return waiter.result()
