"""Coverage feedback for one run: which requests become seeds, and where new ones start.

Owns, for a run given ``--coverage HOST:PORT``: the batch of what was sent since the last
read (requests as (API, version, request) and sequence names), reading the broker's
coverage after each batch (:class:`~kproto.tools.fuzz.coverage.JacocoClient`, at least
``every`` requests and a second apart), keeping the batch as seeds when it reached new
probes in the request-handling packages, the coverage over time, and the draws that start a request from a seed
(:meth:`Feedback.pick`, :func:`splice`) or weigh sequences by the new code they reached.
With ``enabled`` False coverage is only measured (the baseline of a comparison).
"""

from __future__ import annotations

import copy
import random
import time
from collections import Counter
from typing import Any, Callable, Optional

from kproto.errors import CoverageError
from kproto.tools.fuzz import schema
from kproto.tools.fuzz.coverage import CoverageMap, JacocoClient, handles_requests

SEED_SHARE = 0.5  # with seeds, the share of requests that start from one
MAX_SEEDS = 512
Seed = tuple[schema.ApiSpec, int, Any]


class Feedback:
    def __init__(self, host: str, port: int, rng: random.Random, *, enabled: bool = True,
                 every: int = 32, say: Callable[[str], None] = lambda _: None) -> None:
        self.client = JacocoClient(host, port)
        self.rng, self.enabled, self.every, self.say = rng, enabled, every, say
        self.map = CoverageMap()
        self.timeline: list[tuple[float, int, int]] = []  # (s, covered, request handling)
        self.errors = 0
        self.seeds: list[Seed] = []
        self.seed_sequences: Counter[str] = Counter()
        self._batch: list[Any] = []
        self._last_read = 0.0
        self.started = time.monotonic()

    def pick(self) -> Optional[Seed]:
        """A seed to start the next request from, SEED_SHARE of the time once there are
        seeds."""
        if not self.enabled or not self.seeds or self.rng.random() >= SEED_SHARE:
            return None
        return self.rng.choice(self.seeds)

    def pick_sequence(self, names: list[str]) -> str:
        """A sequence, weighted by how often it reached new code."""
        if not self.enabled or not self.seed_sequences:
            return self.rng.choice(names)
        return self.rng.choices(names, [1 + self.seed_sequences[n] for n in names])[0]

    def note(self, what: Any, force: bool = False) -> None:
        """What was just sent; after a batch, read the coverage and keep the batch as seeds
        when it reached new probes (``force``: read now, the run's last batch)."""
        if what is not None:
            self._batch.append(what)
        now = time.monotonic()
        if not force and (len(self._batch) < self.every or now - self._last_read < 1.0):
            return
        self._last_read = now
        batch, self._batch = self._batch, []
        try:
            by_package = self.map.update_by_package(self.client.dump())
        except (OSError, CoverageError) as exc:
            self.errors += 1  # a restarting broker: the next read reconnects
            if self.errors == 1:
                self.say("kproto fuzz: coverage: {}".format(exc))
            return
        self.timeline.append((round(now - self.started, 1), self.map.covered,
                              self.map.request_handling()))
        # New code in the request-handling packages only: the broker's own threads (the
        # quorum, the log cleaner, metrics) reach new probes with no request's help.
        added = sum(n for package, n in by_package.items() if handles_requests(package))
        if not added or not self.enabled:
            return
        for item in batch:
            if isinstance(item, str):
                self.seed_sequences[item] += 1
            else:
                self.seeds.append(item)
        del self.seeds[:-MAX_SEEDS]

    def close(self) -> None:
        self.client.close()


def splice(seed: Any, fresh: Any, rng: random.Random, keep_seed: bool) -> Any:
    """A request from a seed: the seed itself (for a mutant to start from) or, for a valid
    request, the seed with one top-level field taken from a freshly generated one."""
    out = copy.deepcopy(seed)
    if keep_seed:
        return out
    names = list(getattr(fresh, "_fields", ()))
    if names:
        name = rng.choice(names)
        setattr(out, name, getattr(fresh, name))
    return out


__all__ = ["Feedback", "splice", "SEED_SHARE", "MAX_SEEDS"]
