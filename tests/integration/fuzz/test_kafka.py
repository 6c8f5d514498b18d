"""kproto.tools.fuzz against Apache Kafka 4.4 (the test ground's, from Maven): the oracles'
verdicts on requests whose right answer is known, and a short bounded run.

The broker is this module's own (:class:`tests.brokers.maven_kafka.MavenKafka`), never the
session's: a run sends malformed traffic and may crash it. Its Log4j file is the
``--broker-log`` of every check here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kproto.tools.fuzz import schema
from kproto.tools.fuzz.coverage import CoverageMap, JacocoClient, agent_option
from kproto.tools.fuzz.mutators import make_case
from kproto.tools.fuzz.runner import Fuzzer, FuzzConfig
from kproto.messages import (AlterShareGroupOffsetsRequest, DescribeConfigsRequest,
                             FetchRequest, FindCoordinatorRequest, ListOffsetsRequest)
from tests.brokers._net import wait_until
from tests.integration.fuzz.test_runs import _check_run


@pytest.fixture(scope="module")
def kafka44():
    """Kafka 4.4 with JaCoCo's agent serving its coverage on ``broker.coverage``."""
    from tests.brokers import maven
    from tests.brokers._net import free_port
    from tests.brokers.maven_kafka import MavenKafka

    reason = maven.unavailable_reason()
    if reason is not None:
        pytest.skip("Kafka 4.4 from Maven: {}".format(reason))
    port = free_port()
    broker = MavenKafka(extra_jvm=(agent_option(maven.jacoco_agent(), port),))
    broker.coverage = "127.0.0.1:{}".format(port)
    yield broker
    broker.close()


@pytest.fixture
def fuzzer(kafka44):
    fz = Fuzzer(FuzzConfig(kafka44.bootstrap_servers, broker_log=Path(kafka44.node.log_path)))
    fz.prepare()  # the seed topic, names learned; the log followed from here
    yield fz
    fz.target.close()


def _send(fz, request, version, wire=None):
    case = make_case(schema.api(request.api_key), version, request,
                     fz.target.next_correlation_id())
    if wire is None:
        ex = fz.target.send_case(case)
    else:
        ex = fz.target.exchange(wire(case.wire), valid=False, request=request)
    return fz.verdicts(ex, settle=0.5)


COORDINATOR_NOT_READY = (14, 15, 16)  # load in progress, not available, not coordinator


def _coordinator_ready(fz, request, version) -> bool:
    """The group's coordinator answers ``request`` (a fresh Kafka creates
    __consumer_offsets on the first FindCoordinator and is not its coordinator until the
    partition is loaded)."""
    group = request.group_id

    def ready() -> bool:
        fz.target.call(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
        _, answer = fz.target.call(request, version)
        return answer is not None and answer.error_code not in COORDINATOR_NOT_READY
    return wait_until(ready, 60.0, interval=0.5)


def test_an_unknown_server_error_comes_with_kafkas_stack_trace(fuzzer):
    # Kafka 4.4 answers UNKNOWN_SERVER_ERROR to a negative partition index here, and logs
    # the IllegalArgumentException its share-state persister threw.
    A = AlterShareGroupOffsetsRequest
    request = A(group_id="kproto-fuzz-g0", topics=[A.AlterShareGroupOffsetsRequestTopic(
        topic_name="kproto-fuzz-seed", partitions=[A.AlterShareGroupOffsetsRequestPartition(
            partition_index=-5, start_offset=0)])])
    assert _coordinator_ready(fuzzer, request, 0)
    fuzzer.broker_log.poll()
    [verdict] = _send(fuzzer, request, 0)
    assert verdict.oracle == "unknown_server_error"
    assert verdict.signature.startswith("error_code | ")
    assert "java.lang.IllegalArgumentException at org.apache.kafka" in verdict.signature
    assert "\tat org.apache.kafka." in verdict.extra["broker_log"]


def test_a_handler_error_is_a_finding_and_a_parse_refusal_is_not(fuzzer):
    describe = DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=116, resource_name="kproto-fuzz-x", configuration_keys=None)])
    logged = [v for v in _send(fuzzer, describe, 4) if v.oracle == "broker_log"]
    assert [v.signature for v in logged] == [
        "kafka.server.KafkaApis: Unexpected error handling request RequestHeader | "
        "org.apache.kafka.common.errors.InvalidRequestException: Unexpected resource type"]
    fetch = FetchRequest(replica_id=-1, topics=[FetchRequest.FetchTopic(
        topic="kproto-fuzz-seed", partitions=[FetchRequest.FetchPartition(partition=0)])])

    def truncated(wire: bytes) -> bytes:  # a true size prefix over a body cut short
        body = wire[4:-9]
        return len(body).to_bytes(4, "big") + body

    assert _send(fuzzer, fetch, 12, truncated) == []
    log = Path(fuzzer.broker_log.path).read_text()
    assert "Error getting request for apiKey: FETCH" in log  # Kafka did log its refusal


def test_a_duplicate_list_offsets_partition_is_answered_correctly(fuzzer):
    LO = ListOffsetsRequest
    for version in (1, 7):
        request = LO(replica_id=-1, topics=[LO.ListOffsetsTopic(name="kproto-fuzz-seed",
                                                                partitions=[
            LO.ListOffsetsPartition(partition_index=0, timestamp=-2),
            LO.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
        assert _send(fuzzer, request, version) == []


def test_a_bounded_run_against_kafka_44(kafka44, tmp_path):
    data = _check_run(kafka44.bootstrap_servers, kafka44.node.pid, kafka44.node.alive,
                      tmp_path, "--broker-log", kafka44.node.log_path)
    for f in data["findings"]:
        if f["oracle"] == "broker_log":
            assert f["extra"]["broker_log"] and f["signature"]
        assert f["versions"] and f["version"] in f["versions"]


def test_the_agents_coverage_is_read_and_feeds_the_run(kafka44, tmp_path):
    host, port = kafka44.coverage.rsplit(":", 1)
    client = JacocoClient(host, int(port))
    cmap = CoverageMap()
    try:
        first = client.dump()
        assert first.complete and cmap.update(first) > 0
        names = {c.name for c in first.classes}
        assert "kafka/server/KafkaApis" in names  # it answered requests already
    finally:
        client.close()
    data = _check_run(kafka44.bootstrap_servers, kafka44.node.pid, kafka44.node.alive,
                      tmp_path, "--coverage", kafka44.coverage)
    cov = data["coverage"]
    assert cov["errors"] == 0 and cov["feedback"]
    assert cov["covered"] >= cmap.covered  # cumulative since the broker started
    assert 0 < cov["per_package"]["kafka.server"][0] <= cov["per_package"]["kafka.server"][1]
    assert cov["timeline"] and cov["seeds"] > 0 and cov["reads"] >= len(cov["timeline"])
    # the new probes were credited to what was sent (an API at a level, or a sequence)
    assert cov["arms"] and all(a["tries"] > 0 for a in cov["arms"])
