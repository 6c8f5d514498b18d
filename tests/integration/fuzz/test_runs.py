"""kproto.tools.fuzz against real brokers: bounded runs, sequences, replay, the command line.

The brokers a run may crash are its own: a fresh Tansu child process, and librdkafka's mock
cluster in a child process (:mod:`tests.brokers.mock_process`), so that a crash the fuzzer
provokes is a ``dead`` finding in the report, not a crashed test run. A run must end with a
report; the broker then either answers a fresh connection or the report holds the ``dead``
finding with its reproducer file (the fuzzer's verdict is checked against the process).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kproto.tools.fuzz import corpus, report, sequence_seeds, sequences
from kproto.tools.fuzz.dictionary import Dictionary
from kproto.tools.fuzz.plan import learn
from kproto.tools.fuzz.values import ValueGenerator
from kproto.tools.fuzz.runner import Fuzzer, FuzzConfig
from kproto.tools.fuzz.target import Target
from tests.support.signals import interruptible
from tests.brokers import _net
from tests.brokers.mock_process import MockClusterProcess
from tests.brokers.tansu import TansuBroker

DATA = Path(__file__).resolve().parents[2] / "data" / "fuzz"
RUN_SECONDS = 4.0


@pytest.fixture
def mock_child():
    cluster = MockClusterProcess(1, [("kproto-fuzz-seed", 3)])
    yield cluster
    cluster.close()


@pytest.fixture
def fresh_tansu():
    broker = TansuBroker()
    yield broker
    broker.close()


def _cli(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kproto", "fuzz", *args], capture_output=True,
                          text=True, timeout=timeout)


def _check_run(bootstrap: str, pid: int, process_alive, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "findings"
    result = _cli("--bootstrap-server", bootstrap, "--seconds", str(RUN_SECONDS), "--seed", "3",
                  "--out", str(out), "--report", str(tmp_path / "r.json"),
                  "--report-html", str(tmp_path / "r.html"), "--broker-pid", str(pid), *extra)
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["requests"] > 0 and data["stop_reason"] in ("time bound", "broker dead")
    assert "kproto fuzz report" in result.stdout
    assert sum(data["requests_by_api_version"].values()) == data["requests"]
    assert data["strategies"]["valid"] > 0 and data["broker_api_versions"]
    assert 0 < data["field_coverage"]["covered"] <= data["field_coverage"]["fields"]
    assert sum(sum(c.values()) for c in data["findings_by_api_oracle"].values()) == \
        data["distinct_findings"] == len(data["findings"])
    html = (tmp_path / "r.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "http" not in html.split("<body>")[1][:0]
    for f in data["findings"]:
        saved = corpus.load(Path(f["file"]))
        assert saved.key == (f["api"], f["oracle"], f["signature"])
        assert f["version"] in saved.versions == f["versions"]
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    if data["broker_alive_at_end"]:
        assert process_alive() and _net.api_versions_v0_probe(host, int(port))
    else:  # the crash is a finding, with its reproducer
        assert not _net.api_versions_v0_probe(host, int(port))
        assert any(f["oracle"] == "dead" for f in data["findings"])
    return data


def test_bounded_run_against_the_mock_cluster_child(mock_child, tmp_path):
    _check_run(mock_child.bootstrap_servers, mock_child.pid, mock_child.alive, tmp_path)


def test_bounded_run_against_a_fresh_tansu(fresh_tansu, tmp_path):
    # CreateTopics with ~2^31 partitions makes Tansu allocate gigabytes before it dies
    # (docs/fuzzing.md): left out here to spare the machine the suite shares.
    _check_run(fresh_tansu.bootstrap_servers, fresh_tansu.pid,
               lambda: fresh_tansu.process.poll() is None, tmp_path,
               "--skip-api", "CreateTopics")


def test_a_sequence_seed_replays_with_its_own_answers_threaded_through(mock_child):
    host, port = mock_child.bootstrap_servers.split(",")[0].rsplit(":", 1)
    target = Target(host, int(port))
    target.fetch_api_versions()
    know = learn(target, "kproto-fuzz-")
    dictionary = Dictionary()
    recorded = sequences.start("seq.stale_generation_heartbeat", target, random.Random(1),
                               know, dictionary=dictionary)
    seed = sequence_seeds.from_run("seq.stale_generation_heartbeat", recorded)
    assert seed is not None and [s.spec.api_name for s in seed.steps][-1] == "Heartbeat"
    old_member = seed.steps[-1].request.member_id
    assert old_member and ("member_id", old_member) in seed.steps[-2].issued
    assert dictionary.contexts  # the JoinGroup answer issued an identity
    for mutations in (False, True):
        run = sequences.Run(target, random.Random(2), know, dictionary)
        sequence_seeds.replay(seed, run, lambda spec, v: ValueGenerator(
            random.Random(3), know).request(spec, v), lambda spec, req: req, dictionary,
            mutations=mutations)
        assert run.exchanges and all(e.outcome == "answer" for e in run.exchanges)
        if not mutations:  # the heartbeat names the member this replay's JoinGroup made
            joined = [a for e, a in zip(run.exchanges, run.answers) if e.api_key == 11]
            heartbeat = run.exchanges[-1].request
            assert heartbeat.member_id == joined[-1].member_id != old_member


def test_sequences_send_what_they_say(mock_child):
    host, port = mock_child.bootstrap_servers.split(",")[0].rsplit(":", 1)
    target = Target(host, int(port))
    target.fetch_api_versions()
    from kproto.tools.fuzz.runner import learn

    know = learn(target, "kproto-fuzz-")
    sent = {}
    for name in sorted(sequences.SEQUENCES):
        _, exchanges = sequences.run_sequence(name, target, random.Random(1), know)
        sent[name] = exchanges
    assert [e.api_key for e in sent["seq.sync_before_join"]] == [14]
    keys = [e.api_key for e in sent["seq.stale_generation_heartbeat"]]
    assert keys[-1] == 12 and set(keys[:-1]) == {11}
    joined = sent["seq.stale_generation_heartbeat"][-2]
    generation = type(joined.request).response_class.decode(joined.response[4:],
                                                             joined.api_version).generation_id
    assert sent["seq.stale_generation_heartbeat"][-1].request.generation_id != generation
    [commit] = sent["seq.commit_unknown_member"]
    assert commit.api_key == 8 and commit.request.member_id == "kproto-fuzz-ghost"
    cgh = sent["seq.consumer_group_epoch_jump"]
    epochs = [e.request.member_epoch for e in cgh]
    assert epochs[0] == 0
    if len(cgh) > 1:  # joined: an epoch past the one given, then leave
        first = type(cgh[0].request).response_class.decode(cgh[0].response[5:],
                                                           cgh[0].api_version,
                                                           allow_trailing=True)
        assert epochs[1] > first.member_epoch and epochs[-1] == -1
    pipe = sent["seq.pipelined"]
    assert len(pipe) >= 3 and pipe[-1].correlation_id == pipe[-2].correlation_id
    fetches = sent["seq.fetch_session_epochs"]
    assert fetches and fetches[0].request.session_epoch == 0
    if len(fetches) > 1:  # the broker has fetch sessions: an epoch out of order, then close
        assert fetches[1].request.session_epoch not in (0, 1)
        assert fetches[-1].request.session_epoch == -1
    target.close()


@pytest.mark.parametrize("name", ["tansu-offset-fetch-topics-null.json",
                                  "tansu-list-offsets-latest.json"])
def test_replay_of_a_saved_tansu_finding_fires_on_a_fresh_tansu(fresh_tansu, name):
    result = _cli("replay", str(DATA / name), "--bootstrap-server",
                  fresh_tansu.bootstrap_servers)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FIRES again" in result.stdout


def test_replay_says_when_a_finding_no_longer_fires(mock_child, tmp_path):
    # Tansu's 2-byte OffsetFetch answer: the mock answers that request properly.
    result = _cli("replay", str(DATA / "tansu-offset-fetch-topics-null.json"),
                  "--bootstrap-server", mock_child.bootstrap_servers)
    assert result.returncode == 1 and "does not fire" in result.stdout


@pytest.mark.parametrize("args,message", [
    (["--api", "Fetch,NoSuchApi"], "unknown API 'NoSuchApi'"),
    (["--versions", "17-12"], "empty version range 17-12"),
    (["--versions", "x"], "--versions wants N or LO-HI"),
    ([], "cannot reach 127.0.0.1:"),
])
def test_bad_command_line_gets_one_line_and_exit_2(args, message):
    with _net.closed_port() as port:
        result = _cli("--bootstrap-server", "127.0.0.1:{}".format(port), *args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert result.stdout == ""


def test_remote_targets_need_allow_remote():
    result = _cli("--bootstrap-server", "192.0.2.1:9092")
    assert result.returncode == 2 and "--allow-remote" in result.stderr
    assert result.stderr.count("\n") == 1


def test_an_empty_version_range_on_the_broker_is_refused(mock_child):
    result = _cli("--bootstrap-server", mock_child.bootstrap_servers, "--api", "Fetch",
                  "--versions", "900-901")
    assert result.returncode == 2 and "no API version to fuzz" in result.stderr


def test_the_same_seed_sends_the_same_requests(mock_child, monkeypatch):
    # Timestamps the generator takes from the clock ("now") are the one intended difference.
    import types

    from kproto.tools.fuzz import values
    monkeypatch.setattr(values, "time", types.SimpleNamespace(time=lambda: 1_700_000_000.0))

    def first_requests():
        config = FuzzConfig(mock_child.bootstrap_servers, seed=9, requests=30, minimise=False,
                            levels=("valid", "field", "frame"), setup=False,
                            apis=["Metadata", "ListOffsets", "FindCoordinator"])
        fuzzer = Fuzzer(config)
        sent = []
        orig = fuzzer.target.exchange

        def spy(wire, **kw):
            sent.append(wire[12:])  # after the correlation id
            return orig(wire, **kw)
        fuzzer.target.exchange = spy
        fuzzer.run()
        assert report.build(fuzzer)["requests"] == 30
        return sent
    assert first_requests() == first_requests()


def test_ctrl_c_ends_the_run_with_its_report(mock_child, tmp_path):
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "kproto", "fuzz", "--bootstrap-server",
                             mock_child.bootstrap_servers, "--seconds", "120", "--levels",
                             "valid", "--api", "Metadata,ApiVersions", "--report",
                             str(tmp_path / "r.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    try:
        # Into the run: its first progress line (on stderr) comes with the first requests;
        # a fixed sleep was too short on a loaded machine (the signal hit the imports).
        seen = []
        while True:
            line = proc.stderr.readline()
            seen.append(line)
            if not line or " req " in line:
                break
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        err = "".join(seen) + err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["stop_reason"] == "interrupted" and data["requests"] > 0
    assert "kproto fuzz report" in out
