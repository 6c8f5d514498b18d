"""A pure timer fed with the current time (Java's ``org.apache.kafka.common.utils.Timer``).

The timer never reads a clock: every method that needs "now" takes it, or uses the time of
the last ``update``. That keeps the request managers sans-IO and their tests on a fake
clock.
"""

from __future__ import annotations


class Timer:
    """A deadline ``timeout_ms`` after the time it was started or last reset."""

    __slots__ = ("_current_ms", "_deadline_ms", "_timeout_ms")

    def __init__(self, now_ms: int, timeout_ms: int) -> None:
        self._current_ms = now_ms
        self._timeout_ms = 0
        self._deadline_ms = now_ms
        self.reset(timeout_ms)

    def update(self, now_ms: int) -> None:
        # Time never goes backwards for a timer, even if a caller's clock reading does.
        self._current_ms = max(self._current_ms, now_ms)

    def reset(self, timeout_ms: int) -> None:
        """Restart the timer at the last updated time with a new timeout."""
        if timeout_ms < 0:
            raise ValueError("timeout_ms must be >= 0, got {}".format(timeout_ms))
        self._timeout_ms = timeout_ms
        self._deadline_ms = self._current_ms + timeout_ms

    def update_and_reset(self, now_ms: int, timeout_ms: int) -> None:
        self.update(now_ms)
        self.reset(timeout_ms)

    def is_expired(self) -> bool:
        return self._current_ms >= self._deadline_ms

    def remaining_ms(self) -> int:
        return max(0, self._deadline_ms - self._current_ms)

    def is_expired_by(self) -> int:
        """How long ago the deadline passed (0 if it has not)."""
        return max(0, self._current_ms - self._deadline_ms)

    @property
    def timeout_ms(self) -> int:
        return self._timeout_ms

    @property
    def deadline_ms(self) -> int:
        return self._deadline_ms

    @property
    def current_time_ms(self) -> int:
        return self._current_ms

    def __repr__(self) -> str:
        return "Timer(remaining_ms={}, timeout_ms={})".format(self.remaining_ms(), self._timeout_ms)
