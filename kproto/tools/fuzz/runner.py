"""The fuzzing loop: plan, learn, send, judge, shrink, save (a core over the socket shell).

Owns one run: asking the broker's ApiVersions, learning realistic names from Metadata (and
seeding a prefixed topic with multi-record batches), the plan of APIs and versions, the
choice per iteration between a valid request, a field or frame mutant and a sequence (all
from one seeded ``random.Random``), the oracles' verdicts with their probes (liveness on a
fresh connection after anything suspicious, the high watermark behind ListOffsets LATEST,
RSS; the broker's log when followed), de-duplication per API family, minimisation (of
requests, of a sequence's steps, of a crash's preceding requests) and reproducer files,
restarting a dead broker with ``--restart-cmd``, coverage feedback (the draw of an API and
level or a sequence by :mod:`~kproto.tools.fuzz.feedback`'s energy, requests mutated
from its seeds by :mod:`~kproto.tools.fuzz.tree_mutators`), the harvest of every answer
into the generator's :class:`~kproto.tools.fuzz.dictionary.Dictionary`, the progress line
and the bounds (time, requests, rate, connections). What may be sent (and the safety
lists) is :mod:`kproto.tools.fuzz.plan`'s; running one sequence (or replaying a sequence
seed) is :mod:`kproto.tools.fuzz.sequence_runs`'; sending a saved finding again is
:mod:`kproto.tools.fuzz.replay`'s.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, TextIO

from kproto.errors import FuzzTargetError
from kproto.net.config import parse_address
from kproto.tools.fuzz import corpus, mutators, oracles, schema, sequence_runs, shrink, tree_mutators
from kproto.tools.fuzz.brokerlog import LOG_SETTLE, BrokerLog
from kproto.tools.fuzz.dictionary import Dictionary
from kproto.tools.fuzz.feedback import Arm, Feedback, Seed
from kproto.tools.fuzz.corpus import Finding
from kproto.tools.fuzz.mutators import Case, make_case
from kproto.tools.fuzz.oracles import ANSWER, CLOSED, TIMEOUT, Exchange, Verdict
from kproto.tools.fuzz.plan import (BODY_KEEPING, PREFIXED_APIS, enforce_prefix, learn, resolve_plan,
                                    seed_topic, warm_coordinators)
from kproto.tools.fuzz.target import Target, listening_pid
from kproto.tools.fuzz.values import Knowledge, ValueGenerator

NOT_MINIMISED = ("dead", "rss")  # a crash is shrunk after the restart; RSS is many requests
WINDOW = 16
SEQUENCE_SHARE = 0.25
RSS_STOP = 4  # the run ends when the broker's RSS grew past this many --rss-bound-mb
PROGRESS_EVERY = 10.0  # seconds between progress lines when not on a terminal
CLEAR_EOL = "\x1b[K"
LEVEL_WEIGHTS = (("valid", 35), ("field", 25), ("frame", 25), ("sequence", 15))


@dataclass
class FuzzConfig:
    bootstrap: str
    apis: Optional[list[str]] = None
    versions: Optional[tuple[int, int]] = None
    seed: int = 0
    seconds: Optional[float] = 60.0
    requests: Optional[int] = None
    max_rps: Optional[float] = None
    out_dir: Optional[Path] = None
    broker_pid: Optional[int] = None
    rss_bound_mb: float = 256.0
    timeout: float = 6.0
    max_connections: int = 4
    prefix: str = "kproto-fuzz-"
    minimise: bool = True
    setup: bool = True
    cluster_apis: bool = False
    skip_apis: list[str] = field(default_factory=list)
    broker_log: Optional[Path] = None  # the broker's log file, followed as an oracle
    coverage: Optional[str] = None     # HOST:PORT of a JaCoCo agent in TCP-server mode
    coverage_feedback: bool = True     # seeds from coverage (False: coverage measured only)
    coverage_every: int = 16           # requests between coverage reads ...
    coverage_interval: float = 0.5     # ... and seconds at least
    probe_seconds: float = 1.0  # a liveness probe at least this often (and when suspicious)
    restart_cmd: Optional[str] = None  # brings a dead broker back; the run then goes on
    restart_timeout: float = 180.0     # seconds the broker may take to answer again
    levels: tuple[str, ...] = ("valid", "field", "frame", "sequence")
    adaptive: bool = False  # schedule by answer times (faster; --seed then not exact)
    progress: Optional[TextIO] = None


@dataclass
class RunStats:
    requests: Counter[tuple[str, Optional[int]]] = field(default_factory=Counter)  # (api, version) -> sent
    strategies: Counter[str] = field(default_factory=Counter)  # strategy -> sent
    outcomes: Counter[str] = field(default_factory=Counter)
    started: float = 0.0
    loop_started: float = 0.0
    ended: float = 0.0
    iterations: int = 0
    stop_reason: str = ""


def _isatty(out: Optional[TextIO]) -> bool:
    try:
        return out is not None and out.isatty()
    except (AttributeError, ValueError):
        return False


class Fuzzer:
    """One run against one broker; ``run()`` returns the report data."""

    def __init__(self, config: FuzzConfig, target: Optional[Target] = None) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        host, port = parse_address(config.bootstrap)
        self.target = target or Target(host, port, timeout=config.timeout,
                                       max_connections=config.max_connections,
                                       broker_pid=config.broker_pid)
        self.stats = RunStats()
        self.findings: dict[tuple[str, str, str], Finding] = {}
        self.knowledge = Knowledge(prefix=config.prefix)
        self.own = self.knowledge  # the prefixed part of what was learned (prepare() sets it)
        self.plan: list[tuple[schema.ApiSpec, list[int]]] = []
        # Values the broker issued, harvested from every answer: generator input in every
        # run (feedback on or off), so that a comparison's baseline gets them too.
        self.dictionary = Dictionary(prefix=config.prefix)
        self.gen = ValueGenerator(self.rng, self.knowledge, dictionary=self.dictionary)
        self.alive = True
        self.rss_start: Optional[int] = None
        self.rss_first: int = 0
        self.rss_stop = False
        self._last_progress = 0.0
        self.window: list[Exchange] = []  # the last WINDOW exchanges (a crash's context)
        self.latency: dict[int, float] = {}
        self.sequence_time = 0.0  # api key -> moving mean answer time (s)
        self.restarts = 0
        self.deaths: list[dict[str, Any]] = []  # each death: when, after what, restart time
        self._restart_procs: list[subprocess.Popen[bytes]] = []
        self._last_probe = 0.0
        self._last_crash: Optional[Finding] = None  # to shrink once the broker is back
        self.broker_log = BrokerLog(config.broker_log) if config.broker_log else None
        self.feedback: Optional[Feedback] = None
        if config.coverage:
            chost, cport = parse_address(config.coverage)
            self.feedback = Feedback.connect(chost, cport, self.rng,
                                             enabled=config.coverage_feedback,
                                             every=config.coverage_every,
                                             interval=config.coverage_interval, say=self._say)
        self._arm_list: Optional[list[Arm]] = None
        self._elapsed = 0.0  # the last exchange's time (coverage feedback's cost) ...
        self._outcome = TIMEOUT  # ... and how it ended
        self._plan_by_name: dict[str, tuple[schema.ApiSpec, list[int]]] = {}

    # --- setup -----------------------------------------------------------------------

    def prepare(self) -> None:
        advertised = self.target.fetch_api_versions()
        cfg = self.config
        self.plan = resolve_plan(advertised, cfg.apis, cfg.versions, cfg.cluster_apis,
                                 cfg.skip_apis)
        self._plan_by_name = {spec.api_name: (spec, versions) for spec, versions in self.plan}
        self._arm_list = None
        self._learn_state()
        self.rss_start = self.target.rss_kb()
        self.rss_first = self.rss_start or 0
        if self.broker_log is not None:
            self.broker_log.poll()  # what set-up made it log is nobody's finding
        if self.feedback is not None:
            self.feedback.read()  # what start-up and set-up ran is nobody's credit

    def _learn_state(self) -> None:
        """Names from Metadata and the seed topic (again after a restart: a broker without
        storage comes back empty)."""
        self.knowledge = learn(self.target, self.config.prefix)
        if self.config.setup:
            try:
                seed_topic(self.target, self.knowledge)
                warm_coordinators(self.target, self.knowledge)
            except (OSError, FuzzTargetError):
                pass
            self.knowledge = learn(self.target, self.config.prefix)
        self.gen.knowledge = self.knowledge
        self.own = Knowledge(prefix=self.knowledge.prefix, groups=self.knowledge.groups,
                             node_ids=self.knowledge.node_ids,
                             topics=[t for t in self.knowledge.topics
                                     if t.name.startswith(self.knowledge.prefix)])

    # --- the loop --------------------------------------------------------------------

    def run(self) -> "RunStats":
        cfg = self.config
        self.stats.started = time.monotonic()
        try:
            self.prepare()
        except BaseException:
            self.target.close()
            raise
        self.stats.loop_started = time.monotonic()  # the rate is the loop's, set-up apart
        try:
            deadline = None if cfg.seconds is None else self.stats.started + cfg.seconds
            while True:
                if deadline is not None and time.monotonic() >= deadline:
                    self.stats.stop_reason = "time bound"
                    break
                if cfg.requests is not None and sum(self.stats.requests.values()) >= cfg.requests:
                    self.stats.stop_reason = "request bound"
                    break
                if not self.alive:
                    if cfg.restart_cmd and self.deaths and self.restart():
                        crash = self._last_crash
                        if cfg.minimise and crash is not None and len(crash.steps) > 1:
                            self._last_crash = None
                            shrink.shrink_crash(self, crash)
                        continue
                    self.stats.stop_reason = "broker dead" + (
                        " (restart failed)" if cfg.restart_cmd else "")
                    break
                if self.rss_stop:
                    self.stats.stop_reason = "broker RSS past {}x --rss-bound-mb".format(RSS_STOP)
                    break
                self.step()
                self._pace()
                self._progress()
        except KeyboardInterrupt:
            self.stats.stop_reason = "interrupted"
        finally:
            self.stats.ended = time.monotonic()
            if self.alive and not self.target.alive()[0] and self.window:
                last = self.window[-1]  # died after the last good probe: blame the last
                if last.api_key in schema.apis():
                    spec = schema.api(last.api_key)
                    case = make_case(spec, last.api_version or 0,
                                     last.request if last.request is not None else
                                     schema.class_of(spec.module, spec.root)(), 0)
                    self._check_alive(last, case, None, "the end of the run")
            if self.alive:
                self.alive = self.target.alive()[0]
            if self.feedback is not None:
                self.feedback.read()  # the last batch's coverage
                self.feedback.close()
            self.target.close()
            self._progress(final=True)
        return self.stats

    def _pace(self) -> None:
        if not self.config.max_rps:
            return
        sent = sum(self.stats.requests.values())
        due = self.stats.started + sent / self.config.max_rps
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def _progress(self, final: bool = False) -> None:
        """One line kept up to date on a terminal (rewritten in place, cleared to its end);
        elsewhere (a log file, a pipe) a whole line every PROGRESS_EVERY seconds."""
        out = self.config.progress
        now = time.monotonic()
        tty = _isatty(out)
        if out is None or (not final and now - self._last_progress <
                           (1.0 if tty else PROGRESS_EVERY)):
            return
        self._last_progress = now
        elapsed = max(now - self.stats.started, 1e-9)
        loop = max(now - (self.stats.loop_started or self.stats.started), 1e-9)
        sent = sum(self.stats.requests.values())
        line = "kproto fuzz: {:5.0f}s {:7d} req {:6.0f}/s {:3d} findings {:5d} conns " \
            "broker {}".format(elapsed, sent, sent / loop, len(self.findings),
                               self.target.connections_opened,
                               "alive" if self.alive else "DEAD")
        if self.restarts:
            line += " ({} restarts)".format(self.restarts)
        if tty:
            out.write("\r" + line + CLEAR_EOL + ("\n" if final else ""))
        else:
            out.write(line + "\n")
        out.flush()

    def _say(self, text: str) -> None:
        """A line of its own above the progress line."""
        out = self.config.progress
        if out is not None:
            out.write(("\r" + CLEAR_EOL if _isatty(out) else "") + text + "\n")
            out.flush()

    def _arms(self) -> list[Arm]:
        """What coverage feedback chooses among: each API at each request level, and each
        sequence."""
        if self._arm_list is None:
            levels = [lv for lv in ("valid", "field", "frame") if lv in self.config.levels]
            self._arm_list = [("req", spec.api_name, lv) for spec, _ in self.plan
                              for lv in levels]
            if "sequence" in self.config.levels:
                self._arm_list += [("seq", name, "") for name in sequence_runs.names(self)]
        return self._arm_list

    def step(self) -> None:
        rng = self.rng
        self.stats.iterations += 1
        fb = self.feedback
        arm = fb.choose(self._arms()) if fb is not None else None
        if arm is not None and arm[0] == "seq":
            if not self.config.adaptive or self.sequence_time <= SEQUENCE_SHARE * (
                    time.monotonic() - self.stats.started):
                sequence_runs.run(self, arm[1])
                return
            arm = None
        if arm is not None:  # coverage feedback chose the API and the level
            spec, versions = self._plan_by_name[arm[1]]
            level = arm[2]
        else:
            if self.config.adaptive:
                # Slow APIs (a SyncGroup Tansu holds for 5 s) are drawn less often, never
                # never; the draw then depends on timing, so --seed no longer replays the
                # run exactly.
                weights = [1.0 / (0.02 + self.latency.get(s.api_key, 0.0))
                           for s, _ in self.plan]
                spec, versions = rng.choices(self.plan, weights)[0]
            else:
                spec, versions = rng.choice(self.plan)
            levels = [(lv, w) for lv, w in LEVEL_WEIGHTS if lv in self.config.levels]
            level = rng.choices([lv for lv, _ in levels], [w for _, w in levels])[0]
        version = rng.choice(versions)
        if level == "sequence":
            # Sequences wait on group joins and sessions: adaptive runs give them at most a
            # quarter of the run's time, so that single requests keep their rate.
            names = sequence_runs.names(self)
            elapsed = time.monotonic() - self.stats.started
            if names and (not self.config.adaptive or
                          self.sequence_time <= SEQUENCE_SHARE * elapsed):
                sequence_runs.run(self, rng.choice(names))
                return
            level = "valid" if "valid" in self.config.levels else level
            if level == "sequence":
                return
        # Coverage feedback: start, half of the time, from a seed of this API (a request
        # that reached new code), changed structurally: the same frame, valid, elsewhere.
        seed = fb.pick(spec.api_name) if fb is not None and arm is not None else None
        if seed is not None and rng.random() < 0.8:
            version = seed.version if seed.version in versions else version
        prefixed = spec.api_name in PREFIXED_APIS
        gen = self.gen
        if prefixed:
            gen.knowledge = self.own
        try:
            request = gen.request(spec, version)
        finally:
            gen.knowledge = self.knowledge
        if seed is not None and fb is not None:
            other = fb.other(spec.api_name, seed)
            request, _ = tree_mutators.mutate(seed.request, request,
                                               other.request if other else None, rng,
                                               self.dictionary)
        if prefixed:
            request = enforce_prefix(request, self.own, self.dictionary.issued_strings())
        try:
            case = make_case(spec, version, request, self.target.next_correlation_id())
        except Exception:
            if seed is None:
                return  # enforce_prefix made a value too long for its field: skip it
            try:  # a mutation the field's type cannot hold: the seed as it is
                case = make_case(spec, version, seed.request, self.target.next_correlation_id())
            except Exception:
                return
        if seed is not None:
            # A tree mutation may set a field this version does not carry (a donor of
            # another version): the oracles must judge what went on the wire.
            try:
                case.request = type(case.request).decode(case.body, version)
            except Exception:
                return
        if level == "valid":
            mutant = None
        else:
            table = mutators.FIELD_STRATEGIES if level == "field" else mutators.FRAME_STRATEGIES
            names = sorted(n for n in table if not prefixed or n in BODY_KEEPING)
            mutant = table[rng.choice(names)](case, rng) if names else None
        self._send(case, mutant, ("req", spec.api_name, level))

    def _send(self, case: Case, mutant: Optional[mutators.Mutant],
              arm: Optional[Arm] = None) -> None:
        spec, version = case.spec, case.version
        self._elapsed, self._outcome = 0.0, TIMEOUT
        try:
            self._exchange(case, mutant)
        finally:
            if self.feedback is not None:  # the exchange's time, not the shrinking's
                # A request that waited out the bound is no seed: its mutants would wait
                # too, and a wait is no work.
                self.feedback.note(arm or ("req", spec.api_name, "valid" if mutant is None
                                           else mutant.level), (spec.api_name,),
                                   self._elapsed, None if self._outcome == TIMEOUT
                                   else Seed(spec, version, case.request, 0.0))

    def _exchange(self, case: Case, mutant: Optional[mutators.Mutant]) -> None:
        spec, version = case.spec, case.version
        self.stats.requests[(spec.api_name, version)] += 1
        strategy = "valid" if mutant is None else mutant.strategy
        self.stats.strategies[strategy] += 1
        try:
            if mutant is None:
                ex = self.target.send_case(case)
            else:
                ex = self.target.exchange(mutant.wire, valid=False,
                                          expects_answer=mutant.expects_answer,
                                          strategy=strategy, request=case.request)
        except (OSError, FuzzTargetError) as exc:
            self._check_alive(None, case, mutant, str(exc))
            return
        self.stats.outcomes[ex.outcome] += 1
        self._elapsed, self._outcome = ex.elapsed, ex.outcome
        old = self.latency.get(spec.api_key)
        self.latency[spec.api_key] = ex.elapsed if old is None else 0.8 * old + 0.2 * ex.elapsed
        verdicts = self.verdicts(ex)
        self.window.append(ex)
        del self.window[:-WINDOW]
        # Every answer proves the broker alive, and after a close the next request's fresh
        # connection does: a probe (a connection of its own) goes after an exchange that
        # ended without an answer where one was due, after a verdict, and every
        # probe_seconds (RSS too). A death is then pinned on the first exchange after the
        # last answer (the window keeps the ones before it).
        suspicious = (ex.outcome == TIMEOUT or bool(verdicts) or
                      (ex.outcome == CLOSED and mutant is None))
        if suspicious or time.monotonic() - self._last_probe >= self.config.probe_seconds:
            if not self._check_alive(ex, case, mutant, ex.outcome):
                return
        for verdict in verdicts:
            self._record(verdict, ex, case, mutant)

    def verdicts(self, ex: Exchange, settle: float = 0.0) -> list[Verdict]:
        """Every verdict on one exchange, probes included (hang, ListOffsets LATEST), and
        what the broker logged meanwhile (waiting up to ``settle`` s for it; a little
        anyway after an exchange that ended oddly: Kafka logs, then answers or closes)."""
        answer, out = oracles.evaluate(ex)
        # A mutant's tree is not what went on the wire: its answer's values, not its names.
        self.dictionary.harvest(ex.request if ex.valid else None, answer)
        if self.broker_log is not None:
            odd = ex.outcome != ANSWER or any(v.oracle == "unknown_server_error" for v in out)
            logged = self.broker_log.poll(max(settle, LOG_SETTLE if odd else 0.0))
            out = oracles.with_broker_log(ex, out, logged)
        if ex.valid and ex.outcome == TIMEOUT:
            if self.target.alive()[0]:
                out.append(oracles.hang(self.target.timeout))
        for topic, partition, latest in oracles.latest_offsets(ex, answer):
            hw = self.target.high_watermark(topic, partition)
            if hw is not None:
                v = oracles.latest_below_high_watermark(topic, partition, latest, hw)
                if v is not None:
                    out.append(v)
        return out

    def _check_alive(self, ex: Optional[Exchange], case: Case,
                     mutant: Optional[mutators.Mutant], detail: str) -> bool:
        self._last_probe = time.monotonic()
        alive, why = self.target.alive()
        rss = self.target.rss_kb()
        if rss is not None and self.rss_start is not None:
            bound = int(self.config.rss_bound_mb * 1024)
            if rss - self.rss_start > bound and ex is not None:
                self._record(oracles.rss(self.rss_start, rss, bound), ex, case, mutant)
                self.rss_start = rss  # report the next growth past the bound again
            if rss - self.rss_first > RSS_STOP * bound:
                self.rss_stop = True  # spare the machine the broker shares with us
        if alive:
            return True
        time.sleep(1.0)
        if self.target.alive()[0]:
            return True
        self.alive = False
        ex = ex or Exchange(case.wire if mutant is None else mutant.wire, mutant is None,
                            CLOSED, None, case.request,
                            "valid" if mutant is None else mutant.strategy)
        if not self.window or self.window[-1] is not ex:
            self.window.append(ex)
        # The suspect: the first exchange after the last one the broker answered.
        answered = [i for i, e in enumerate(self.window) if e.outcome == ANSWER]
        start = answered[-1] + 1 if answered else 0
        suspect = self.window[min(start, len(self.window) - 1)]
        gone = self.target.process_exists()
        verdict = oracles.dead("{} after {}{}".format(
            why, "a valid request" if suspect.strategy == "valid" else suspect.strategy,
            "; process exited" if gone is False else ""))
        before = [e.wire for e in self.window[:self.window.index(suspect)]]
        self._record_exchange(verdict, suspect, before)
        self.deaths.append({"after_s": round(time.monotonic() - self.stats.started, 3),
                            "api_key": suspect.api_key, "api_version": suspect.api_version,
                            "strategy": suspect.strategy, "detail": why})
        return False

    def _record_exchange(self, verdict: Verdict, ex: Exchange, before: list[bytes]) -> None:
        """A finding from an exchange alone (a death pinned on an earlier request)."""
        if ex.api_key not in schema.apis():
            return
        level = ("valid" if ex.strategy == "valid" else "sequence"
                 if ex.strategy.startswith("seq.") else ex.strategy.split(".")[0])
        finding = self._new_finding(verdict, ex, schema.api(ex.api_key), ex.api_version or 0,
                                    ex.strategy, level, "")
        if finding is None:
            return
        finding.steps = before + [ex.wire]
        if verdict.oracle == "dead":
            self._last_crash = finding
        self._finish(finding, ex)

    def restart(self) -> bool:
        """Run --restart-cmd and wait until the broker answers again (ApiVersions, then its
        state: the seed topic); False when it does not within restart_timeout."""
        cfg = self.config
        assert cfg.restart_cmd is not None
        self._say("kproto fuzz: broker dead; restarting it with: " + cfg.restart_cmd)
        self.target.close()
        started = time.monotonic()
        # Its own session and no terminal: the command may be the broker itself, which then
        # outlives the run, or a script that starts it and returns.
        proc = subprocess.Popen(cfg.restart_cmd, shell=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        self._restart_procs.append(proc)
        while time.monotonic() - started < cfg.restart_timeout:
            if self.target.alive(attempts=1, timeout=1.0)[0]:
                break
            if proc.poll() not in (None, 0):
                break  # the command failed
            time.sleep(0.5)
        else:
            return False
        try:
            self.target.fetch_api_versions()
        except FuzzTargetError:
            return False
        self.restarts += 1
        self.alive = True
        self.window.clear()
        if cfg.broker_pid is not None:
            pid = listening_pid(self.target.port)
            if pid is not None:
                self.target.broker_pid = pid
        self.rss_start = self.target.rss_kb()
        self.rss_first = self.rss_start or 0
        self._learn_state()
        self.deaths[-1]["restart_s"] = round(time.monotonic() - started, 3)
        self._say("kproto fuzz: broker answers again after {:.1f} s".format(
            time.monotonic() - started))
        return True

    # --- findings --------------------------------------------------------------------

    def _new_finding(self, verdict: Verdict, ex: Exchange, spec: schema.ApiSpec, version: int,
                     strategy: str, level: str, note: str) -> Optional[Finding]:
        key = (spec.api_name, verdict.oracle, verdict.signature)
        known = self.findings.get(key)
        if known is not None:  # the same bug (on this version or another of the family)
            known.count += 1
            if version not in known.versions:
                known.versions = sorted(known.versions + [version])
                if self.config.out_dir is not None and known.file is not None:
                    corpus.save(known, self.config.out_dir)
            return None
        f = Finding(api=spec.api_name, api_key=spec.api_key, version=version,
                    oracle=verdict.oracle, signature=verdict.signature, message=verdict.message,
                    strategy=strategy, level=level, wire=ex.wire, valid=ex.valid, note=note,
                    request=corpus.request_tree(ex.request), response=ex.response,
                    seed=self.config.seed, iteration=self.stats.iterations,
                    found_after_s=round(time.monotonic() - self.stats.started, 3),
                    original_size=len(ex.wire), extra=dict(verdict.extra),
                    broker_api_versions=dict(self.target.api_versions))
        self.findings[key] = f
        return f

    def _record(self, verdict: Verdict, ex: Exchange, case: Case,
                mutant: Optional[mutators.Mutant], before: Optional[list[bytes]] = None
                ) -> None:
        level = "valid" if mutant is None else mutant.level
        strategy = "valid" if mutant is None else mutant.strategy
        note = "" if mutant is None else mutant.note
        finding = self._new_finding(verdict, ex, case.spec, case.version, strategy, level, note)
        if finding is None:
            return
        if before:
            finding.steps = before + [ex.wire]  # the last requests: a crash may need them
        if self.config.minimise and verdict.oracle not in NOT_MINIMISED and self.alive and \
                strategy != "frame.size_lie":
            shrink.minimise_request(self, finding, case, ex)
        self._finish(finding, ex)

    def _finish(self, finding: Finding, ex: Exchange) -> None:
        if self.config.out_dir is not None:
            corpus.save(finding, self.config.out_dir)
        self._say("kproto fuzz: finding {} v{} {}: {}".format(
            finding.api, finding.version, finding.oracle, finding.message[:160]))


__all__ = ["Fuzzer", "FuzzConfig", "RunStats"]
