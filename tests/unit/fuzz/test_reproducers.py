"""Reproducer files and the threading of a replayed sequence seed's frames, sans-IO.

A finding of a replayed sequence seed keeps, per step, what the step's answer issued; the
file round-trips it (uuids as uuids: threading compares typed values) and a file written
before the field existed still loads. ``thread_frame`` turns a recorded frame into the one
this replay sends. Against a real broker: tests/integration/fuzz/test_replay_threading.py.
"""

import json
import struct
import uuid

from kproto.messages import HeartbeatRequest, JoinGroupResponse, SyncGroupRequest
from kproto.tools.fuzz import corpus, schema
from kproto.tools.fuzz.corpus import Finding
from kproto.tools.fuzz.dictionary import issued
from kproto.tools.fuzz.mutators import case_of, frame_wire, make_case
from kproto.tools.fuzz.sequence_seeds import learn, thread_frame

TOPIC_ID = uuid.UUID("6f3b1c2e-8d4a-4f0e-9a51-2b7c0d9e1f33")


def _finding(**kw):
    wire = make_case(schema.api(12), 4, HeartbeatRequest(
        group_id="kproto-fuzz-seq-1", generation_id=3, member_id="m-old"), 9).wire
    return Finding(api="Heartbeat", api_key=12, version=4, oracle="content", signature="s",
                   message="m", strategy="seq.seed_replay", level="sequence", wire=wire,
                   valid=True, steps=[b"\x00\x00\x00\x04join", wire], **kw)


def test_what_each_step_issued_survives_the_reproducer_file(tmp_path):
    steps_issued = [[("member_id", "m-old"), ("generation_id", 3), ("topic_id", TOPIC_ID)],
                    []]
    f = _finding(issued=steps_issued)
    path = corpus.save(f, tmp_path)
    data = json.loads(path.read_text())
    assert data["issued"][0][2] == ["topic_id", {"uuid": str(TOPIC_ID)}]
    again = corpus.load(path)
    assert again.issued == steps_issued and isinstance(again.issued[0][2][1], uuid.UUID)
    assert again.steps == f.steps and again.wire == f.wire and again.key == f.key


def test_a_reproducer_written_before_issued_existed_loads_without_it(tmp_path):
    f = _finding(issued=[[("member_id", "m-old")], []])
    data = f.to_json()
    del data["issued"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    old = corpus.load(path)
    assert old.issued == [] and old.steps == f.steps and old.wire == f.wire
    assert Finding.from_json(_finding().to_json()).issued == []


def test_a_recorded_frame_is_threaded_under_its_recorded_header():
    case = make_case(schema.api(14), 3, SyncGroupRequest(
        group_id="kproto-fuzz-seq-1", generation_id=3, member_id="m-old",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id="m-old",
                                                                 assignment=b"\x01")]), 41)
    threaded = {}
    learn([("member_id", "m-old"), ("generation_id", 3)],
          JoinGroupResponse(generation_id=5, member_id="m-new"), threaded)
    wire, request = thread_frame(case.wire, threaded)
    assert struct.unpack_from(">i", wire)[0] == len(wire) - 4
    assert wire[:4 + len(case.header)][4:] == case.header  # correlation id, client id
    again = case_of(wire)
    assert again is not None and again.correlation_id == 41
    assert again.request.to_dict() == request.to_dict()
    assert (request.generation_id, request.member_id, request.group_id) == \
        (5, "m-new", "kproto-fuzz-seq-1")  # the group id as recorded
    assert request.assignments[0].member_id == "m-new"
    assert case_of(case.wire).request.member_id == "m-old"  # the recorded frame untouched


def test_frames_nothing_threads_and_frames_that_are_no_request_go_as_recorded():
    wire = make_case(schema.api(12), 4, HeartbeatRequest(
        group_id="g", generation_id=3, member_id="m-other"), 1).wire
    threaded = {("member_id", "m-old"): "m-new"}
    same, request = thread_frame(wire, threaded)
    assert same is wire and request.member_id == "m-other"
    for junk in (wire[:-1], wire + b"\x00", frame_wire(wire[4:] + b"\x00"),
                 b"\x00\x00\x00\x02\x00\x0c",
                 struct.pack(">i", len(wire) - 4) + b"\x7f\x7f" + wire[6:]):
        assert thread_frame(junk, threaded) == (junk, None)


def test_the_nth_value_issued_under_a_name_stands_for_the_nth_recorded():
    threaded = {}
    recorded = [("member_id", "a"), ("generation_id", 1), ("member_id", "b")]
    answer = JoinGroupResponse(generation_id=1, member_id="x", leader="y")
    assert issued(answer) == [("generation_id", 1), ("leader", "y"), ("member_id", "x")]
    learn(recorded, answer, threaded)
    assert threaded == {("member_id", "a"): "x"}  # the same generation: nothing to thread
    learn(recorded, None, threaded)  # no answer issued nothing
    assert threaded == {("member_id", "a"): "x"}
