"""The classic group member's liveness timers (Java's ``Heartbeat``), sans-IO.

Owns three deadlines, all fed ``now_ms`` by the caller (no clock of its own):

- the *heartbeat* timer: when the next Heartbeat is due (``heartbeat_interval_ms`` after the
  last one was sent, ``retry_backoff_ms`` after one failed);
- the *session* timer: ``session_timeout_ms`` after the last successful Heartbeat (or the
  last reset); if it expires the coordinator is presumed gone and is looked up again;
- the *poll* timer: ``max_poll_interval_ms`` after the application last called ``poll()``;
  if it expires the member leaves the group so the others can take its partitions.

The heartbeat thread and the application thread both use one instance; the coordinator
guards it with its lock.
"""

from __future__ import annotations

from kproto import errors


class Heartbeat:
    """Heartbeat, session and poll deadlines of one group member (times in ms)."""

    def __init__(self, *, session_timeout_ms: int, heartbeat_interval_ms: int, max_poll_interval_ms: int,
                 retry_backoff_ms: int, now_ms: float) -> None:
        if heartbeat_interval_ms >= session_timeout_ms:
            raise errors.KafkaConfigurationError(
                "heartbeat_interval_ms ({}) must be lower than session_timeout_ms ({})".format(
                    heartbeat_interval_ms, session_timeout_ms))
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.heartbeat_in_flight = False
        self._heartbeat_deadline = now_ms + heartbeat_interval_ms
        self._session_deadline = now_ms + session_timeout_ms
        self._poll_deadline = now_ms + max_poll_interval_ms

    # --- events -------------------------------------------------------------------------

    def poll(self, now_ms: float) -> None:
        """The application called ``poll()``: the poll timer starts again."""
        self._poll_deadline = now_ms + self.max_poll_interval_ms

    def sent_heartbeat(self, now_ms: float) -> None:
        self.heartbeat_in_flight = True
        self._heartbeat_deadline = now_ms + self.heartbeat_interval_ms

    def fail_heartbeat(self, now_ms: float) -> None:
        """A Heartbeat failed: try again after the retry backoff, not a full interval."""
        self.heartbeat_in_flight = False
        self._heartbeat_deadline = now_ms + self.retry_backoff_ms

    def received_heartbeat(self, now_ms: float) -> None:
        """The coordinator answered: the session is alive."""
        self.heartbeat_in_flight = False
        self._session_deadline = now_ms + self.session_timeout_ms

    def reset_session_timeout(self, now_ms: float) -> None:
        self._session_deadline = now_ms + self.session_timeout_ms

    def reset_timeouts(self, now_ms: float) -> None:
        """After a join: every timer starts again (Java's resetTimeouts)."""
        self.heartbeat_in_flight = False
        self._session_deadline = now_ms + self.session_timeout_ms
        self._poll_deadline = now_ms + self.max_poll_interval_ms
        self._heartbeat_deadline = now_ms + self.heartbeat_interval_ms

    # --- questions ----------------------------------------------------------------------

    def should_heartbeat(self, now_ms: float) -> bool:
        return not self.heartbeat_in_flight and now_ms >= self._heartbeat_deadline

    def time_to_next_heartbeat(self, now_ms: float) -> float:
        """Ms until a Heartbeat is due (0 if it is due now)."""
        return max(0.0, self._heartbeat_deadline - now_ms)

    def session_timeout_expired(self, now_ms: float) -> bool:
        return now_ms >= self._session_deadline

    def poll_timeout_expired(self, now_ms: float) -> bool:
        return now_ms >= self._poll_deadline

    def poll_time_remaining(self, now_ms: float) -> float:
        return max(0.0, self._poll_deadline - now_ms)
