"""Coverage feedback, sans-IO: what new probes are credited to, where the energy goes, which
requests become seeds, and the structural mutations that start from a seed.

The dumps are built here as JaCoCo's agent would send them (:class:`Dump` of
:class:`ClassProbes`); reading a real agent is tests/integration/fuzz/test_kafka.py's.
"""

import random

from kproto.messages import FetchRequest, MetadataRequest
from kproto.tools.fuzz import schema, tree_mutators
from kproto.tools.fuzz.coverage import ClassProbes, Dump, JacocoClient
from kproto.tools.fuzz.feedback import MAX_BOOST, PRIOR_GAIN, PRIOR_SECONDS, Feedback, Seed
from kproto.tools.fuzz.values import Knowledge, TopicInfo, ValueGenerator

FETCH = schema.api_by_name("Fetch")
SHARE_FETCH = schema.api_by_name("ShareFetch")
METADATA = schema.api_by_name("Metadata")


def _feedback(enabled=True):
    # The client is never connected: take() is fed the dumps.
    return Feedback(JacocoClient("127.0.0.1", 9), random.Random(1), enabled=enabled,
                    every=10 ** 6)


def _dump(*classes):
    return Dump([ClassProbes(i, name, 64, hits) for i, (name, hits) in enumerate(classes)])


def _note(fb, spec, level="valid", seconds=0.01):
    request = schema.class_of(spec.module, spec.root)()
    fb.note(("req", spec.api_name, level), (spec.api_name,), seconds,
            Seed(spec, 4, request, 0.0))


def test_probes_in_a_class_named_after_an_api_go_to_that_apis_requests():
    fb = _feedback()
    _note(fb, FETCH)
    _note(fb, SHARE_FETCH)
    _note(fb, METADATA)
    added = fb.take(_dump(("kafka/server/share/ShareFetchUtils", 0b111),   # ShareFetch's
                          ("org/apache/kafka/common/requests/FetchRequest", 0b11),  # Fetch's
                          ("kafka/server/KafkaApis", 0b111111),  # everyone's: 2 each
                          ("org/apache/kafka/raft/KafkaRaftClient", 0b1111)))  # not counted
    assert added == {"kafka/server/share/ShareFetchUtils": 3,
                     "org/apache/kafka/common/requests/FetchRequest": 2,
                     "kafka/server/KafkaApis": 6}
    credit = {arm[1]: s.credit for arm, s in fb.arms.items()}
    assert credit == {"Fetch": 4.0, "ShareFetch": 5.0, "Metadata": 2.0}
    assert sorted(fb.seeds) == ["Fetch", "Metadata", "ShareFetch"]


def test_probes_no_api_owns_are_split_by_the_time_each_request_took():
    fb = _feedback()
    _note(fb, FETCH, "frame", seconds=0.001)  # refused at once
    _note(fb, METADATA, seconds=0.003)
    fb.take(_dump(("kafka/server/KafkaApis", 0b1111_1111)))
    credit = {arm[1]: s.credit for arm, s in fb.arms.items()}
    assert credit == {"Fetch": 2.0, "Metadata": 6.0}


def test_an_arm_that_stops_reaching_new_code_cools_down():
    fb = _feedback()
    fb.take(_dump())  # nothing sent: nobody's credit
    assert not fb.arms
    _note(fb, FETCH)
    fb.take(_dump(("org/apache/kafka/common/requests/FetchRequest", (1 << 64) - 1)))
    arm = ("req", "Fetch", "valid")
    hot = fb.arms[arm].weight()
    assert hot == MAX_BOOST * PRIOR_GAIN / PRIOR_SECONDS  # capped
    for _ in range(40):  # nothing new any more
        _note(fb, FETCH)
        fb.take(_dump(("org/apache/kafka/common/requests/FetchRequest", (1 << 64) - 1)))
    assert fb.arms[arm].weight() < PRIOR_GAIN / PRIOR_SECONDS  # below an untried arm
    assert fb.arms[arm].tries == 41


def test_energy_steers_draws_only_with_feedback_on():
    arms = [("req", "Fetch", "valid"), ("req", "Metadata", "valid")]
    for enabled in (True, False):
        fb = _feedback(enabled)
        _note(fb, FETCH)
        _note(fb, METADATA)
        fb.take(_dump(("org/apache/kafka/common/requests/FetchRequest", (1 << 64) - 1)))
        picks = [fb.choose(arms) for _ in range(400)]
        if not enabled:
            assert set(picks) == {None} and not fb.seeds and fb.pick("Fetch") is None
            assert fb.arms  # the credit is still reported
        else:
            assert picks.count(None) > 50  # the exploring draws
            assert picks.count(arms[0]) > 5 * picks.count(arms[1])
            assert fb.seed_count() == 1  # Metadata's request reached nothing new


def test_a_seed_pool_keeps_the_newest_of_each_api():
    fb = _feedback()
    for i in range(40):
        _note(fb, FETCH)
        fb.take(_dump(("org/apache/kafka/common/requests/FetchRequest{}".format(i), 1)))
    assert len(fb.seeds["Fetch"]) == 16


KNOW = Knowledge(topics=[TopicInfo("kproto-fuzz-seed", __import__("uuid").uuid4(), [0, 1, 2])])


def test_tree_mutations_leave_the_seed_and_keep_requests_encodable():
    rng = random.Random(7)
    gen = ValueGenerator(rng, KNOW)
    encoded = refused = changed = 0
    for spec, version in ((FETCH, 12), (FETCH, 17), (METADATA, 12),
                          (schema.api_by_name("Produce"), 9)):
        for _ in range(60):
            seed = gen.request(spec, version)
            before = seed.encode(version)
            out, done = tree_mutators.mutate(seed, gen.request(spec, version),
                                             gen.request(spec, version), rng)
            assert seed.encode(version) == before  # the seed itself is left as it was
            changed += bool(done)  # (an op with nothing to work on, no ints, does nothing)
            try:
                body = out.encode(version)
            except Exception:
                refused += 1  # a nudged int past its field's width: the caller sends the seed
                continue
            encoded += 1
            assert type(out).decode(body, version).encode(version) == body
    assert encoded > 3 * refused and changed > 200


def test_paths_reach_nested_fields_and_lists():
    F = FetchRequest
    request = F(topics=[F.FetchTopic(topic="t", partitions=[F.FetchPartition(partition=3)])])
    paths = dict(tree_mutators.walk(request))
    assert paths[("topics", 0, "partitions", 0, "partition")] == 3
    tree_mutators.put(request, ("topics", 0, "partitions", 0, "partition"), 5)
    assert tree_mutators.get(request, ("topics", 0, "partitions", 0, "partition")) == (True, 5)
    assert tree_mutators.get(request, ("topics", 1)) == (False, None)
    assert tree_mutators.get(MetadataRequest(), ("topics", 0))[0] is False


def test_a_sequence_run_that_reached_new_code_is_kept_as_a_seed_with_feedback_on():
    from kproto.messages import HeartbeatRequest
    from kproto.tools.fuzz.sequence_seeds import SequenceSeed, Step

    heartbeat = schema.api_by_name("Heartbeat")
    for enabled in (True, False):
        fb = _feedback(enabled)
        for i in range(2):
            run = SequenceSeed("seq.stale_generation_heartbeat", [
                Step(heartbeat, 4, HeartbeatRequest(generation_id=i), [])])
            fb.note(("seq", "seq.stale_generation_heartbeat", ""), ("Heartbeat",), 0.2,
                    weight=3, sequence=run)
            # the first run reaches new code in the group coordinator, the second nothing
            fb.take(_dump(("org/apache/kafka/coordinator/group/GroupMetadataManager",
                           0b1111)))
        kept = fb.sequence_seeds.get("seq.stale_generation_heartbeat", [])
        if enabled:
            assert [s.steps[0].request.generation_id for s in kept] == [0]
            assert kept[0].credit == 4.0
            picks = [fb.pick_sequence("seq.stale_generation_heartbeat") for _ in range(100)]
            assert 20 < sum(p is not None for p in picks) < 80  # SEED_SHARE of the draws
        else:
            assert not kept and fb.pick_sequence("seq.stale_generation_heartbeat") is None


def test_tree_mutations_keep_waits_short_and_session_timeouts_as_they_are():
    from kproto.messages import JoinGroupRequest
    from kproto.tools.fuzz.tree_mutators import LONGEST_WAIT_MS

    rng = random.Random(11)
    gen = ValueGenerator(rng, KNOW)
    waits = set()
    for _ in range(300):
        seed = gen.request(FETCH, 12)
        out, _ = tree_mutators.mutate(seed, gen.request(FETCH, 12), None, rng)
        waits.add(out.max_wait_ms)
    assert max(waits) <= LONGEST_WAIT_MS and len(waits) > 3
    join = JoinGroupRequest(group_id="kproto-fuzz-g", session_timeout_ms=1 << 30,
                            rebalance_timeout_ms=1 << 30, member_id="")
    tree_mutators.shorten_waits(join, rng)
    assert join.session_timeout_ms == 1 << 30  # waits for nothing
    assert join.rebalance_timeout_ms <= LONGEST_WAIT_MS


def test_a_decoded_seed_whose_bytes_point_into_its_frame_is_mutated_like_any_other():
    # A seed sent after a tree mutation is decoded from its own frame: its records are a
    # memoryview, which copy.deepcopy refuses (it ended a run with feedback once).
    from kproto.messages import ProduceRequest as P

    sent = P(acks=1, timeout_ms=5, topic_data=[P.TopicProduceData(
        name="kproto-fuzz-t", partition_data=[
        P.PartitionProduceData(index=0, records=b"abc")])])
    decoded = P.decode(sent.encode(9), 9)
    rng = random.Random(4)
    for _ in range(30):
        out, _ = tree_mutators.mutate(decoded, sent, decoded, rng)
        out.encode(9)
    assert tree_mutators.clone(decoded).encode(9) == sent.encode(9)
