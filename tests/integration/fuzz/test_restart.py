"""A run that outlives its broker: ``--restart-cmd`` against a broker that dies mid-run.

The broker is librdkafka's mock cluster in a child process behind a proxy on a fixed port
(the mock picks its own ports; the proxy is the address the run knows). The child is
killed once the run has sent some requests; ``--restart-cmd`` is a shell command that asks
the test (by a flag file) for a new child, which the proxy then forwards to, as a service
manager would start a broker again on its old address.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.brokers import _net
from tests.brokers.mock_process import MockClusterProcess
from tests.brokers.proxy import BrokerProxy
from tests.threads import TestThread

SEED = [("kproto-fuzz-seed", 3)]


def _address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def test_the_run_records_the_death_restarts_the_broker_and_goes_on(tmp_path):
    children = [MockClusterProcess(1, SEED)]
    proxy = BrokerProxy(_address(children[0].bootstrap_servers))
    flag = tmp_path / "restart-wanted"
    stop = False
    killed_at: list[int] = []

    def supervise() -> None:
        # kill the first child once the run is under way, then serve restart requests
        while not stop:
            if not killed_at and len(proxy.requests()) >= 40:
                killed_at.append(len(proxy.requests()))
                os.kill(children[0].pid, signal.SIGKILL)
                children[0].process.wait()
            if flag.exists():
                flag.unlink()
                children.append(MockClusterProcess(1, SEED))
                proxy.upstream = _address(children[-1].bootstrap_servers)
            time.sleep(0.05)

    watcher = TestThread(target=supervise)
    watcher.start()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "kproto", "fuzz", "--bootstrap-server",
             proxy.bootstrap_servers, "--seconds", "8", "--seed", "5", "--levels", "valid",
             "--api", "Metadata,ListOffsets,Fetch,ApiVersions", "--restart-cmd",
             "touch {}".format(flag), "--restart-timeout", "60",
             "--report", str(tmp_path / "r.json"), "--out", str(tmp_path / "out")],
            capture_output=True, text=True, timeout=120)
        stop = True
        watcher.join(30)
        assert result.returncode == 0, result.stderr
        data = json.loads((tmp_path / "r.json").read_text())
        assert killed_at and len(children) == 2
        assert data["restarts"] == 1 and len(data["deaths"]) == 1
        assert data["deaths"][0]["restart_s"] > 0
        [dead] = [f for f in data["findings"] if f["oracle"] == "dead"]
        assert Path(dead["file"]).exists()
        # the run went on against the new child
        assert len(proxy.requests()) > killed_at[0] + 10
        assert data["stop_reason"] == "time bound" and data["broker_alive_at_end"]
        assert _net.api_versions_v0_probe(*_address(proxy.bootstrap_servers))
        assert "restarting it with: touch" in result.stderr
    finally:
        stop = True
        proxy.close()
        for child in children:
            child.close()


def test_a_crash_is_shrunk_to_the_request_that_causes_it(tmp_path):
    # librdkafka's mock dies on a ConsumerGroupHeartbeat v1 whose regex is null (found by
    # the fuzzer, docs/fuzzing.md): three harmless requests before it are left out.
    from kproto.tools.fuzz import schema, shrink
    from kproto.tools.fuzz.corpus import Finding
    from kproto.tools.fuzz.mutators import make_case
    from kproto.tools.fuzz.runner import Fuzzer, FuzzConfig
    from kproto.messages import ApiVersionsRequest, ConsumerGroupHeartbeatRequest

    children = [MockClusterProcess(1, SEED)]
    proxy = BrokerProxy(_address(children[0].bootstrap_servers))
    flag = tmp_path / "restart-wanted"
    stop = False

    def supervise() -> None:
        while not stop:
            if flag.exists():
                flag.unlink()
                children.append(MockClusterProcess(1, SEED))
                proxy.upstream = _address(children[-1].bootstrap_servers)
            time.sleep(0.05)

    watcher = TestThread(target=supervise)
    watcher.start()
    try:
        fuzzer = Fuzzer(FuzzConfig(proxy.bootstrap_servers, restart_cmd="touch {}".format(flag),
                                   restart_timeout=60, seconds=None, out_dir=tmp_path / "out"))
        fuzzer.prepare()
        harmless = [make_case(schema.api(18), 3, ApiVersionsRequest(
            client_software_name="x", client_software_version="1"), i).wire for i in range(3)]
        killer = make_case(schema.api(68), 1, ConsumerGroupHeartbeatRequest(
            group_id="kproto-fuzz-g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000,
            subscribed_topic_names=[], subscribed_topic_regex=None, topic_partitions=[]),
            9).wire
        finding = Finding(api="ConsumerGroupHeartbeat", api_key=68, version=1, oracle="dead",
                          signature="unreachable", message="", strategy="valid", level="valid",
                          wire=killer, valid=True, steps=harmless + [killer])
        shrink.shrink_crash(fuzzer, finding)
        assert finding.steps == [killer] and finding.wire == killer
        assert fuzzer.restarts >= 1 and len(children) == 1 + fuzzer.restarts
        assert finding.minimised["steps_before"] == 4 and finding.minimised["steps_after"] == 1
        assert _net.api_versions_v0_probe(*_address(proxy.bootstrap_servers))
        fuzzer.target.close()
    finally:
        stop = True
        watcher.join(30)
        proxy.close()
        for child in children:
            child.close()
