"""Sequences as seeds: the steps of a sequence run that reached new code, replayed with
step-by-step tree mutations and the broker's answers threaded through.

Owns what a sequence seed keeps (each step's API, version and request tree, and what its
recorded answer issued) and its replay: the steps in order on the run's connection, a step
now and then dropped or sent twice, each step's recorded values that came from an earlier
answer (a member id, a generation, a producer id, a fetch session id) replaced by what the
same answer says in this replay, then one to three tree mutations on about one step in
each replay (:func:`~kproto.tools.fuzz.tree_mutators.mutate`, the harvested values among
their donors). A named sequence checks one rule with requests a client would nearly send;
its seeds then wander from it one step at a time while staying in the state its answers
built: a heartbeat of the member the replay's own JoinGroup made, with another field
changed. Group, transactional and instance ids the sequence made up are made up afresh in
most replays, so that a replay meets a new group rather than the one the recording left.
The same threading, frame by frame, replays a finding such a replay made (its frames and
what each answer issued, :class:`~kproto.tools.fuzz.corpus.Finding`): :func:`thread_frame`
and :func:`learn`, sent by :func:`~kproto.tools.fuzz.shrink.send_steps`.
"""

from __future__ import annotations

import random
import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional

from kproto.tools.fuzz import schema, tree_mutators
from kproto.tools.fuzz.dictionary import ALIASES, Dictionary, issued
from kproto.tools.fuzz.mutators import case_of, frame_wire
from kproto.tools.fuzz.sequences import SLOW, Run

FRESH_NAMES = 0.7   # replays that make the sequence's group and transactional ids anew
DROP, DUPLICATE = 0.2, 0.15  # replays with one step dropped, or one step sent twice
MUTATED_STEPS = 1.5  # steps given tree mutations, on average per replay
SLOW_APIS = frozenset((11, 14, 22))  # JoinGroup, SyncGroup, InitProducerId may wait


Issued = list[tuple[str, Any]]  # what one answer issued: (field name, value), in order
Threaded = dict[tuple[str, Any], Any]  # (name, recorded value) -> this replay's value


@dataclass
class Step:
    spec: schema.ApiSpec
    version: int
    request: Any
    issued: Issued  # what its recorded answer issued


@dataclass
class SequenceSeed:
    name: str
    steps: list[Step]
    credit: float = 0.0


def from_run(name: str, run: Run) -> Optional[SequenceSeed]:
    """The steps of a sequence run (those sent as request trees: all but a frame's)."""
    steps = []
    for ex, answer in zip(run.exchanges, run.answers):
        key, version = ex.api_key, ex.api_version
        if ex.request is None or key is None or version is None or key not in schema.apis():
            continue
        steps.append(Step(schema.api(key), version, ex.request,
                          issued(answer) if answer is not None else []))
    return SequenceSeed(name, steps) if steps else None


def thread(request: Any, threaded: Threaded) -> int:
    """Replace, in ``request``, each value an earlier recorded answer issued under a name
    (or a name the field may take: :data:`ALIASES`) by what this replay's answer issued
    there; returns how many fields changed."""
    changed = 0
    for path, value in tree_mutators.walk(request):
        if isinstance(value, bool) or not isinstance(value, (int, str, uuid.UUID)):
            continue
        name = next((k for k in reversed(path) if isinstance(k, str)), None)
        if name is None:
            continue
        for source in (name,) + ALIASES.get(name, ()):
            new = threaded.get((source, value))
            if new is not None:
                tree_mutators.put(request, path, new)
                changed += 1
                break
    return changed


def _fresh_names(steps: list[Step], prefix: str, rng: random.Random) -> dict[str, str]:
    """The sequence's made-up group, transactional and instance ids -> new ones."""
    made_up = re.compile(re.escape(prefix) + r"(seq|txn|inst)-")
    out: dict[str, str] = {}
    for step in steps:
        for _, value in tree_mutators.walk(step.request):
            if isinstance(value, str) and value not in out:
                m = made_up.match(value)
                if m:
                    out[value] = "{}{}-{:x}".format(prefix, m.group(1), rng.getrandbits(48))
    return out


def _rename(request: Any, names: dict[str, str]) -> None:
    for path, value in list(tree_mutators.walk(request)):
        if isinstance(value, str) and value in names:
            tree_mutators.put(request, path, names[value])


def replay(seed: SequenceSeed, run: Run, fresh: Callable[[schema.ApiSpec, int], Any],
           settle: Callable[[schema.ApiSpec, Any], Any],
           dictionary: Optional[Dictionary], mutations: bool = True) -> list[str]:
    """Send ``seed``'s steps again on ``run`` (which records and judges each), threaded
    and mutated (``mutations`` False: threaded only); ``fresh`` makes a request of an API
    and version (the donor of a tree mutation), ``settle`` makes a mutated request fit to
    send (the safety rules' prefix). Returns what was changed, for the report's notes."""
    rng = run.rng
    steps = list(seed.steps)
    notes: list[str] = []
    r = rng.random() if mutations else 1.0
    if len(steps) > 1 and r < DROP:
        i = rng.randrange(len(steps))
        notes.append("drop step {}".format(i))
        del steps[i]
    elif r < DROP + DUPLICATE:
        i = rng.randrange(len(steps))
        notes.append("step {} twice".format(i))
        steps.insert(i, steps[i])
    names = _fresh_names(steps, run.knowledge.prefix, rng) \
        if rng.random() < FRESH_NAMES else {}
    threaded: Threaded = {}
    p_mutate = min(1.0, MUTATED_STEPS / len(steps)) if mutations else 0.0
    for n, step in enumerate(steps):
        request = tree_mutators.clone(step.request)
        _rename(request, names)
        thread(request, threaded)
        sent = request
        if rng.random() < p_mutate:
            mutated, done = tree_mutators.mutate(request, fresh(step.spec, step.version), None,
                                                 rng, dictionary)
            mutated = settle(step.spec, mutated)
            try:  # a value the field's type cannot hold: the step as threaded
                mutated.encode(step.version)
                sent = mutated
                notes += ["step {}: {}".format(n, d) for d in done]
            except Exception:
                pass
        try:
            sent.encode(step.version)
        except Exception:
            continue  # a threaded value the field cannot hold (an alias of another width)
        answer = run.call(sent, step.version,
                          timeout=SLOW if step.spec.api_key in SLOW_APIS else None)
        if answer is None:
            break  # no answer: the connection is gone, and the state with it
        learn(step.issued, answer, threaded)
    return notes


def learn(recorded: Issued, answer: Any, threaded: Threaded) -> None:
    """Note in ``threaded`` each value a step's recorded answer issued (``recorded``) that
    this replay's ``answer`` to the step issued anew: the n-th value issued under a name
    stands for the n-th recorded under it."""
    by_name: dict[str, list[Any]] = {}
    for name, value in issued(answer):  # no answer (None) issued nothing
        by_name.setdefault(name, []).append(value)
    seen: dict[str, int] = {}
    for name, old in recorded:
        k = seen[name] = seen.get(name, -1) + 1
        new = by_name.get(name, [])
        if k < len(new) and new[k] != old:
            threaded[(name, old)] = new[k]


def thread_frame(wire: bytes, threaded: Threaded) -> tuple[bytes, Any]:
    """A recorded step's frame threaded (:func:`thread`; its header as recorded) and the
    request it now holds; a frame that is not a valid request, or is one that no threaded
    value changes, as it is (a value its field cannot hold: the frame as recorded)."""
    case = case_of(wire)
    if case is None:
        return wire, None
    request = tree_mutators.clone(case.request)
    if not thread(request, threaded):
        return wire, case.request
    try:
        body = request.encode(case.version)
    except Exception:  # an alias of another width, as in replay()
        return wire, case.request
    return frame_wire(wire[4:len(wire) - len(case.body)] + body), request


__all__ = ["SequenceSeed", "Step", "Issued", "from_run", "thread", "thread_frame", "learn",
           "replay"]
