"""The broker's log as an oracle, sans-IO: cutting a log into entries, judging and signing
them, tying them to an exchange, following a file that grows, rotates and is truncated.

The log lines are in the layout of Kafka's default Log4j pattern (``[%d] %p %m (%c)%n``),
written for these tests; the real broker's log is read by tests/integration/fuzz/test_kafka.py.
"""

import struct

from kproto.tools.fuzz import oracles
from kproto.tools.fuzz.brokerlog import BrokerLog, entries
from kproto.tools.fuzz.oracles import ANSWER, CLOSED, Exchange, Verdict

HANDLER_ERROR = """\
[2026-01-01 10:00:00,001] INFO [Broker id=1] something routine (kafka.server.ReplicaManager)
[2026-01-01 10:00:00,002] ERROR [ReplicaManager broker=1] Error processing fetch with max size -7 from consumer on partition Rn3m0f1aQ2u-5l0B_x9ZJw:t-0 (kafka.server.ReplicaManager)
java.lang.IllegalArgumentException: Invalid max size -7 for log read from segment
\tat org.apache.kafka.storage.internals.log.LogSegment.read(LogSegment.java:420)
\tat kafka.cluster.Partition.fetchRecords(Partition.scala:1400)
[2026-01-01 10:00:00,003] WARN [GroupCoordinator id=1] no stack here (org.apache.kafka.coordinator.group.GroupCoordinatorService)
"""

REFUSAL = """\
[2026-01-01 10:00:01,000] ERROR Closing socket for 127.0.0.1:9092-127.0.0.1:5555-0-3 because of error (kafka.network.Processor)
org.apache.kafka.common.errors.InvalidRequestException: Error getting request for apiKey: FETCH, apiVersion: 12
Caused by: java.nio.BufferUnderflowException
\tat java.base/java.nio.Buffer.nextGetIndex(Buffer.java:699)
\t... 9 more
[2026-01-01 10:00:01,001] ERROR Exception while processing request from 127.0.0.1:9092-127.0.0.1:5555-0-3 (kafka.network.Processor)
org.apache.kafka.common.errors.InvalidRequestException: Error getting request for apiKey: FETCH, apiVersion: 12
Caused by: java.nio.BufferUnderflowException
\tat java.base/java.nio.Buffer.nextGetIndex(Buffer.java:699)
"""


def test_entries_keep_their_stack_traces_and_levels():
    cut = entries(HANDLER_ERROR.splitlines())
    assert [e.level for e in cut] == ["INFO", "ERROR", "WARN"]
    error = cut[1]
    assert len(error.lines) == 4 and error.has_stack
    assert error.logger == "kafka.server.ReplicaManager"
    assert error.exceptions == ["java.lang.IllegalArgumentException"]
    assert error.message.startswith("Error processing fetch with max size -7")
    assert [e.worth_a_finding for e in cut] == [False, True, False]  # WARN without a stack


def test_the_signature_is_the_same_bug_whatever_the_numbers_and_ids():
    [_, a, _] = entries(HANDLER_ERROR.splitlines())
    other = HANDLER_ERROR.replace("-7", "-123").replace("Rn3m0f1aQ2u-5l0B_x9ZJw", "A" * 22)
    [_, b, _] = entries(other.splitlines())
    assert a.signature == b.signature == (
        "kafka.server.ReplicaManager: Error processing fetch with max size | "
        "java.lang.IllegalArgumentException at "
        "org.apache.kafka.storage.internals.log.LogSegment.read")
    assert "NotControllerException" in entries([
        "[t] ERROR x (a.B)", "org.apache.kafka.common.errors.NotControllerException: The "
        "active controller"])[0].signature
    # a stackless exception is told apart by its message's first words, the client's data
    # after them (here an entity type the request named) left out
    quotas = ("[t] ERROR [KafkaApi-1] Unexpected error handling request RequestHeader(apiKey="
              "DESCRIBE_CLIENT_QUOTAS) -- x (kafka.server.KafkaApis)\n"
              "org.apache.kafka.common.errors.UnsupportedVersionException: Unsupported "
              "entity type {}")
    [one] = entries(quotas.format("ibrq").splitlines())
    [other] = entries(quotas.format("kproto-fuzz-c").splitlines())
    assert one.signature == other.signature == (
        "kafka.server.KafkaApis: Unexpected error handling request RequestHeader | "
        "org.apache.kafka.common.errors.UnsupportedVersionException: Unsupported entity type")


def test_the_root_cause_and_its_first_frame_sign_a_chained_exception():
    first = entries(REFUSAL.splitlines())[0]
    assert first.exceptions == ["org.apache.kafka.common.errors.InvalidRequestException",
                                "java.nio.BufferUnderflowException"]
    assert first.signature.endswith(
        "| java.nio.BufferUnderflowException at java.base/java.nio.Buffer.nextGetIndex")


def _exchange(valid, outcome=ANSWER):
    wire = struct.pack(">ihhi", 8, 1, 12, 5)
    return Exchange(wire, valid, outcome, None, None)


def test_a_malformed_requests_clean_refusal_is_no_finding():
    logged = entries(REFUSAL.splitlines())
    assert all(e.is_refusal_of_malformed_request() for e in logged)
    assert oracles.with_broker_log(_exchange(False, CLOSED), [], logged) == []
    # the same refusal of a request the schema allows is a finding (once per cause)
    [v] = oracles.with_broker_log(_exchange(True, CLOSED), [], logged)
    assert v.oracle == "broker_log" and "BufferUnderflowException" in v.signature
    assert "Caused by" in v.extra["broker_log"]


def test_an_unknown_server_error_answer_takes_the_logged_cause():
    logged = entries(HANDLER_ERROR.splitlines())
    use = Verdict("unknown_server_error", "responses[].partitions[].error_code", "USE")
    [v] = oracles.with_broker_log(_exchange(True), [use], logged)
    assert v.signature.startswith("responses[].partitions[].error_code | kafka.server."
                                  "ReplicaManager: Error processing fetch")
    assert "LogSegment.read(LogSegment.java:420)" in v.extra["broker_log"]
    # other verdicts keep their signature and carry the log; the entry is its own finding
    closed = Verdict("closed_on_valid", "closed", "closed")
    out = oracles.with_broker_log(_exchange(True), [closed], logged)
    assert [v.oracle for v in out] == ["closed_on_valid", "broker_log"]
    assert out[0].signature == "closed" and "IllegalArgument" in out[0].extra["broker_log"]
    assert oracles.with_broker_log(_exchange(True), [], entries(["[x] INFO fine (a.B)"])) == []


def test_the_file_is_followed_from_its_end_through_rotation_and_truncation(tmp_path):
    path = tmp_path / "server.log"
    path.write_text("[t] ERROR before the run (a.B)\n")
    log = BrokerLog(path)
    assert log.poll() == []  # what was there before is not this run's
    with open(path, "a") as f:
        f.write(HANDLER_ERROR)
        f.write("[t] ERROR half a li")  # still being written
    assert [e.level for e in log.poll()] == ["INFO", "ERROR", "WARN"]
    with open(path, "a") as f:
        f.write("ne (a.B)\n")
    [e] = log.poll()
    assert e.first_line == "[t] ERROR half a line (a.B)"
    path.rename(tmp_path / "server.log.1")  # rotated: a new file under the old name
    path.write_text("[t] ERROR after rotation (a.B)\n")
    assert [e.first_line for e in log.poll()] == ["[t] ERROR after rotation (a.B)"]
    path.write_text("")  # truncated in place
    with open(path, "a") as f:
        f.write("[t] FATAL x (a.B)\n")
    assert [e.level for e in log.poll(wait=0.1)] == ["FATAL"]
    missing = BrokerLog(tmp_path / "not-yet.log")
    (tmp_path / "not-yet.log").write_text("[t] ERROR first (a.B)\n")
    assert [e.level for e in missing.poll()] == ["ERROR"]
