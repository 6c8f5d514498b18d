"""The classic engine's background heartbeat thread (Java's ``AbstractCoordinator.HeartbeatThread``).

Owns only the thread: a daemon named ``kafka-coordinator-heartbeat-thread | <group>`` that
calls the coordinator's ``heartbeat_step()`` (send a due Heartbeat, rediscover a lost
coordinator, leave the group when ``max_poll_interval_ms`` has passed without a
``poll()``) and sleeps for the time it returns. All decisions live in the coordinator;
an unexpected exception is kept in ``failure`` and handed to the application thread
through the coordinator, which raises it on the next ``poll()``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kproto import transition_log

log = logging.getLogger("kproto.consumer.classic")

THREAD_NAME_PREFIX = "kafka-coordinator-heartbeat-thread | "


class HeartbeatThread(threading.Thread):
    """Runs ``coordinator.heartbeat_step()`` until ``close()``."""

    def __init__(self, coordinator: Any) -> None:
        super().__init__(name=THREAD_NAME_PREFIX + coordinator.group_id, daemon=True)
        self._coordinator = coordinator
        self._closed = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        log.debug("Heartbeat thread for group %s started", self._coordinator.group_id)
        self._event("started")
        while not self._closed.is_set():
            try:
                wait_ms = self._coordinator.heartbeat_step()
            except Exception as exc:  # noqa: BLE001 - handed to the application thread
                log.error("Heartbeat thread for group %s failed: %s", self._coordinator.group_id, exc)
                self.failure = exc
                self._coordinator.on_heartbeat_thread_failure(exc)
                self._event("failed", error=str(exc))
                return
            self._closed.wait(max(0.001, wait_ms / 1000.0))
        log.debug("Heartbeat thread for group %s stopped", self._coordinator.group_id)
        self._event("stopped")

    def _event(self, action: str, **fields: Any) -> None:
        if transition_log.enabled():
            membership = getattr(self._coordinator, "membership", None)
            transition_log.emit("heartbeat_thread", source=getattr(membership, "event_source", None),
                        group=self._coordinator.group_id, action=action, **fields)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the loop and wait for it (never from the thread itself)."""
        self._closed.set()
        if threading.current_thread() is not self:
            self.join(timeout_s)
