"""The one fake clock of the tests: integer milliseconds that move only when a test says so.

Pass it wherever kproto takes a clock (``time_ms=``, ``clock=``): calling it returns ``now``.
"""

from __future__ import annotations


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now
