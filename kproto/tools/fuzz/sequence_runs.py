"""Running one sequence within a run: a named sequence, or a replay of a sequence seed.

Owns, for the runner (:class:`~kproto.tools.fuzz.runner.Fuzzer`), which sequences a plan
allows, running one (with coverage feedback: half the time, when the sequence has kept
runs, a replay of one of them by :mod:`~kproto.tools.fuzz.sequence_seeds` instead), the
counts, the findings of its exchanges (shrunk by their steps), the death of the broker
after it, and the note to coverage feedback of its time, its steps and its API names so
that a run that reached new code is kept as a seed.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from kproto.errors import FuzzTargetError
from kproto.tools.fuzz import oracles, schema, sequence_seeds, sequences, shrink
from kproto.tools.fuzz.brokerlog import LOG_SETTLE
from kproto.tools.fuzz.dictionary import issued
from kproto.tools.fuzz.plan import PREFIXED_APIS, enforce_prefix
from kproto.tools.fuzz.sequence_seeds import SequenceSeed

if TYPE_CHECKING:
    from kproto.tools.fuzz.runner import Fuzzer

REPLAY = "seq.seed_replay"  # the strategy a replayed sequence seed's findings are under
UNSEEDED = frozenset(("seq.pipelined",))  # its steps are the generator's, its point the pipe


def names(fuzzer: "Fuzzer") -> list[str]:
    """The sequences whose every API the plan holds."""
    planned = {spec.api_key for spec, _ in fuzzer.plan}
    return [name for name in sorted(sequences.SEQUENCES)
            if sequences.SEQUENCE_APIS[name] <= planned]


def run(fuzzer: "Fuzzer", name: str) -> None:
    """Run sequence ``name`` (or replay one of its seeds) and note it to feedback."""
    fb = fuzzer.feedback
    seed = fb.pick_sequence(name) if fb is not None else None
    start = time.monotonic()
    sent = sum(fuzzer.stats.requests.values())
    kept = None
    try:
        kept = _run(fuzzer, name, seed)
    finally:
        took = time.monotonic() - start
        fuzzer.sequence_time += took
        if fb is not None:
            apis = tuple(sorted(schema.api(k).api_name for k in sequences.SEQUENCE_APIS[name]
                                if k in schema.apis()))
            fb.note(("seq", name, ""), apis, took,
                    weight=sum(fuzzer.stats.requests.values()) - sent, sequence=kept)


def _run(fuzzer: "Fuzzer", name: str, seed: "SequenceSeed | None") -> "SequenceSeed | None":
    """One run; its steps as a seed candidate (None: not one)."""
    sub_seed = fuzzer.rng.getrandbits(32)
    label = REPLAY if seed is not None else name
    fuzzer.stats.strategies[label] += 1
    knowledge = fuzzer.own if fuzzer.own.topics else fuzzer.knowledge
    apis = {spec.api_key for spec, _ in fuzzer.plan} if fuzzer.config.apis else None
    run = sequences.Run(fuzzer.target, random.Random(sub_seed), knowledge, fuzzer.dictionary)
    run.apis = apis
    try:
        if seed is None:
            sequences.SEQUENCES[name](run)
        else:
            sequence_seeds.replay(seed, run, lambda spec, v: _fresh(fuzzer, spec, v),
                                  lambda spec, req: _settle(fuzzer, spec, req),
                                  fuzzer.dictionary)
    except (OSError, FuzzTargetError):
        fuzzer.target.drop_main()
    found, exchanges = run.found, run.exchanges
    for ex in exchanges:
        if ex.api_key in schema.apis():
            fuzzer.stats.requests[(schema.api(ex.api_key).api_name, ex.api_version)] += 1
        fuzzer.stats.outcomes[ex.outcome] += 1
    if fuzzer.broker_log is not None and exchanges:
        logged = fuzzer.broker_log.poll(LOG_SETTLE)
        found += [(v, exchanges[-1]) for v in
                  oracles.with_broker_log(exchanges[-1], [], logged)]
    for verdict, ex in found:
        if ex.api_key not in schema.apis():
            continue
        spec = schema.api(ex.api_key)
        finding = fuzzer._new_finding(verdict, ex, spec, ex.api_version or 0, label,
                                      "sequence", "" if seed is None else seed.name)
        if finding is None:
            continue
        n = exchanges.index(ex) + 1
        finding.steps = [e.wire for e in exchanges[:n]]
        finding.sequence_seed = sub_seed if seed is None else None
        if seed is not None:  # no seed to run again from: replay threads the frames
            finding.issued = [issued(a) for a in run.answers[:n]]
        if fuzzer.config.minimise and fuzzer.alive:
            shrink.shrink_sequence(fuzzer, finding, verdict, ex)
        fuzzer._finish(finding, ex)
    if not fuzzer.target.alive()[0]:
        _died(fuzzer, label, exchanges, sub_seed if seed is None else None)
    if name in UNSEEDED or fuzzer.feedback is None or not fuzzer.feedback.enabled or \
            any(e.outcome == oracles.TIMEOUT for e in exchanges):
        return None  # a run that waited out a bound would wait again in every replay
    return sequence_seeds.from_run(name, run)


def _died(fuzzer: "Fuzzer", label: str, exchanges: list[oracles.Exchange],
          sub_seed: "int | None") -> None:
    time.sleep(1.0)
    why = fuzzer.target.alive()
    key = exchanges[-1].api_key if exchanges else None
    if not why[0] and key is not None and key in schema.apis():
        fuzzer.alive = False
        last = exchanges[-1]
        fuzzer.deaths.append({"after_s": round(time.monotonic() - fuzzer.stats.started, 3),
                              "api_key": key, "api_version": last.api_version,
                              "strategy": label, "detail": why[1]})
        finding = fuzzer._new_finding(oracles.dead("{} after {}".format(why[1], label)),
                                      last, schema.api(key), last.api_version or 0, label,
                                      "sequence", "")
        if finding is not None:
            finding.steps = [e.wire for e in exchanges]
            finding.sequence_seed = sub_seed
            fuzzer._finish(finding, last)
    fuzzer.alive = why[0]


def _fresh(fuzzer: "Fuzzer", spec: schema.ApiSpec, version: int) -> Any:
    """A generated request (a tree mutation's donor), under the safety rules' names."""
    gen = fuzzer.gen
    if spec.api_name in PREFIXED_APIS:
        gen.knowledge = fuzzer.own
    try:
        return gen.request(spec, version)
    finally:
        gen.knowledge = fuzzer.knowledge


def _settle(fuzzer: "Fuzzer", spec: schema.ApiSpec, request: Any) -> Any:
    """A mutated step made fit to send: prefixed names where the API creates or changes."""
    if spec.api_name in PREFIXED_APIS:
        return enforce_prefix(request, fuzzer.own, fuzzer.dictionary.issued_strings())
    return request


__all__ = ["names", "run", "REPLAY"]
