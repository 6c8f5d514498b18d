"""The client's one clock: monotonic whole milliseconds (Java's ``Time.milliseconds()``).

Every engine, the network client and their timers read time through ``monotonic_ms`` (or
a ``time_ms`` callable defaulting to it, so sans-IO tests can pass a fake clock). Whole
milliseconds, as Java's: deadlines and backoffs computed from it are ints, fit the
protocol's int fields, and a loop waiting for a deadline sleeps at least a millisecond
while it has not passed.
"""

from __future__ import annotations

import time


def monotonic_ms() -> int:
    """Monotonic milliseconds, shared by every thread of the client."""
    return time.monotonic_ns() // 1_000_000
