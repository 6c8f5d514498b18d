"""Sending a saved finding again: does it still fire?

Owns :func:`replay`: the run's set-up again (its seed topic, the coordinators), then the
finding's bytes (a sequence is run again from its own seed, a replayed sequence seed's
frames are sent again in order with this broker's answers threaded through as the run's
replay threaded its own; for a crash the request alone does not cause, the requests before
it in order), judged by the same oracles and probes as in the run.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, Optional

from kproto.errors import FuzzTargetError
from kproto.tools.fuzz import oracles, sequences
from kproto.tools.fuzz.corpus import Finding
from kproto.tools.fuzz.mutators import case_of
from kproto.tools.fuzz.oracles import Verdict
from kproto.tools.fuzz.plan import learn, seed_topic, warm_coordinators
from kproto.tools.fuzz.runner import Fuzzer, FuzzConfig
from kproto.tools.fuzz.shrink import send_steps
from kproto.tools.fuzz.target import Target
from kproto.tools.fuzz.values import Knowledge


def replay(finding: Finding, target: Target, *, setup: bool = True,
           prefix: str = "kproto-fuzz-", broker_log: Optional[Path] = None
           ) -> tuple[bool, list[Verdict]]:
    """Send a saved finding again (after the run's set-up, unless ``setup`` is False);
    whether its (oracle, signature) fires, and every verdict (with the broker's log
    followed when ``broker_log`` names it)."""
    fuzzer = Fuzzer(FuzzConfig("{}:{}".format(target.host, target.port),
                               broker_log=broker_log), target)
    target.fetch_api_versions()
    if setup:  # the state the run had: its seed topic, the coordinators loaded
        try:
            know = learn(target, prefix)
            seed_topic(target, know)
            warm_coordinators(target, know)
        except (OSError, FuzzTargetError):
            pass
    if finding.level == "sequence" and finding.strategy in sequences.SEQUENCES:
        know = learn(target, prefix)
        own = Knowledge(prefix=know.prefix, groups=know.groups, node_ids=know.node_ids,
                        topics=[t for t in know.topics if t.name.startswith(know.prefix)])
        if fuzzer.broker_log is not None:
            fuzzer.broker_log.poll()  # the set-up's lines
        found, exchanges = sequences.run_sequence(finding.strategy, target,
                                                  random.Random(finding.sequence_seed),
                                                  own if own.topics else know)
        verdicts = [v for v, _ in found]
        if fuzzer.broker_log is not None and exchanges:
            verdicts += oracles.with_broker_log(exchanges[-1], [],
                                                fuzzer.broker_log.poll(0.3))
    elif finding.level == "sequence" and finding.steps:
        # A replayed sequence seed has no seed of its own to run from: its frames again,
        # in order on one connection, each threaded with what this broker's answers issued
        # where the run's answers issued what it carries (a finding saved without those:
        # the frames as recorded), the last one judged.
        if fuzzer.broker_log is not None:
            fuzzer.broker_log.poll()  # the set-up's lines
        threads = len(finding.issued) == len(finding.steps)
        last = send_steps(target, finding.steps, issued=finding.issued if threads else None)
        last.strategy = finding.strategy
        if last.request is None:
            last.request = _request_from(finding)
        verdicts = fuzzer.verdicts(last, settle=0.3)
    else:
        if fuzzer.broker_log is not None:
            fuzzer.broker_log.poll()  # the set-up's lines
        ex = target.exchange(finding.wire, valid=finding.valid, own_connection=True,
                             request=_request_from(finding))
        if finding.oracle == "dead":
            alive = _still_alive(target)
            if alive and len(finding.steps) > 1:
                # not this request alone: the requests sent before it, in order
                for wire in finding.steps:
                    target.exchange(wire, valid=False, own_connection=True, timeout=1.0)
                alive = _still_alive(target)
            verdicts = [] if alive else [oracles.dead("replay")]
        else:
            verdicts = fuzzer.verdicts(ex, settle=0.3)
    fires = any(v.oracle == finding.oracle and v.signature == finding.signature
                for v in verdicts)
    if finding.oracle == "broker_log" and not fires:
        # the same log entry taken into another verdict (an UNKNOWN_SERVER_ERROR answer
        # the line came with in time here, and just after in the run)
        fires = any(" | " + finding.signature in v.signature for v in verdicts)
    return fires, verdicts


def _still_alive(target: Target) -> bool:
    """The run's rule: dead only when two probes a second apart both fail."""
    if target.alive()[0]:
        return True
    time.sleep(1.0)
    return target.alive()[0]


def _request_from(finding: Finding) -> Any:
    """The request object of a valid finding, decoded from its own bytes (content probes
    need it); None when the bytes are not a valid request."""
    case = case_of(finding.wire) if finding.valid else None
    return None if case is None else case.request


__all__ = ["replay"]
