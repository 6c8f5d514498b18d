"""The broker fixtures themselves: seeding writes what it says, marker skips, lifecycle."""

from __future__ import annotations

import os

import pytest

from tests.brokers import seeding
from tests.brokers._net import wait_until
from tests.brokers.base import BROKER_CAPABILITIES

# The bytes a broker serves: Tansu is a second implementation of them (tests/conftest.py).
pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka", "tansu")


def _read_back(bootstrap: str, topic: str, partitions: list[int], expected: int,
               isolation: str = "read_uncommitted"):
    """Read a topic with confluent-kafka's consumer (the peer implementation)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kproto-readback",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "broker.address.family": "v4", "log_level": 3})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        got = []
        idle = 0
        # Stop after `expected` records or after 20 empty polls (never loops forever).
        while len(got) < expected and idle < 20:
            msg = consumer.poll(0.5)
            if msg is None:
                idle += 1
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", seeding.CODECS)
def test_produce_writes_the_recipe_with_each_codec(broker, codec):
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 12, codec=codec)
    assert [r.index for r in sorted(written, key=lambda r: r.index)] == list(range(12))
    assert {r.partition for r in written} == {0, 1}
    for partition in (0, 1):
        offsets = [r.offset for r in written if r.partition == partition]
        assert offsets == list(range(len(offsets)))
    got = _read_back(broker.bootstrap_servers, topic, [0, 1], len(written))
    by_pos = {(m.partition(), m.offset()): m for m in got}
    assert len(by_pos) == len(written)
    for r in written:
        m = by_pos[(r.partition, r.offset)]
        key, value, headers = seeding.record_for(r.index)
        assert (r.key, r.value, r.headers) == (key, value, headers)
        assert m.key() == r.key and m.value() == r.value
        assert tuple(m.headers() or ()) == r.headers
        assert m.timestamp()[1] == r.timestamp


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_produce_batch_writes_exactly_one_batch_of_the_recipe(broker, codec):
    from tests.brokers import raw

    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 3, partitions=[1])  # the batch goes after what is there
    written = broker.produce_batch(topic, 20, partition=1, codec=codec, start_index=3)
    assert [(w.partition, w.offset, w.index) for w in written] == [(1, i, i) for i in range(3, 23)]
    first = raw.batch_headers(broker.raw_fetch(topic, 1, 3))[0]
    assert (first.base_offset, first.last_offset_delta, first.codec) == (3, 19, seeding.CODEC_IDS[codec])
    got = {m.offset(): m for m in _read_back(broker.bootstrap_servers, topic, [1], 23)}
    for r in written:
        assert (r.key, r.value, r.headers) == seeding.record_for(r.index)
        m = got[r.offset]
        assert (m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]) == (
            r.key, r.value, r.headers, r.timestamp)


def test_record_recipe_covers_the_awkward_cases():
    records = [seeding.record_for(i) for i in range(40)]
    assert any(k is None for k, _, _ in records)
    assert any(v is None for _, v, _ in records)
    assert any(v == b"" for _, v, _ in records)
    assert any(len(h) == 2 for _, _, h in records)
    assert any(hv is None for _, _, h in records for _, hv in h)
    assert records == [seeding.record_for(i) for i in range(40)]


@pytest.mark.needs("transactions")
def test_transactions_commit_and_abort(broker):
    topic = broker.new_topic(partitions=1)
    txns = broker.produce_transactions(topic, committed=4, aborted=3)
    assert [r.offset for r in txns.committed] == [0, 1, 2, 3]
    # The commit marker takes offset 4.
    assert [r.offset for r in txns.aborted] == [5, 6, 7]
    committed = _read_back(broker.bootstrap_servers, topic, [0], 4, "read_committed")
    assert [m.value() for m in committed] == [r.value for r in txns.committed]
    everything = _read_back(broker.bootstrap_servers, topic, [0], 7)
    assert [m.offset() for m in everything] == [0, 1, 2, 3, 5, 6, 7]


@pytest.mark.needs("kip848", "offset_for_leader_epoch")
def test_needs_marker_selects_capable_brokers(broker):
    assert {"kip848", "offset_for_leader_epoch"} <= broker.capabilities
    assert broker.name != "tansu"


@pytest.mark.needs("fault_injection")
def test_fault_injection_gets_a_private_mock_cluster(broker, mock_cluster):
    assert broker.name == "mock"
    assert broker is not mock_cluster
    assert broker.bootstrap_servers != mock_cluster.bootstrap_servers


def test_capability_table_names_are_known():
    from tests.brokers.base import CAPABILITIES

    for caps in BROKER_CAPABILITIES.values():
        assert caps <= set(CAPABILITIES)


def test_tansu_leaves_nothing_behind_and_stops_by_pid():
    from tests.brokers.tansu import TansuBroker

    b = TansuBroker()
    pid = b.pid
    # Its working directory is already gone: it can write nothing anywhere we would
    # have to clean up.
    assert not os.path.exists(os.readlink("/proc/{}/cwd".format(pid)).replace(" (deleted)", ""))
    b.close()
    # The pid is reaped: no such process any more (or a different, unrelated one).
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_mock_cluster_close_releases_its_ports(mock_cluster_factory):
    import socket

    cluster = mock_cluster_factory(2)
    addresses = cluster.addresses
    assert len(addresses) == 2 and all(h == "127.0.0.1" for h, _ in addresses)
    socket.create_connection(addresses[0], timeout=2).close()
    cluster.close()
    with pytest.raises(OSError):
        socket.create_connection(addresses[0], timeout=2).close()


def test_tansu_dies_with_a_killed_parent():
    import subprocess
    import sys

    code = ("import os; from tests.brokers.tansu import TansuBroker\n"
            "b = TansuBroker(); print(b.pid, flush=True); os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    pid = int(out.stdout.split()[0])
    assert wait_until(lambda: _gone(pid), timeout=10)


def _gone(pid: int) -> bool:
    """The process is dead (reaped, or a zombie awaiting reaping by whoever adopted it)."""
    try:
        with open("/proc/{}/stat".format(pid)) as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_needs_marker_skips_with_reasons_and_rejects_unknown_names(pytester):
    pytester.makeconftest("from tests.conftest import *\n")
    pytester.makepyfile(test_inner='''
import pytest

@pytest.mark.needs("kip848")
def test_group(broker):
    assert broker.name == "mock"

@pytest.mark.needs("no_such_capability")
def test_typo(broker):
    pass
''')
    result = pytester.runpytest("--brokers=mock,tansu", "-rs")
    result.assert_outcomes(passed=1, skipped=1, errors=2)
    result.stdout.fnmatch_lines(["*tansu lacks kip848*"])
    result.stdout.fnmatch_lines(["*unknown capability*no_such_capability*"])


def test_docker_absence_is_a_reason_not_a_crash(monkeypatch):
    from tests.brokers._net import closed_port
    from tests.brokers.apache import docker_unavailable_reason

    # Nothing listens on this port, so no Docker engine can answer there.
    with closed_port() as port:
        monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:{}".format(port))
        reason = docker_unavailable_reason()
    assert reason is not None and reason.startswith("no Docker engine reachable")


def test_a_broker_that_cannot_start_fails_loudly(pytester):
    # The Tansu binary replaced by one that exits at once, the librdkafka path by one
    # that does not exist: the tests using those brokers error (they never skip), and the
    # error says why.
    # (pytester runs in this process: the patches are undone after the inner test.)
    pytester.makeconftest('''
from pathlib import Path

import pytest

import kproto.tools.embedded
import tests.brokers.mock_cluster as mock_module
from tests.conftest import *


@pytest.fixture(autouse=True)
def broken_brokers(monkeypatch):
    monkeypatch.setattr(kproto.tools.embedded, "tansu_binary", lambda: Path("/bin/false"))
    monkeypatch.setattr(mock_module, "_lib", None)
    monkeypatch.setattr(mock_module, "library_path", lambda: "/nonexistent/librdkafka.so.1")
''')
    pytester.makepyfile(test_inner='''
def test_on_any_broker(broker):
    pass
''')
    result = pytester.runpytest("--brokers=mock,tansu", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*BrokerStartError*tansu did not start after 3 attempt*",
                                 "*tansu on port * exited with 1*"])
    result.stdout.fnmatch_lines(["*MockClusterError: cannot load librdkafka from "
                                 "/nonexistent/librdkafka*"])


def test_kafka_bootstrap_env_runs_the_apache_tests_on_a_running_broker(pytester, monkeypatch,
                                                                       tansu_broker):
    # KPROTO_KAFKA_BOOTSTRAP pointed at the session's Tansu: the apache_kafka tests run on
    # it, its capabilities come from its ApiVersions answer once reached (Tansu has no
    # ConsumerGroupHeartbeat: a kip848 test skips after it answered), and a test needing a
    # broker the session started skips.
    monkeypatch.setenv("KPROTO_KAFKA_BOOTSTRAP", tansu_broker.bootstrap_servers)
    pytester.makeconftest("from tests.conftest import *\n")
    pytester.makepyfile(test_inner='''
import pytest

from kproto import KafkaConsumer, TopicPartition

pytestmark = pytest.mark.broker_kinds("apache_kafka")


def test_reads_what_was_written(broker):
    assert broker.name == "apache_kafka"
    assert "create_topics_api" in broker.capabilities and "kip848" not in broker.capabilities
    topic = broker.new_topic(partitions=2)
    written = broker.produce(topic, 10)
    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in (0, 1)])
        consumer.seek_to_beginning()
        got = set()
        for _ in range(200):
            for records in consumer.poll(100).values():
                got.update((r.partition, r.offset, r.value) for r in records)
            if len(got) == len(written):
                break
    assert got == {(w.partition, w.offset, w.value) for w in written}


@pytest.mark.needs("fresh_broker")
def test_fresh(broker):
    pass


@pytest.mark.needs("kip848")
def test_kip848(broker):
    pass
''')
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*apache_kafka lacks fresh_broker*"])
    result.stdout.fnmatch_lines(["*apache_kafka lacks kip848*"])


def test_kafka_home_distribution_is_formatted_started_and_stopped_by_group(tmp_path):
    # No Kafka distribution is reachable here, so this one is a stand-in: its
    # kafka-storage.sh records how it was called, and its kafka-server-start.sh runs Tansu
    # on the PLAINTEXT port of the server.properties it was given, as a child of the
    # script (not exec'd): only stopping the whole process group stops it.
    from kproto.tools.embedded import tansu_binary
    from tests.brokers.apache import LocalKafka

    home = tmp_path / "kafka"
    (home / "bin").mkdir(parents=True)
    storage = home / "bin" / "kafka-storage.sh"
    storage.write_text('#!/bin/sh\n'
                       'if [ "$1" = random-uuid ]; then echo q1Sh-9_ISia_zwGINzRvyQ; exit 0; fi\n'
                       'echo "$@" > "{0}/format-args"\n'.format(home))
    start = home / "bin" / "kafka-server-start.sh"
    start.write_text('#!/bin/sh\n'
                     'cp "$1" "{0}/server.properties"\n'
                     'port=$(sed -n "s|^listeners=PLAINTEXT://127.0.0.1:\\([0-9]*\\),.*|\\1|p" "$1")\n'
                     '"{1}" broker --listener-url tcp://127.0.0.1:$port '
                     '--advertised-listener-url tcp://127.0.0.1:$port '
                     '--storage-engine memory://tansu/ &\n'
                     'echo $! > "{0}/child.pid"\n'
                     'wait\n'.format(home, tansu_binary()))
    for script in (storage, start):
        script.chmod(0o755)
    kafka = LocalKafka(str(home), startup_timeout=60)
    try:
        config = dict(line.split("=", 1) for line in
                      (home / "server.properties").read_text().splitlines())
        args = (home / "format-args").read_text().split()
        workdir = kafka._dir
        topic = kafka.new_topic(partitions=2)
        assert [w.partition for w in kafka.produce(topic, 4)] == [0, 0, 1, 1]
    finally:
        kafka.close()
    assert args[:3] == ["format", "-t", "q1Sh-9_ISia_zwGINzRvyQ"] and "--standalone" not in args
    assert args[args.index("-c") + 1].startswith(workdir)
    assert config["process.roles"] == "broker,controller"
    assert config["listeners"].startswith("PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:"
                                          .format(kafka.port))
    assert config["controller.quorum.voters"] == "1@" + config["listeners"].split("//")[-1]
    assert config["auto.create.topics.enable"] == "false"
    assert config["group.initial.rebalance.delay.ms"] == "0"
    assert "fresh_broker" in kafka.capabilities and "kip848" not in kafka.capabilities
    child = int((home / "child.pid").read_text())
    assert wait_until(lambda: _gone(child), timeout=10)
    assert not os.path.exists(workdir)
