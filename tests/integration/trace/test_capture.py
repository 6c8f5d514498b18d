"""``kproto trace read``: captures tcpdump made here, on loopback, of real clients and brokers.

kproto and librdkafka (confluent-kafka) read a topic, in a group, from the mock cluster,
Tansu and Apache Kafka 4.4 while tcpdump captures the brokers' ports; the capture is decoded with every request
paired to its response (only a request the client gave up on at close may stay
unanswered), nothing undecodable or skipped, and on the mock exactly the requests the
brokers' own tracking saw. Then the capture as a user reads it (the CLI: lines in time
order, JSON lines, the page), in Linux cooked framings (``-i any``), a capture that
starts while a consumer is mid-conversation (resynchronised on the next frame), and a TLS
connection (reported as encrypted).
"""

from __future__ import annotations

import collections
import json
import re
import shutil
import ssl
import subprocess
import sys
import time

import pytest

from kproto import KafkaConsumer
from kproto.messages import MetadataRequest
from kproto.net.client import NetworkClient
from kproto.tools.trace.report import format_line, time_key
from tests.brokers.proxy import BrokerProxy
from tests.support.certs import make_cert
from tests.integration.trace.capturing import all_closed, opened_in_capture, read, tcpdump
from tests.threads import TestThread

RECORDS = 30


def _consume_kproto(bootstrap: str, topic: str, group: str, protocol: str = "classic") -> int:
    read_count = 0
    extra = {"session_timeout_ms": 10_000} if protocol == "classic" else {}
    with KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id="cap-kproto",
                       auto_offset_reset="earliest", enable_auto_commit=True,
                       group_protocol=protocol, **extra) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while read_count < RECORDS and time.monotonic() < deadline:
            read_count += sum(len(r) for r in consumer.poll(200).values())
    return read_count


def _consume_confluent(bootstrap: str, topic: str, group: str) -> int:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "client.id": "cap-confluent", "auto.offset.reset": "earliest",
                                         "session.timeout.ms": 10_000})
    read_count = 0
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while read_count < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                read_count += 1
    finally:
        consumer.close()
    return read_count


CONSUMERS = {"kproto": _consume_kproto, "confluent": _consume_confluent,
             "kproto-kip848": lambda b, t, g: _consume_kproto(b, t, g, "consumer")}
GROUP_APIS = {"kproto": {"JoinGroup", "SyncGroup"}, "confluent": {"JoinGroup", "SyncGroup"},
              "kproto-kip848": {"ConsumerGroupHeartbeat"}}


def _ports(broker) -> list[int]:
    return [port for _, port in broker.addresses]


def _check_pairs(events: list[dict]) -> list[dict]:
    """On the connections the test's client opened: every request answered, but for those
    still in flight when the client closed (a broker answers a connection's requests in
    order: they are its last); nothing undecodable, nothing skipped. Returns the exchanges."""
    ours = opened_in_capture(events)
    events = [e for e in events if e.get("conn") in ours]
    assert [e for e in events if e["kind"] in ("undecodable", "skipped")] == []
    exchanges = [e for e in events if e["kind"] == "exchange"]
    assert exchanges
    last_answered: dict[str, float] = {}
    for e in exchanges:
        if not e.get("unanswered"):
            last_answered[e["conn"]] = max(last_answered.get(e["conn"], 0.0), e["t"])
    for e in exchanges:
        assert not e.get("request_error") and not e.get("response_error"), e
        if e.get("unanswered"):
            assert e["t"] >= last_answered.get(e["conn"], 0.0), e
        assert e["summary"], e  # every API's line carries fields
    return exchanges


@pytest.mark.parametrize("client", sorted(CONSUMERS))
def test_a_capture_of_a_group_member_on_the_mock_pairs_every_request(mock_cluster_factory, tmp_path,
                                                                      client):
    cluster = mock_cluster_factory(3)
    topic = cluster.new_topic(partitions=3)
    cluster.produce(topic, RECORDS)
    path = str(tmp_path / "mock.pcap")
    with tcpdump(path, _ports(cluster)) as finish:
        cluster.start_request_tracking()
        assert CONSUMERS[client](cluster.bootstrap_servers, topic, "cap-" + client) == RECORDS
        finish(all_closed)
        # Only now: the mock's thread reads a client's last requests (a LeaveGroup sent as
        # it closed) after the client is done, and it has read them all once it closed its
        # side too, which the capture showed.
        tracked = cluster.requests()
        cluster.stop_request_tracking()
    events, stats = read(path)
    exchanges = _check_pairs(events)
    # Exactly the requests the brokers saw, each on the broker that saw it.
    ours = collections.Counter((e["node"], e["api_key"]) for e in exchanges)
    assert ours == collections.Counter((r.broker_id, r.api_key) for r in tracked)
    assert {e["api"] for e in exchanges} >= {"ApiVersions", "Metadata", "FindCoordinator",
                                             "Fetch"} | GROUP_APIS[client]
    assert stats.lost_bytes == 0 and stats.not_kafka == 0


@pytest.mark.broker_kinds("tansu", "apache_kafka")
@pytest.mark.parametrize("client", sorted(CONSUMERS))
def test_a_capture_on_a_real_broker_pairs_every_request(broker, tmp_path, client):
    if client == "kproto-kip848" and "kip848" not in broker.capabilities:
        pytest.skip("{} lacks kip848 (KIP-848 consumer groups)".format(broker.name))
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, RECORDS)
    path = str(tmp_path / "broker.pcap")
    with tcpdump(path, _ports(broker)) as finish:
        assert CONSUMERS[client](broker.bootstrap_servers, topic, "cap-" + client + topic) == RECORDS
        finish(all_closed)
    events, _ = read(path)
    exchanges = _check_pairs(events)
    assert {e["api"] for e in exchanges} >= GROUP_APIS[client]
    fetched = [p for e in exchanges if e["api"] == "Fetch" and not e.get("unanswered")
               for p in e["summary"]["data"]]
    assert any(not p.endswith(" 0B") for p in fetched)  # the records crossed the capture


def _lines_in_time_order(text: str, jsonl: str) -> list[str]:
    """The printed lines, checked to be the JSON lines' events in time order (those have
    the whole times; the lines only the time of day)."""
    with open(jsonl, encoding="utf-8") as f:
        events = [json.loads(line) for line in f]
    stamped = [time_key(e) for e in events]
    assert stamped == sorted(stamped)
    lines = text.splitlines()
    assert lines == [line for line in map(format_line, events) if line is not None]
    return lines


@pytest.mark.parametrize("linktype", [None, "LINUX_SLL", "LINUX_SLL2"])
def test_the_cli_reads_captures_of_every_loopback_framing(mock_cluster, tmp_path, linktype):
    """``-i lo`` (Ethernet) and ``-i any`` in both Linux cooked framings, read by the CLI:
    one line per exchange in time order, the summary, JSON lines and the page."""
    topic = mock_cluster.new_topic(partitions=2)
    mock_cluster.produce(topic, RECORDS)
    path = str(tmp_path / "cli.pcap")
    with tcpdump(path, _ports(mock_cluster), interface="any" if linktype else "lo",
                 linktype=linktype) as finish:
        assert _consume_kproto(mock_cluster.bootstrap_servers, topic, "cap-cli-" + topic) == RECORDS
        finish(all_closed)
    jsonl, page = str(tmp_path / "cli.jsonl"), str(tmp_path / "cli.html")
    result = subprocess.run([sys.executable, "-m", "kproto", "trace", "read", path, "--jsonl", jsonl,
                             "--html", page], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = _lines_in_time_order(result.stdout, jsonl)
    events, _ = read(path)
    _check_pairs(events)
    exchanges = [e for e in events if e["kind"] == "exchange"]
    assert len([line for line in lines if re.search(r" #\d+ ", line)]) == len(exchanges)
    assert len(open(jsonl, encoding="utf-8").read().splitlines()) == len(events)
    assert "requests" in result.stderr and "capture of" in result.stderr
    assert '"api":"JoinGroup"' in open(page, encoding="utf-8").read()  # the page's data
    assert any("JoinGroup" in line and "generation=" in line for line in lines)
    assert any("OffsetCommit" in line and "offsets=[" in line for line in lines)


def test_a_capture_started_mid_conversation_resynchronises(mock_cluster, tmp_path):
    """tcpdump starts while a member is already fetching: the connections' starts are not in
    the capture, the first bytes may be the middle of a frame; what follows decodes."""
    topic = mock_cluster.new_topic(partitions=1)
    mock_cluster.produce(topic, 5)
    stop, ready = [], []

    def member() -> None:
        with KafkaConsumer(bootstrap_servers=mock_cluster.bootstrap_servers, group_id="cap-mid-" + topic,
                           client_id="cap-mid", auto_offset_reset="earliest",
                           fetch_max_wait_ms=100) as consumer:
            consumer.subscribe([topic])
            got = 0
            while not stop:
                got += sum(len(r) for r in consumer.poll(100).values())
                if got >= 5 and not ready:
                    ready.append(True)  # joined, assigned, fetching: every connection is up

    thread = TestThread(target=member)
    thread.start()
    path = str(tmp_path / "mid.pcap")
    try:
        deadline = time.monotonic() + 60
        while not ready:
            thread.raise_if_failed()
            assert time.monotonic() < deadline, "the member never read the records"
            time.sleep(0.1)
        with tcpdump(path, _ports(mock_cluster)) as finish:
            finish(lambda events: sum(e["kind"] == "exchange" and e["api"] == "Fetch"
                                      and not e.get("unanswered") for e in events) >= 5)
    finally:
        stop.append(True)
        thread.join(60)
    events, _ = read(path)
    opened = [e for e in events if e["kind"] == "open"]
    assert opened and all(e["mid_stream"] for e in opened)
    assert [e for e in events if e["kind"] == "undecodable"] == []
    fetches = [e for e in events if e["kind"] == "exchange" and e["api"] == "Fetch"]
    assert len(fetches) >= 5 and all(e["summary"].get("fetch") for e in fetches)
    # A frame cut by the capture's start is skipped and said so, never decoded as garbage.
    assert all("mid-stream" in e["reason"] for e in events if e["kind"] == "skipped")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_a_tls_connection_is_reported_as_encrypted(mock_cluster_factory, tmp_path):
    """kproto speaks TLS to a terminating proxy (tests.brokers.proxy) that speaks plaintext
    to the mock: the capture of both legs shows one TLS connection and the decoded other."""
    cluster = mock_cluster_factory(1)
    server_cert = make_cert(tmp_path, "localhost", "DNS:localhost")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*server_cert)
    proxy = BrokerProxy(cluster.addresses[0], context)
    path = str(tmp_path / "tls.pcap")
    try:
        with tcpdump(path, [proxy.port] + _ports(cluster)) as finish:
            client = NetworkClient(bootstrap_servers="localhost:{}".format(proxy.port),
                                   security_protocol="SSL", ssl_cafile=server_cert[0])
            try:
                future = client.send("bootstrap-0", MetadataRequest(topics=[]))
                client.poll(20_000, future=future)
                assert future.succeeded(), future.exception
            finally:
                client.close()
            finish(lambda events: any(e.get("tls") for e in events)
                   and any(e["kind"] == "exchange" and e["api"] == "Metadata" for e in events))
    finally:
        proxy.close()
    events, _ = read(path)
    tls = [e for e in events if e.get("tls")]
    assert len(tls) == 1 and tls[0]["broker"].endswith(":{}".format(proxy.port))
    exchanges = [e for e in events if e["kind"] == "exchange"]
    assert {e["api"] for e in exchanges} >= {"ApiVersions", "Metadata"}
    assert all(e["broker"].endswith(":{}".format(cluster.addresses[0][1])) for e in exchanges)


@pytest.mark.broker_kinds("apache_kafka")
@pytest.mark.parametrize("mode", ["classic", "consumer"])
def test_a_capture_of_the_java_consumer_pairs_every_request(broker, java_peer, tmp_path, mode):
    # The Java consumer 4.4 against Kafka 4.4: every request it sends at the newest versions
    # both speak is decoded and paired with its answer.
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, RECORDS)
    path = str(tmp_path / "java.pcap")
    with tcpdump(path, _ports(broker)) as finish:
        peer = java_peer.start(mode, broker.bootstrap_servers, "cap-java-" + mode + topic, [topic],
                               name="cap-java", commit="sync")
        peer.wait_for(lambda p: len(p.processed_set()) >= RECORDS, "every record read", 90)
        peer.stop()
        finish(all_closed)
    events, _ = read(path)
    exchanges = _check_pairs(events)
    apis = {e["api"] for e in exchanges}
    assert apis >= {"ApiVersions", "Metadata", "FindCoordinator", "Fetch", "OffsetCommit"}
    assert apis >= ({"JoinGroup", "SyncGroup"} if mode == "classic" else {"ConsumerGroupHeartbeat"})
    fetched = [p for e in exchanges if e["api"] == "Fetch" and not e.get("unanswered")
               for p in e["summary"]["data"]]
    assert any(not p.endswith(" 0B") for p in fetched)  # the records crossed the capture
