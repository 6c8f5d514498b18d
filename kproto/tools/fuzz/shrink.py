"""Shrinking a finding against the broker: candidates sent, judged, kept when they fire.

Owns the sending side of shrinking for a run (:mod:`kproto.tools.fuzz.minimise` owns the
search): a request finding by its bytes and request tree (:func:`minimise_request`, each
candidate on a connection of its own and judged by every oracle, the broker's log
included), a sequence finding by its steps (:func:`shrink_sequence`, the frames re-sent
in order by :func:`send_steps`, threaded as ``fuzz replay`` threads them, the last one's
verdict or semantic check again), and a crash by the requests
before it once ``--restart-cmd`` brought the broker back (:func:`shrink_crash`: each try
that crashes it again costs a restart, so a few tries only). All within the run's time
bound.
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING, Any, Optional

from kproto.errors import FuzzTargetError
from kproto.tools.fuzz import corpus, oracles
from kproto.tools.fuzz.corpus import Finding
from kproto.tools.fuzz.minimise import minimise, shrink_steps
from kproto.tools.fuzz.mutators import Case
from kproto.tools.fuzz.oracles import ANSWER, CLOSED, Exchange, Verdict
from kproto.tools.fuzz.sequence_seeds import SLOW_APIS, Issued, Threaded, learn, thread_frame
from kproto.tools.fuzz.sequences import SLOW
from kproto.tools.fuzz.target import Target, answer_of

if TYPE_CHECKING:
    from kproto.tools.fuzz.runner import Fuzzer

BYTE_LEVEL = ("decode", "header", "unknown_server_error", "broker_log")
CRASH_SHRINK_CALLS = 6
HANG_CALLS = 4  # each try that still hangs costs the timeout
LOG_WAIT = 0.15  # seconds a try waits for the broker's log line


def budget(fuzzer: "Fuzzer", most: float = 15.0) -> float:
    """Seconds shrinking may take: ``most``, within the run's time bound."""
    if fuzzer.config.seconds is None:
        return most
    return max(0.0, min(most, fuzzer.stats.started + fuzzer.config.seconds - time.monotonic()))


def send_steps(target: Target, steps: list[bytes], timeout: Optional[float] = None,
               issued: Optional[list[Issued]] = None) -> Exchange:
    """The frames in order on a connection of their own; the last one's exchange (with the
    outcome of the step that ended the sending, should an earlier one). With ``issued``
    (per step, what its recorded answer issued: ``Finding.issued``) each frame is threaded
    first with what this sending's answers issued
    (:func:`~kproto.tools.fuzz.sequence_seeds.thread_frame`), as the replay of a sequence
    seed that recorded them did; the exchange then holds the last frame as threaded and
    its request."""
    s = target.connect()
    threaded: Threaded = {}
    last = Exchange(steps[-1], True, CLOSED)
    try:
        for i, wire in enumerate(steps):
            request = None
            if issued is not None:
                wire, request = thread_frame(wire, threaded)
            s.sendall(wire)
            outcome, answer = target.read_frame(s, timeout or _wait(target, wire))
            if outcome != ANSWER and i < len(steps) - 1:
                # broken off before the last step: the last (as recorded) has its outcome
                last = Exchange(steps[-1], True, outcome, answer)
                break
            last = Exchange(wire, True, outcome, answer, request)
            if outcome != ANSWER:
                break
            if issued is not None:
                learn(issued[i], answer_of(last), threaded)
    except OSError:
        last = Exchange(steps[-1], True, CLOSED)
    finally:
        target.release(s)
    return last


def _wait(target: Target, wire: bytes) -> float:
    """How long a step's answer may take: as long as a sequence waits for it (joins may wait
    for a rebalance delay), else the target's bound."""
    key = struct.unpack_from(">h", wire, 4)[0] if len(wire) >= 8 else None
    return max(SLOW, target.timeout) if key in SLOW_APIS else target.timeout


def minimise_request(fuzzer: "Fuzzer", finding: Finding, case: Case, ex: Exchange) -> None:
    request = case.request if finding.valid else None
    # the broker's log line may come just after its answer
    settle = LOG_WAIT if fuzzer.broker_log is not None and "broker_log" in finding.extra \
        else 0.0

    def fires(wire: bytes, req: Any) -> bool:
        try:
            cand = fuzzer.target.exchange(wire, valid=finding.valid and req is not None,
                                          own_connection=True, request=req,
                                          strategy=finding.strategy)
        except (OSError, FuzzTargetError):
            return False
        return any(v.oracle == finding.oracle and v.signature == finding.signature
                   for v in fuzzer.verdicts(cand, settle))

    shrunk = minimise(ex.wire, request, case.version, len(case.header), fires,
                      byte_level=finding.oracle in BYTE_LEVEL, max_seconds=budget(fuzzer),
                      max_calls=HANG_CALLS if finding.oracle == "hang" else 60)
    if shrunk.after < shrunk.before:
        finding.wire = shrunk.wire
        finding.request = corpus.request_tree(shrunk.request) if shrunk.request else None
        finding.valid = finding.valid and shrunk.request is not None
    finding.minimised = {"before": shrunk.before, "after": shrunk.after,
                         "calls": shrunk.calls}


def shrink_sequence(fuzzer: "Fuzzer", finding: Finding, verdict: Verdict, ex: Exchange) -> None:
    """Fewer steps of a sequence finding while its last step still fires (a semantic
    check, "... accepted", by the answer saying yes everywhere); threaded as replay
    threads them when the finding keeps what its answers issued."""
    semantic = verdict.oracle == "content" and verdict.signature.endswith(" accepted")

    def fires(kept: list[int]) -> bool:
        try:
            last = send_steps(fuzzer.target, [finding.steps[i] for i in kept],
                              issued=_issued(finding, kept))
        except (OSError, FuzzTargetError):
            return False
        last.strategy = ex.strategy
        if last.request is None:
            last.request = ex.request
        decoded, verdicts = oracles.evaluate(last)
        if semantic:
            return oracles.accepted(decoded)
        return any(v.oracle == verdict.oracle and v.signature == verdict.signature
                   for v in verdicts)

    before = len(finding.steps)
    kept, calls = shrink_steps(list(range(before)), fires, max_seconds=budget(fuzzer))
    _keep(finding, kept)
    finding.minimised = {"steps_before": before, "steps_after": len(kept), "calls": calls}


def shrink_crash(fuzzer: "Fuzzer", finding: Finding) -> None:
    """Fewer of the requests before a crash, each candidate tried on the restarted broker;
    the reproducer is saved again."""
    target = fuzzer.target

    def fires(kept: list[int]) -> bool:
        for i in kept:
            try:
                send_steps(target, [finding.steps[i]], timeout=1.0)
            except (OSError, FuzzTargetError):
                break
        if target.alive()[0]:
            return False
        time.sleep(1.0)
        if target.alive()[0]:
            return False
        fuzzer.deaths.append({"after_s": round(time.monotonic() - fuzzer.stats.started, 3),
                              "api_key": finding.api_key, "api_version": finding.version,
                              "strategy": "shrinking " + finding.strategy,
                              "detail": "reproduced"})
        return fuzzer.restart()

    before = len(finding.steps)
    kept, calls = shrink_steps(list(range(before)), fires, max_calls=CRASH_SHRINK_CALLS,
                               max_seconds=budget(fuzzer, CRASH_SHRINK_CALLS *
                                                  fuzzer.config.restart_timeout))
    _keep(finding, kept)
    finding.wire = finding.steps[-1]
    finding.minimised = {"steps_before": before, "steps_after": len(kept), "calls": calls}
    if fuzzer.config.out_dir is not None:
        corpus.save(finding, fuzzer.config.out_dir)


def _issued(finding: Finding, kept: list[int]) -> Optional[list[Issued]]:
    """What the kept steps' answers issued, for threading (None: the finding has none)."""
    threads = len(finding.issued) == len(finding.steps) > 0
    return [finding.issued[i] for i in kept] if threads else None


def _keep(finding: Finding, kept: list[int]) -> None:
    """The finding's steps cut down to those kept (with what their answers issued)."""
    if len(finding.issued) == len(finding.steps):
        finding.issued = [finding.issued[i] for i in kept]
    finding.steps = [finding.steps[i] for i in kept]


__all__ = ["minimise_request", "shrink_sequence", "shrink_crash", "send_steps", "budget",
           "BYTE_LEVEL", "CRASH_SHRINK_CALLS"]
