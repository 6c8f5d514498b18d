"""``python -m kproto consume``: embedded-broker demo and --bootstrap-server mode, as a user runs it."""

from __future__ import annotations

import datetime
import json
import queue
import re
import signal
import subprocess
import sys

import pytest

from kproto.tools.consume import _text
from tests.support.signals import interruptible
from tests.threads import TestThread


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kproto", "consume", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_embedded_broker_demo_consumes_every_seeded_record():
    result = run_cli("--sample-records", "300", "--json")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 300
    seqs = sorted(int(dict(r["headers"])["seq"]) for r in rows)
    assert seqs == list(range(300))
    for r in rows:
        i = int(dict(r["headers"])["seq"])
        assert (r["key"], r["value"], r["partition"]) == ("key-%d" % i, "value-%d" % i, i % 3)
    assert "Processed a total of 300 messages" in result.stderr


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_bootstrap_server_mode_prints_what_the_producer_wrote(tansu_broker, codec):
    topic = tansu_broker.new_topic(partitions=3)
    written = tansu_broker.produce(topic, 120, codec=codec)
    result = run_cli("--bootstrap-server", tansu_broker.bootstrap_servers, "--topic", topic,
                     "--from-beginning", "--json", "--max-messages", "120", "--timeout-ms", "60000")
    assert result.returncode == 0, result.stderr
    rows = sorted((json.loads(line) for line in result.stdout.splitlines()),
                  key=lambda r: (r["partition"], r["offset"]))
    assert [(r["partition"], r["offset"]) for r in rows] == [(w.partition, w.offset) for w in written]
    for r, w in zip(rows, written):
        assert (r["topic"], r["key"], r["value"], r["timestamp"]) == (topic, _text(w.key), _text(w.value), w.timestamp)
        assert r["headers"] == [[k, _text(v)] for k, v in w.headers]
    # Null keys and values stay JSON null (not the plain output's "null" text).
    assert any(r["key"] is None for r in rows) and any(r["value"] is None for r in rows)
    # UTF-8 text is printed as it is, not as \u escapes.
    assert "ünïcode" in result.stdout and "\\u00fc" not in result.stdout
    assert result.stderr.strip().endswith("Processed a total of 120 messages")


def _console(data):
    """kafka-console-consumer's rendering of a key or value (the recipe's are UTF-8)."""
    return "null" if data is None else data.decode("utf-8")


@pytest.mark.parametrize("print_key", [True, False])
def test_plain_output_and_idle_timeout(tansu_broker, print_key):
    topic = tansu_broker.new_topic(partitions=1)
    written = tansu_broker.produce(topic, 12)  # null keys (3, 10), a null value (5), an empty one (6)
    assert any(w.key is None for w in written) and any(w.value is None for w in written)
    key = ["--print-key"] if print_key else []
    # Ended by the count, not the idle timer: that timer starts before the consumer has
    # connected, and on a loaded machine the first records can come later than 1 s.
    result = run_cli("--bootstrap-server", tansu_broker.bootstrap_servers, "--topic", topic, "--from-beginning",
                     "--max-messages", str(len(written)), "--timeout-ms", "60000", *key)
    assert result.returncode == 0, result.stderr
    expected = ["{}\t{}".format(_console(w.key), _console(w.value)) if print_key else _console(w.value)
                for w in written]
    # split("\n"), not splitlines(): the empty value must stay an (empty) line of its own.
    assert result.stdout.split("\n") == expected + [""]
    # The idle timer ends a run that has nothing to print (an empty topic).
    idle = run_cli("--bootstrap-server", tansu_broker.bootstrap_servers, "--topic", tansu_broker.new_topic(),
                   "--from-beginning", "--timeout-ms", "1000", *key)
    assert idle.returncode == 0, idle.stderr
    assert idle.stdout == "" and idle.stderr.strip().endswith("Processed a total of 0 messages")


def test_usage_errors_exit_nonzero_with_a_message(tansu_broker):
    result = run_cli("--bootstrap-server", tansu_broker.bootstrap_servers)
    assert result.returncode == 1
    assert "--topic is required" in result.stderr
    result = run_cli("--bogus-flag")
    assert result.returncode == 2  # argparse


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_mode_on_the_mock(mock_cluster, protocol):
    topic = mock_cluster.new_topic(partitions=2)
    written = mock_cluster.produce(topic, 40)
    result = run_cli("--bootstrap-server", mock_cluster.bootstrap_servers, "--topic", topic, "--group",
                     "kproto-cli-" + topic, "--from-beginning", "--json", "--max-messages", "40",
                     "--group-protocol", protocol, "--timeout-ms", "60000")
    assert result.returncode == 0, result.stderr
    rows = sorted((json.loads(line) for line in result.stdout.splitlines()),
                  key=lambda r: (r["partition"], r["offset"]))
    assert [(r["partition"], r["offset"], r["value"]) for r in rows] == [
        (w.partition, w.offset, _text(w.value)) for w in written]


def test_consumer_properties_reach_the_consumer(mock_cluster):
    # The mock, not Tansu: Tansu's ListOffsets(LATEST) is not the log end.
    topic = mock_cluster.new_topic(partitions=1)
    mock_cluster.produce(topic, 5)
    common = ("--bootstrap-server", mock_cluster.bootstrap_servers, "--topic", topic, "--from-beginning",
              "--timeout-ms", "1000")
    # A Java-style property overrides what --from-beginning chose: nothing old is printed.
    result = run_cli(*common, "--consumer-property", "auto.offset.reset=latest")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    # Ended by the count, not the 1 s idle timer: that timer starts before the consumer has
    # connected, and on a loaded machine the first records can come later than that.
    result = run_cli(*common, "--consumer-property", "max_poll_records=2", "--max-messages", "5",
                     "--timeout-ms", "60000")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 5
    result = run_cli(*common, "--consumer-property", "no.such.setting=1")
    assert result.returncode == 1
    assert "no_such_setting" in result.stderr
    result = run_cli(*common, "--consumer-property", "fetch.max.wait.ms")
    assert result.returncode == 1
    assert "KEY=VALUE" in result.stderr


def test_consumer_property_values_are_typed():
    from kproto.tools.consume import parse_consumer_properties

    assert parse_consumer_properties(["security.protocol=SASL_SSL", "fetch-max-wait-ms=50",
                                      "check_crcs=false", "sasl.plain.password=a=b"]) == {
        "security_protocol": "SASL_SSL", "fetch_max_wait_ms": 50, "check_crcs": False,
        "sasl_plain_password": "a=b"}


def test_share_group_mode_acknowledges_what_it_prints(mock_cluster):
    mock_cluster.set_sharegroup(auto_offset_reset="earliest")
    # One partition, one batch: the first poll acquires all 20 (a released record could
    # otherwise come back to the same run before the others were printed; the producer's
    # batches vary, and the mock may answer one batch per fetch).
    topic = mock_cluster.new_topic(partitions=1)
    written = mock_cluster.produce_batch(topic, 20)
    common = ("--bootstrap-server", mock_cluster.bootstrap_servers, "--topic", topic, "--share-group",
              "cli-share-" + topic, "--json")
    # The runs that must print records end by the count, not the idle timer (which starts
    # before the member has joined: on a loaded machine the first records can come later).
    # RELEASE: every record is printed and comes back, one delivery later.
    released = run_cli(*common, "--release", "--max-messages", "20", "--timeout-ms", "60000")
    assert released.returncode == 0, released.stderr
    first = [json.loads(line) for line in released.stdout.splitlines()]
    assert sorted((r["partition"], r["offset"]) for r in first) == sorted((w.partition, w.offset) for w in written)
    assert {r["delivery_count"] for r in first} == {1}
    # ACCEPT (the default): the same records, second delivery; then they are done.
    accepted = run_cli(*common, "--max-messages", "20", "--timeout-ms", "60000")
    second = [json.loads(line) for line in accepted.stdout.splitlines()]
    assert sorted((r["partition"], r["offset"]) for r in second) == sorted((w.partition, w.offset) for w in written)
    assert {r["delivery_count"] for r in second} == {2}
    nothing = run_cli(*common, "--timeout-ms", "1500")
    assert nothing.returncode == 0 and nothing.stdout == ""


def test_share_group_mode_usage_errors():
    result = run_cli("--share-group", "g", "--topic", "t")
    assert result.returncode == 1 and "--share-group needs --bootstrap-server" in result.stderr
    result = run_cli("--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--release")
    assert result.returncode == 1 and "--release and --reject need --share-group" in result.stderr


def test_iso_timestamps(mock_cluster):
    topic = mock_cluster.new_topic(partitions=1)
    written = mock_cluster.produce(topic, 3)
    result = run_cli("--bootstrap-server", mock_cluster.bootstrap_servers, "--topic", topic,
                     "--from-beginning", "--json", "--timestamp-format", "iso", "--max-messages", "3",
                     "--timeout-ms", "60000")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    expected = [datetime.datetime.fromtimestamp(w.timestamp / 1000, datetime.timezone.utc)
                for w in written]
    assert [datetime.datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")) for r in rows] \
        == expected
    assert all(r["timestamp"].endswith("Z") for r in rows)


def test_without_limits_it_reads_until_interrupted_and_reports_the_count(mock_cluster):
    """As kafka-console-consumer: no idle timeout by default; Ctrl-C (SIGINT) ends the run
    with "Processed a total of N messages" on stderr."""
    topic = mock_cluster.new_topic(partitions=1)
    written = mock_cluster.produce(topic, 7)
    proc = subprocess.Popen([sys.executable, "-m", "kproto", "consume", "--bootstrap-server",
                             mock_cluster.bootstrap_servers, "--topic", topic, "--from-beginning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    lines: queue.Queue = queue.Queue()
    reader = TestThread(target=lambda: [lines.put(line) for line in proc.stdout])
    reader.start()
    try:
        printed = [lines.get(timeout=60).rstrip("\n") for _ in written]
        assert printed == [_console(w.value) for w in written]
        assert proc.poll() is None  # every record printed, and still waiting for more
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        reader.join(60)
    err = proc.stderr.read()
    assert lines.empty()
    assert err.strip().splitlines()[-1] == "Processed a total of 7 messages", err
    assert proc.returncode == 130


def test_help_shows_every_default():
    result = subprocess.run([sys.executable, "-m", "kproto", "consume", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    options = re.split(r"\n(?=  -)", result.stdout.split("options:", 1)[1])
    helps = {block.split()[0]: " ".join(block.split()) for block in options if block.strip()}
    assert "--timeout-ms" in helps and len(helps) > 10
    for option, text in helps.items():
        if option != "-h,":
            assert "(default: " in text, text
    assert "(default: -1)" in helps["--timeout-ms"]  # wait until interrupted


@pytest.mark.parametrize("address,reason", [("127.0.0.1:{port}", "connection refused"),
                                            ("kproto-no-such-host.invalid:9092", "cannot resolve")],
                         ids=["refused", "unresolvable"])
@pytest.mark.parametrize("group", [None, "classic"])
def test_an_unreachable_bootstrap_server_is_one_error_line_with_the_cause(address, reason, group):
    # Before: 60 s, then "topic not found"; with --group, exit 0 and no error at all.
    from tests.brokers._net import closed_port

    with closed_port() as port:
        address = address.format(port=port)
        extra = ["--group", "kproto-cli-unreachable", "--group-protocol", group] if group else []
        result = run_cli("--bootstrap-server", address, "--topic", "t", *extra)
    assert result.returncode == 1, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kproto: error: NoBrokersAvailable"), result.stderr
    assert "tried {} (".format(address) in lines[0] and reason in lines[0], lines[0]
    assert result.stdout == ""
