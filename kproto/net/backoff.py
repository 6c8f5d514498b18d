"""Jittered exponential backoff (Java's ``org.apache.kafka.common.utils.ExponentialBackoff``).

Owns the one implementation of the retry backoff both layers use: the network layer's
metadata refresh schedule (:class:`~kproto.net.metadata.ClusterMetadata`, KIP-580) and
reconnect backoff (``kproto.net.broker.reconnect_backoff_ms``), the classic engine's
FindCoordinator retries (``kproto.consumer.classic.coordinator_discovery``) and the KIP-848
request managers' ``RequestState`` (``kproto.consumer.background.request_manager``). It lives in
``kproto.net`` because the network layer may not import the consumer layer.

The constants are Java's ``CommonClientConfigs.RETRY_BACKOFF_EXP_BASE`` and
``RETRY_BACKOFF_JITTER``: every ``retry_backoff_ms`` backoff doubles per attempt up to
``retry_backoff_max_ms``, each value drawn within +-20% so that clients do not retry in step.
"""

from __future__ import annotations

import random
from typing import Optional

#: Java's CommonClientConfigs.RETRY_BACKOFF_EXP_BASE.
RETRY_BACKOFF_EXP_BASE = 2
#: Java's CommonClientConfigs.RETRY_BACKOFF_JITTER.
RETRY_BACKOFF_JITTER = 0.2


class ExponentialBackoff:
    """``initial * multiplier**attempts``, capped at ``max_ms``, with +-``jitter`` applied.

    A ``max_ms`` not above ``initial_ms`` gives a constant ``initial_ms`` without jitter.
    ``rng`` (a ``random.Random``) makes the jitter reproducible.
    """

    def __init__(self, initial_ms: int, multiplier: float, max_ms: int, jitter: float,
                 rng: Optional[random.Random] = None) -> None:
        self.initial_ms = initial_ms
        self.multiplier = multiplier
        self.max_ms = max(initial_ms, max_ms)
        self.jitter = jitter
        self._rng = rng or random.Random()

    def backoff(self, attempts: int) -> int:
        """The backoff after ``attempts`` earlier attempts (0: the first retry)."""
        if self.max_ms <= self.initial_ms:
            return self.initial_ms
        # The exponent is bounded so a long outage cannot overflow the float.
        term = self.initial_ms * (self.multiplier ** min(attempts, 64))
        if self.jitter > 0:
            term *= self._rng.uniform(1 - self.jitter, 1 + self.jitter)
        return int(min(term, self.max_ms))

    def __repr__(self) -> str:
        return "ExponentialBackoff(initial_ms={}, multiplier={}, max_ms={}, jitter={})".format(
            self.initial_ms, self.multiplier, self.max_ms, self.jitter)
