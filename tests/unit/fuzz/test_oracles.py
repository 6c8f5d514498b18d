"""The oracles, sans-IO: a correct answer to an unusual request is never a finding.

Each oracle is fed an exchange built from kproto's own request and response messages
(the bytes a broker following the protocol sends back) for requests a normal client
rarely sends: one partition named twice, empty arrays, null arrays and strings, names and
ids that disagree, READ_COMMITTED reads. Every test also shows the oracle firing on the
wrong answer next to the right one, so that a silent oracle cannot pass.
"""

import struct
import uuid

from kproto.tools.fuzz import oracles, schema
from kproto.tools.fuzz.corpus import Finding, version_ranges
from kproto.tools.fuzz.mutators import make_case
from kproto.tools.fuzz.oracles import ANSWER, CLOSED, Exchange
from kproto.messages import (FetchRequest, FetchResponse, ListOffsetsRequest,
                             ListOffsetsResponse, MetadataRequest, MetadataResponse,
                             OffsetFetchRequest, OffsetFetchResponse, ProduceRequest,
                             ProduceResponse)

CID = 77
SEED_ID = uuid.uuid4()


def _exchange(request, version, response=None, outcome=ANSWER, correlation_id=CID):
    spec = schema.api(request.api_key)
    case = make_case(spec, version, request, CID)
    body = None
    if response is not None:
        header = struct.pack(">i", correlation_id)
        if spec.response_header_version(version) >= 1:
            header += b"\x00"  # no tagged fields
        body = header + response.encode(version)
    return Exchange(case.wire, True, outcome, body, request)


def _verdicts(request, version, response, **kw):
    return oracles.evaluate(_exchange(request, version, response, **kw))[1]


LO = ListOffsetsRequest
LOR = ListOffsetsResponse


def _list_offsets(partitions, isolation_level=0):
    return LO(replica_id=-1, isolation_level=isolation_level, topics=[
        LO.ListOffsetsTopic(name=topic, partitions=[
            LO.ListOffsetsPartition(partition_index=p, timestamp=ts) for p, ts in parts])
        for topic, parts in partitions])


def _list_offsets_answer(partitions):
    return LOR(topics=[LOR.ListOffsetsTopicResponse(name=topic, partitions=[
        LOR.ListOffsetsPartitionResponse(partition_index=p, error_code=0, timestamp=-1,
                                         offset=offset) for p, offset in parts])
        for topic, parts in partitions])


def test_a_duplicate_partition_keeps_its_own_list_offsets_answer():
    # The reproducer the minimiser made on Tansu: EARLIEST then LATEST of one partition,
    # answered 0 then 6 (high watermark 6): LATEST is 6, not the EARLIEST answer's 0.
    request = _list_offsets([("t", [(0, -2), (0, -1)])])
    ex = _exchange(request, 7, _list_offsets_answer([("t", [(0, 0), (0, 6)])]))
    answer, verdicts = oracles.evaluate(ex)
    assert verdicts == []
    assert oracles.latest_offsets(ex, answer) == [("t", 0, 6)]
    assert oracles.latest_below_high_watermark("t", 0, 6, 6) is None
    # answered the other way round, the LATEST answer is below the high watermark
    wrong = _exchange(request, 7, _list_offsets_answer([("t", [(0, 6), (0, 0)])]))
    [(topic, partition, latest)] = oracles.latest_offsets(wrong, oracles.evaluate(wrong)[0])
    assert oracles.latest_below_high_watermark(topic, partition, latest, 6) is not None


def test_list_offsets_answers_match_by_position_per_partition():
    request = _list_offsets([("a", [(0, -1), (1, -2)]), ("b", [(0, -1)])])
    answer = _list_offsets_answer([("b", [(0, 4)]), ("a", [(1, 0), (0, 9)])])
    ex = _exchange(request, 5, answer)
    assert sorted(oracles.latest_offsets(ex, oracles.evaluate(ex)[0])) == [("a", 0, 9),
                                                                           ("b", 0, 4)]


def test_a_duplicate_answered_once_is_not_matched_to_either_entry():
    request = _list_offsets([("t", [(0, -2), (0, -1)])])
    ex = _exchange(request, 7, _list_offsets_answer([("t", [(0, 0)])]))
    answer, verdicts = oracles.evaluate(ex)
    assert verdicts == [] and oracles.latest_offsets(ex, answer) == []


def test_read_committed_latest_is_the_last_stable_offset():
    request = _list_offsets([("t", [(0, -1)])], isolation_level=1)
    ex = _exchange(request, 7, _list_offsets_answer([("t", [(0, 3)])]))
    assert oracles.latest_offsets(ex, oracles.evaluate(ex)[0]) == []
    uncommitted = _exchange(_list_offsets([("t", [(0, -1)])]), 7,
                            _list_offsets_answer([("t", [(0, 3)])]))
    assert oracles.latest_offsets(uncommitted, oracles.evaluate(uncommitted)[0]) == [
        ("t", 0, 3)]


MR = MetadataRequest
MD = MetadataResponse


def _metadata_answer(topics):
    return MD(brokers=[], topics=[MD.MetadataResponseTopic(
        error_code=0, name=name, topic_id=tid or uuid.UUID(int=0), partitions=[])
        for name, tid in topics])


def test_metadata_asked_by_id_under_other_names_is_answered_by_id():
    # Three entries with one id and three names: Kafka describes the id once, by its name.
    request = MR(topics=[MR.MetadataRequestTopic(name=n, topic_id=SEED_ID)
                         for n in ("kproto-fuzz-t1", "kproto-fuzz-t2", "kproto-fuzz-seed")])
    assert _verdicts(request, 12, _metadata_answer([("kproto-fuzz-seed", SEED_ID)])) == []
    other = _verdicts(request, 12, _metadata_answer([("kproto-fuzz-seed", uuid.uuid4())]))
    assert {v.signature for v in other} == {"topic ids not asked for", "topic ids missing"}


def test_metadata_empty_null_and_duplicate_topic_lists():
    everything = _metadata_answer([("a", None), ("b", None)])
    assert _verdicts(MR(topics=None), 12, everything) == []          # null: all topics
    assert _verdicts(MR(topics=[]), 0, everything) == []             # v0: [] is all topics
    assert _verdicts(MR(topics=[]), 12, _metadata_answer([])) == []  # v1+: [] is none
    twice = MR(topics=[MR.MetadataRequestTopic(name="a"), MR.MetadataRequestTopic(name="a")])
    assert _verdicts(twice, 12, _metadata_answer([("a", None)])) == []
    assert _verdicts(twice, 12, _metadata_answer([("a", None), ("a", None)])) == []
    assert {v.signature for v in _verdicts(twice, 12, _metadata_answer([("b", None)]))} == {
        "topics not asked for", "topics missing"}


def test_fetch_with_a_partition_named_twice_answered_once():
    request = FetchRequest(replica_id=-1, max_wait_ms=0, topics=[FetchRequest.FetchTopic(
        topic="t", partitions=[FetchRequest.FetchPartition(partition=0),
                               FetchRequest.FetchPartition(partition=0)])])
    answer = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[FetchResponse.PartitionData(partition_index=0, records=None)])])
    assert _verdicts(request, 12, answer) == []
    answer.responses[0].partitions[0].partition_index = 5
    assert {v.signature for v in _verdicts(request, 12, answer)} == {
        "partitions not asked for", "partitions missing"}


def test_produce_with_an_empty_partition_list():
    request = ProduceRequest(acks=1, timeout_ms=100, topic_data=[
        ProduceRequest.TopicProduceData(name="kproto-fuzz-seed", partition_data=[])])
    answer = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="kproto-fuzz-seed", partition_responses=[])])
    assert _verdicts(request, 9, answer) == []
    assert _verdicts(request, 9, ProduceResponse(responses=[])) == []


def test_produce_acks_0_closed_is_how_kafka_reports_its_error():
    request = ProduceRequest(acks=0, timeout_ms=100, topic_data=[])
    assert _verdicts(request, 9, None, outcome=CLOSED) == []
    request.acks = 1
    [closed] = _verdicts(request, 9, None, outcome=CLOSED)
    assert closed.oracle == "closed_on_valid"


def test_offset_fetch_null_topics_and_null_strings_decode():
    request = OffsetFetchRequest(group_id="g", topics=None)
    answer = OffsetFetchResponse(error_code=0, topics=[
        OffsetFetchResponse.OffsetFetchResponseTopic(name="t", partitions=[
            OffsetFetchResponse.OffsetFetchResponsePartition(
                partition_index=0, committed_offset=-1, metadata=None, error_code=0)])])
    assert _verdicts(request, 7, answer) == []


def test_header_and_decode_accept_flexible_answers_and_refuse_wrong_ones():
    request = MR(topics=[])
    answer = _metadata_answer([])
    assert _verdicts(request, 12, answer) == []  # response header v1 (tagged fields)
    [wrong_id] = _verdicts(request, 12, answer, correlation_id=CID + 1)
    assert wrong_id.oracle == "header"
    ex = _exchange(request, 12, answer)
    ex.response = ex.response[:-3]
    assert [v.oracle for v in oracles.evaluate(ex)[1]] == ["decode"]


def test_unknown_server_error_only_for_error_code_minus_one():
    request = _list_offsets([("t", [(0, -1), (0, -1)])])
    answer = _list_offsets_answer([("t", [(0, 1), (0, 1)])])
    answer.topics[0].partitions[0].error_code = 42  # INVALID_REQUEST for the duplicate
    assert _verdicts(request, 7, answer) == []
    answer.topics[0].partitions[1].error_code = -1
    [v] = _verdicts(request, 7, answer)
    assert v.oracle == "unknown_server_error"
    assert v.signature == "topics[].partitions[].error_code"


def test_probe_verdicts():
    assert oracles.hang(6.0).oracle == "hang"
    assert oracles.dead("refused").oracle == "dead"
    assert oracles.rss(100, 500, 256).oracle == "rss"


def test_findings_are_one_per_api_family_with_their_versions():
    f = Finding(api="EndTxn", api_key=26, version=3, oracle="content", signature="s",
                message="m", strategy="valid", level="valid", wire=b"", valid=True,
                versions=[1, 2, 4])
    assert f.versions == [1, 2, 3, 4] and f.version_text == "v1-v4"
    assert f.key == ("EndTxn", "content", "s")
    assert version_ranges([0, 1, 2, 5, 7, 8]) == "v0-v2,v5,v7-v8"
    again = Finding.from_json(f.to_json())
    assert again.versions == [1, 2, 3, 4] and again.key == f.key
