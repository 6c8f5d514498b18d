"""Coverage feedback for one run: where new code came from, where the energy goes, seeds.

Owns, for a run given ``--coverage HOST:PORT``: the batch of what was sent since the last
read, reading the broker's coverage after each batch
(:class:`~kproto.tools.fuzz.coverage.JacocoClient`, with a reset so that a dump holds only
the classes run since the last one; at least ``every`` requests and ``interval`` seconds
apart), crediting the new probes of the request-handling packages to what was sent, the
energy of each *arm* (an API at a level: a valid request, a field or a frame mutant of it;
or a named sequence), the seeds (requests that were credited new probes, kept per API; and
sequence runs that were, kept per sequence as
:class:`~kproto.tools.fuzz.sequence_seeds.SequenceSeed`) and the coverage over time.

Credit: new probes in a class named after an API of the batch (``FetchRequest``,
``ShareFetchResponse``, ``FetchSession``: the longest API name the class name starts with)
go to that API's items of the batch; the rest are split over every item by the time it
took. An arm's energy is AFL's idea of a favoured input made into a bandit: a decayed mean
of the credit it was given per try, over its decayed mean time per try, so an arm that
keeps reaching new code is drawn more and one that stops cools down within a few dozen
tries; a quarter of the draws ignore the energy (``EXPLORE``) and no arm outweighs an
untried one more than ``MAX_BOOST`` times. With ``enabled`` False coverage is read every
``MEASURE_INTERVAL`` seconds only and nothing is steered (the credit is still reported,
coarsely): the baseline of a comparison, which does not pay for the reads feedback needs.
"""

from __future__ import annotations

import random
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from kproto.errors import CoverageError
from kproto.tools.fuzz import schema
from kproto.tools.fuzz.coverage import (CoverageMap, Dump, JacocoClient, handles_requests,
                                        package_of)
from kproto.tools.fuzz.sequence_seeds import SequenceSeed

SEED_SHARE = 0.5     # of an arm's requests, the share that start from one of its API's seeds
EXPLORE = 0.25       # draws made the plain way, whatever the energy says
DECAY = 0.8          # weight of an arm's past per try (its memory: ~5 tries)
PRIOR_GAIN = 1.0     # an untried arm's credit per try ...
PRIOR_SECONDS = 0.05  # ... over its time per try (plus the arm's own)
MAX_BOOST = 30.0     # the most an arm outweighs an untried one
SEEDS_PER_API = 16   # the newest kept
SEEDS_PER_SEQUENCE = 8  # the newest sequence runs kept per named sequence
MEASURE_INTERVAL = 5.0  # seconds between reads with feedback off
MIN_SECONDS = 0.001  # an item's time, at least, in the split of a batch's credit ...
MAX_SECONDS = 1.0    # ... and at most: a request that waited out its bound did no more work

Arm = tuple[str, str, str]  # ("req", API name, level) or ("seq", sequence name, "")


@dataclass
class Seed:
    spec: schema.ApiSpec
    version: int
    request: Any
    credit: float


@dataclass
class ArmStats:
    gain: float = 0.0      # decayed credit per try
    seconds: float = 0.0   # decayed seconds per try
    tries: int = 0
    credit: float = 0.0    # all the credit it was given
    spent: float = 0.0     # all the seconds it took

    def weight(self) -> float:
        base = PRIOR_GAIN / PRIOR_SECONDS
        score = (self.gain + PRIOR_GAIN) / (self.seconds + PRIOR_SECONDS)
        return min(score, MAX_BOOST * base)


@dataclass
class _Item:
    arm: Arm
    apis: tuple[str, ...]
    seconds: float
    weight: int
    seed: Optional[Seed]
    sequence: Optional[SequenceSeed] = None


@dataclass
class Feedback:
    client: JacocoClient
    rng: random.Random
    enabled: bool = True
    every: int = 16
    interval: float = 0.5
    say: Callable[[str], None] = lambda _: None
    map: CoverageMap = field(default_factory=CoverageMap)
    timeline: list[tuple[float, int, int]] = field(default_factory=list)
    errors: int = 0
    reads: int = 0
    read_seconds: float = 0.0
    arms: dict[Arm, ArmStats] = field(default_factory=dict)
    seeds: dict[str, deque[Seed]] = field(default_factory=dict)
    seeded_from: Counter[str] = field(default_factory=Counter)  # API -> requests from seeds
    sequence_seeds: dict[str, deque[SequenceSeed]] = field(default_factory=dict)
    replayed: Counter[str] = field(default_factory=Counter)  # sequence -> seeds replayed
    _batch: list[_Item] = field(default_factory=list)
    _last_read: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def connect(cls, host: str, port: int, rng: random.Random, **kw: Any) -> "Feedback":
        return cls(JacocoClient(host, port), rng, **kw)

    # --- steering --------------------------------------------------------------------

    def choose(self, arms: list[Arm]) -> Optional[Arm]:
        """The arm to draw from next by energy, or None: draw the plain way (feedback off,
        or an exploring draw)."""
        if not self.enabled or not arms or self.rng.random() < EXPLORE:
            return None
        untried = PRIOR_GAIN / PRIOR_SECONDS
        weights = [self.arms[a].weight() if a in self.arms else untried for a in arms]
        return self.rng.choices(arms, weights)[0]

    def pick(self, api: str) -> Optional[Seed]:
        """A seed of ``api`` to start from (SEED_SHARE of the time when it has seeds),
        the more credited ones more often."""
        pool = self.seeds.get(api)
        if not self.enabled or not pool or self.rng.random() >= SEED_SHARE:
            return None
        self.seeded_from[api] += 1
        return self.rng.choices(list(pool), [1.0 + s.credit for s in pool])[0]

    def pick_sequence(self, name: str) -> Optional[SequenceSeed]:
        """A kept run of sequence ``name`` to replay (SEED_SHARE of the time when there
        is one), the more credited ones more often."""
        pool = self.sequence_seeds.get(name)
        if not self.enabled or not pool or self.rng.random() >= SEED_SHARE:
            return None
        self.replayed[name] += 1
        return self.rng.choices(list(pool), [1.0 + s.credit for s in pool])[0]

    def other(self, api: str, seed: Seed) -> Optional[Seed]:
        """Another seed of the same API (a splice's donor), if any."""
        pool = [s for s in self.seeds.get(api, ()) if s is not seed]
        return self.rng.choice(pool) if pool else None

    # --- what was sent, and what it reached ----------------------------------------

    def note(self, arm: Arm, apis: tuple[str, ...], seconds: float,
             seed: Optional[Seed] = None, weight: int = 1,
             sequence: Optional[SequenceSeed] = None) -> None:
        """What was just sent (``seed``: the request, ``sequence``: a sequence run's
        steps, seed candidates); after a batch, read the coverage and credit it."""
        self._batch.append(_Item(arm, apis, seconds, max(1, weight), seed, sequence))
        # Measuring only, coverage is read seldom: the baseline does not pay for reads
        # only feedback needs.
        interval = self.interval if self.enabled else max(self.interval, MEASURE_INTERVAL)
        if sum(i.weight for i in self._batch) >= self.every and \
                time.monotonic() - self._last_read >= interval:
            self.read()

    def read(self) -> None:
        """Read the coverage now and credit the batch with what it added."""
        now = time.monotonic()
        self._last_read = now
        try:
            dump = self.client.dump(reset=True)
        except (OSError, CoverageError) as exc:
            self.errors += 1  # a restarting broker: the next read reconnects
            if self.errors == 1:
                self.say("kproto fuzz: coverage: {}".format(exc))
            self._batch = []
            return
        finally:
            self.reads += 1
            self.read_seconds += time.monotonic() - now
        self.take(dump)
        self.timeline.append((round(now - self.started, 1), self.map.covered,
                              self.map.request_handling()))

    def take(self, dump: Dump) -> dict[str, int]:
        """Merge a dump and credit the batch sent since the last one with the probes it
        adds in the request-handling packages (returned per class)."""
        batch, self._batch = self._batch, []
        # New code in the request-handling packages only: the broker's own threads (the
        # quorum, the log cleaner, metrics) reach new probes with no request's help.
        added = {k: n for k, n in self.map.update_by_class(dump).items()
                 if handles_requests(package_of(k))}
        if batch:
            self._credit(batch, added)
        return added

    def _credit(self, batch: list[_Item], added: dict[str, int]) -> None:
        credit = [0.0] * len(batch)
        by_api: dict[str, list[int]] = {}
        for i, item in enumerate(batch):
            for api in item.apis:
                by_api.setdefault(api, []).append(i)
        names = sorted(by_api, key=len, reverse=True)  # ShareFetch before Fetch
        # The rest by the time each took: a split by count would favour quick arms (a
        # frame mutant refused in a millisecond) in a yield per second.
        times = [min(max(item.seconds, MIN_SECONDS), MAX_SECONDS * item.weight)
                 for item in batch]
        total = sum(times)
        for cls, n in added.items():
            simple = cls.rpartition("/")[2]
            owner = next((a for a in names if simple.startswith(a)), None)
            if owner is not None:
                for i in by_api[owner]:
                    credit[i] += n / len(by_api[owner])
            else:
                for i, t in enumerate(times):
                    credit[i] += n * t / total
        for item, c in zip(batch, credit):
            stats = self.arms.setdefault(item.arm, ArmStats())
            per_try = c / item.weight
            stats.gain = DECAY * stats.gain + (1 - DECAY) * per_try if stats.tries \
                else per_try
            per_try_s = item.seconds / item.weight
            stats.seconds = DECAY * stats.seconds + (1 - DECAY) * per_try_s if stats.tries \
                else per_try_s
            stats.tries += item.weight
            stats.credit += c
            stats.spent += item.seconds
            if c >= 1.0 and item.seed is not None and self.enabled:
                item.seed.credit = c
                pool = self.seeds.setdefault(item.seed.spec.api_name,
                                             deque(maxlen=SEEDS_PER_API))
                pool.append(item.seed)
            if c >= 1.0 and item.sequence is not None and self.enabled:
                item.sequence.credit = c
                self.sequence_seeds.setdefault(item.sequence.name, deque(
                    maxlen=SEEDS_PER_SEQUENCE)).append(item.sequence)

    def seed_count(self) -> int:
        return sum(len(p) for p in self.seeds.values())

    def sequence_seed_count(self) -> int:
        return sum(len(p) for p in self.sequence_seeds.values())

    def top_arms(self, n: int = 20) -> list[dict[str, Any]]:
        """The arms credited most, for the report."""
        rows = sorted(self.arms.items(), key=lambda kv: -kv[1].credit)[:n]
        return [{"arm": " ".join(x for x in arm[1:] if x), "kind": arm[0],
                 "tries": s.tries, "credit": round(s.credit, 1), "seconds": round(s.spent, 1),
                 "weight": round(s.weight(), 1)} for arm, s in rows]

    def close(self) -> None:
        self.client.close()


__all__ = ["Feedback", "Seed", "Arm", "ArmStats", "SEED_SHARE", "EXPLORE"]
