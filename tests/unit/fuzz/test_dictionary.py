"""Values the broker issued, sans-IO: what the harvest keeps from an answer, the contexts it
makes, how the generator and the ``answer`` tree mutation draw from them, and how a
sequence seed's recorded values are threaded into a replay.

The answers are built here as a broker would send them (decoded message objects); the
harvest against real brokers is tests/integration/fuzz/test_runs.py's.
"""

import random
import uuid

from kproto.messages import (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
                             FetchRequest, FetchResponse, HeartbeatRequest,
                             InitProducerIdRequest, InitProducerIdResponse, JoinGroupRequest,
                             JoinGroupResponse, ShareFetchRequest, ShareFetchResponse)
from kproto.tools.fuzz import schema, tree_mutators
from kproto.tools.fuzz.dictionary import Dictionary, issued
from kproto.tools.fuzz.sequence_seeds import learn, thread
from kproto.tools.fuzz.values import Knowledge, TopicInfo, ValueGenerator

GROUP = "kproto-fuzz-g1"
MEMBER = "kproto-fuzz-c-5f0c"


def _joined(d, generation=7, group=GROUP):
    d.harvest(JoinGroupRequest(group_id=group, member_id=""),
              JoinGroupResponse(generation_id=generation, protocol_name="range",
                                leader=MEMBER, member_id=MEMBER))


def test_an_answer_is_harvested_by_field_name_without_what_the_generator_makes_anyway():
    d = Dictionary()
    _joined(d)
    assert {k: list(v) for k, v in d.values.items()} == {
        "generation_id": [7], "protocol_name": ["range"], "leader": [MEMBER],
        "member_id": [MEMBER]}
    d.harvest(None, JoinGroupResponse(error_code=0, generation_id=-1, member_id=""))
    assert list(d.values["generation_id"]) == [7]  # -1, 0 and "" are not kept
    _joined(d, generation=9)
    _joined(d, generation=7)
    assert list(d.values["generation_id"]) == [9, 7]  # distinct, newest last


def test_an_answer_that_issued_an_identity_is_a_context_with_the_requests_owner():
    d = Dictionary()
    _joined(d)
    [context] = d.contexts
    assert context["group_id"] == GROUP and context["member_id"] == MEMBER
    assert context["generation_id"] == 7
    assert d.issued_strings() == {MEMBER}
    # an error answer issues nothing to build on, and a mutant's tree names nothing
    d.harvest(JoinGroupRequest(group_id=GROUP), JoinGroupResponse(error_code=25,
                                                                  member_id="x-1",
                                                                  generation_id=3))
    d.harvest(None, JoinGroupResponse(member_id="x-2", generation_id=4))
    assert len(d.contexts) == 1
    # MEMBER_ID_REQUIRED issues the id to join again with
    d.harvest(JoinGroupRequest(group_id=GROUP, member_id=""),
              JoinGroupResponse(error_code=79, member_id="kproto-fuzz-c-2"))
    assert (d.contexts[-1]["group_id"], d.contexts[-1]["member_id"]) == (GROUP,
                                                                         "kproto-fuzz-c-2")
    # a group not under the prefix: its member ids get the prefix like any string
    _joined(d, group="someone-elses")
    assert len(d.contexts) == 3 and d.issued_strings() == {MEMBER, "kproto-fuzz-c-2"}


def test_a_session_context_holds_the_epoch_due_next():
    d = Dictionary()
    d.harvest(FetchRequest(session_id=0, session_epoch=0), FetchResponse(session_id=0))
    assert not d.contexts  # no session given
    d.harvest(FetchRequest(session_id=0, session_epoch=0), FetchResponse(session_id=77))
    d.harvest(ShareFetchRequest(group_id=GROUP, member_id=MEMBER, share_session_epoch=3),
              ShareFetchResponse(responses=[ShareFetchResponse.ShareFetchableTopicResponse(
                  partitions=[ShareFetchResponse.PartitionData(acquired_records=[
                      ShareFetchResponse.AcquiredRecords(first_offset=4, last_offset=9,
                                                         delivery_count=1)])])]))
    fetch, share = d.contexts
    assert fetch["session_id"] == 77 and fetch["session_epoch"] == 1
    assert share["share_session_epoch"] == 4 and share["member_id"] == MEMBER
    assert (share["first_offset"], share["last_offset"]) == (4, 9)


def test_a_request_in_a_context_names_its_group_member_and_generation_together():
    d = Dictionary()
    _joined(d)
    gen = ValueGenerator(random.Random(5), Knowledge(), dictionary=d)
    heartbeat = schema.api_by_name("Heartbeat")
    coherent = 0
    for _ in range(200):
        req = gen.request(heartbeat, 4)
        coherent += (req.group_id, req.member_id, req.generation_id) == (GROUP, MEMBER, 7)
    assert 40 < coherent < 160  # CONTEXT_SHARE of them, nearly every field taken
    commit = schema.api_by_name("OffsetCommit")  # its epoch field takes the generation
    assert any(gen.request(commit, 9).generation_id_or_member_epoch == 7 for _ in range(50))
    # an API whose request names no identity never gets a context
    assert d.context(schema.api_by_name("Metadata"), random.Random(1)) is None


def test_harvested_values_fit_the_field_they_go_to():
    d = Dictionary()
    d.harvest(InitProducerIdRequest(transactional_id="kproto-fuzz-txn"),
              InitProducerIdResponse(producer_id=1 << 40, producer_epoch=0))
    rng = random.Random(1)
    assert d.value("producer_id", "int64", rng) == 1 << 40
    assert d.value("producer_id", "int32", rng) is None  # too wide: never sent
    assert d.value("producer_id", "string", rng) is None
    assert d.value("no_such_field", "int32", rng) is None


def test_produce_in_a_producers_context_writes_its_batches_under_its_id_and_epoch():
    d = Dictionary()
    d.harvest(InitProducerIdRequest(transactional_id="kproto-fuzz-txn"),
              InitProducerIdResponse(producer_id=4242, producer_epoch=0))
    gen = ValueGenerator(random.Random(2), Knowledge(topics=[
        TopicInfo("kproto-fuzz-seed", uuid.uuid4(), [0])]), dictionary=d)
    producers = set()
    for _ in range(30):
        batch = gen.records()
        if batch[16] == 2:  # magic 2: producer id and epoch at bytes 43-52 of the header
            producers.add((int.from_bytes(batch[43:51], "big", signed=True),
                           int.from_bytes(batch[51:53], "big", signed=True)))
    assert (4242, 0) in producers and (-1, -1) in producers


def test_the_answer_mutation_gives_fields_values_the_broker_issued():
    d = Dictionary()
    cgh = ConsumerGroupHeartbeatRequest(group_id=GROUP, member_id="m", member_epoch=0,
                                        rebalance_timeout_ms=1000)
    d.harvest(cgh, ConsumerGroupHeartbeatResponse(member_id="m", member_epoch=12))
    seed = HeartbeatRequest(group_id="kproto-fuzz-other", generation_id=1, member_id="x")
    before = seed.encode(4)
    rng = random.Random(3)
    seen = set()
    for _ in range(100):
        out, done = tree_mutators.mutate(seed, HeartbeatRequest(), None, rng, d)
        if any(x.startswith("answer") for x in done):
            seen.add((out.group_id, out.member_id))
            out.encode(4)  # still a request the version can encode
    assert seed.encode(4) == before  # the seed itself is left as it was
    assert (GROUP, "m") in seen  # a whole context: group and member together
    assert any(member == "m" for _, member in seen)


def test_typed_leaves_know_each_fields_schema_type():
    F = FetchRequest
    request = F(session_id=3, topics=[F.FetchTopic(topic="t", partitions=[
        F.FetchPartition(partition=1, fetch_offset=5)])])
    types = {name: t for _, name, t in tree_mutators.typed_leaves(request)}
    assert types["session_id"] == "int32" and types["fetch_offset"] == "int64"
    assert types["topic"] == "string"


def test_a_replay_threads_what_its_own_answers_issued_into_later_steps():
    recorded_join = JoinGroupResponse(generation_id=1, member_id="kproto-fuzz-c-old")
    heartbeat = HeartbeatRequest(group_id=GROUP, generation_id=1,
                                 member_id="kproto-fuzz-c-old")
    threaded = {}
    replayed_join = JoinGroupResponse(generation_id=2, member_id="kproto-fuzz-c-new")
    learn(issued(recorded_join), replayed_join, threaded)
    assert threaded == {("generation_id", 1): 2,
                        ("member_id", "kproto-fuzz-c-old"): "kproto-fuzz-c-new"}
    assert thread(heartbeat, threaded) == 2
    assert (heartbeat.generation_id, heartbeat.member_id) == (2, "kproto-fuzz-c-new")
    assert heartbeat.group_id == GROUP
