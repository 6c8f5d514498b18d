"""``fuzz replay`` of a replayed sequence seed's finding threads this broker's answers.

A finding of a sequence seed's replay is its frames plus, per step, what the step's answer
issued. Here such a finding is recorded on the test's broker as a replay records one (one
connection, every answer decoded and what it issued kept): a JoinGroup (twice when the
broker asks for a member id first), the leader's SyncGroup and a Heartbeat, then the
OffsetCommit the member would send next, built from the ids those answers issued (not sent
while recording, so that whether the replay's commit was accepted shows in the group's
committed offsets). The member then leaves: every id in the later frames is stale. Replayed
from its reproducer file, the commit is accepted (the replay's own JoinGroup issued the
member id and generation that were threaded into it); the same file without ``issued`` (a
reproducer written before it existed) still replays, its frames as recorded, and that
commit is refused (not on Tansu, which lets the departed member join again under its old
id). The group id is the recorded one in both. Shrinking such a finding in a run threads its
candidates the same way and keeps what each kept step issued beside it.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from pathlib import Path

import pytest

from kproto import TopicPartition
from kproto.consumer.classic.consumer_protocol import (Assignment, Subscription,
                                                      encode_assignment, encode_subscription)
from kproto.consumer.classic.group_requests import MAX_VERSIONS
from kproto.errors import ErrorCode
from kproto.messages import (ApiVersionsRequest, FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest,
                             LeaveGroupRequest, OffsetCommitRequest, OffsetFetchRequest,
                             SyncGroupRequest)
from kproto.tools.fuzz import corpus, schema, shrink
from kproto.tools.fuzz.corpus import Finding
from kproto.tools.fuzz.dictionary import issued
from kproto.tools.fuzz.mutators import make_case
from kproto.tools.fuzz.oracles import ANSWER, Exchange, Verdict
from kproto.tools.fuzz.replay import replay
from kproto.tools.fuzz.runner import Fuzzer, FuzzConfig
from kproto.tools.fuzz.sequence_runs import REPLAY
from kproto.tools.fuzz.sequences import SLOW, Run
from kproto.tools.fuzz.target import Target
from kproto.tools.fuzz.values import Knowledge
from tests.brokers._net import wait_until

OFFSET = 3  # the offset the finding's last step commits


def _coordinator(broker, group: str) -> Target:
    """A target at the group's coordinator (a fresh Kafka loads __consumer_offsets first)."""
    host, port = broker.addresses[0]
    boot = Target(host, port, timeout=SLOW)
    boot.fetch_api_versions()
    v = boot.version_for(10)
    assert v is not None and v >= 1
    found = []

    def ask() -> bool:
        req = FindCoordinatorRequest(key_type=0)
        if v >= 4:
            req.coordinator_keys = [group]
        else:
            req.key = group
        answer = boot.call(req, v)[1]
        c = answer.coordinators[0] if v >= 4 else answer
        if c.error_code == 0:
            found.append((c.host, c.port))
        return bool(found)

    try:
        assert wait_until(ask, 30.0, 0.5), "no coordinator for " + group
    finally:
        boot.close()
    target = Target(found[0][0], found[0][1], timeout=SLOW)
    target.fetch_api_versions()
    return target


def _versions(target: Target) -> dict[int, int]:
    # the consumer's caps: the mock advertises group versions it cannot parse
    out = {key: target.version_for(key, MAX_VERSIONS[key]) for key in (11, 12, 13, 14)}
    out[8] = target.version_for(8, 9)  # topics by name
    out[9] = target.version_for(9, 7)  # one group per request
    assert None not in out.values()
    return out  # type: ignore[return-value]


def _record(target: Target, group: str, topic: str) -> tuple[Finding, str]:
    """The finding (and the member id it recorded), then the member gone."""
    v = _versions(target)
    run = Run(target, random.Random(0), Knowledge())
    join = JoinGroupRequest(group_id=group, session_timeout_ms=6000,
                            rebalance_timeout_ms=1000, member_id="", protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                                name="range", metadata=encode_subscription(
                                    Subscription(topics=[topic]), 0))])
    joined = run.call(join, v[11], timeout=SLOW)
    if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        join.member_id = joined.member_id
        joined = run.call(join, v[11], timeout=SLOW)
    assert joined.error_code == 0 and joined.leader == joined.member_id
    member, generation = joined.member_id, joined.generation_id
    synced = run.call(SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member, protocol_type="consumer",
        protocol_name="range", assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=member, assignment=encode_assignment(
                Assignment([TopicPartition(topic, 0)]), 0))]), v[14], timeout=SLOW)
    assert synced.error_code == 0
    beat = run.call(HeartbeatRequest(group_id=group, generation_id=generation,
                                     member_id=member), v[12])
    assert beat.error_code == 0
    commit = make_case(schema.api(8), v[8], OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=OFFSET)])]),
        target.next_correlation_id())
    leave = LeaveGroupRequest(group_id=group)
    if v[13] >= 3:
        leave.members = [LeaveGroupRequest.MemberIdentity(member_id=member)]
    else:
        leave.member_id = member
    left = target.call(leave, v[13])[1]
    assert left.error_code == 0 and all(m.error_code == 0 for m in left.members or [])
    target.close()
    steps = [e.wire for e in run.exchanges] + [commit.wire]
    return Finding(api="OffsetCommit", api_key=8, version=v[8], oracle="content",
                   signature="the test's own", message="", strategy=REPLAY,
                   level="sequence", wire=commit.wire, valid=True, steps=steps,
                   issued=[issued(a) for a in run.answers] + [[]]), member


def _committed(target: Target, group: str, topic: str) -> int:
    v = _versions(target)[9]
    answer = target.call(OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]), v)[1]
    assert answer.error_code == 0
    [t] = answer.topics
    [p] = t.partitions
    return p.committed_offset


def _group() -> str:  # a name a sequence makes up
    return "kproto-fuzz-seq-{}".format(uuid.uuid4())


@pytest.mark.needs("classic_groups")
def test_replay_threads_the_ids_this_brokers_answers_issue(broker, tmp_path: Path):
    topic, group = broker.new_topic(prefix="replay"), _group()
    target = _coordinator(broker, group)
    finding, member = _record(target, group, topic)
    assert any(("member_id", member) in step for step in finding.issued)
    loaded = corpus.load(corpus.save(finding, tmp_path))
    assert loaded.issued == finding.issued and loaded.steps == finding.steps
    assert _committed(target, group, topic) == -1
    replay(loaded, target, setup=False)
    assert _committed(target, group, topic) == OFFSET  # the commit of a live member
    target.close()


# Not Tansu: it admits a JoinGroup naming a member id it no longer knows (Kafka answers
# UNKNOWN_MEMBER_ID), so the recorded frames bring the member that left back to life.
@pytest.mark.broker_kinds("mock", "apache_kafka")
@pytest.mark.needs("classic_groups")
def test_a_reproducer_without_issued_replays_its_frames_as_recorded(broker, tmp_path: Path):
    topic, group = broker.new_topic(prefix="replay"), _group()
    target = _coordinator(broker, group)
    finding, _ = _record(target, group, topic)
    data = json.loads(corpus.save(finding, tmp_path).read_text())
    del data["issued"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    old = corpus.load(path)
    assert old.issued == [] and old.steps == finding.steps
    replay(old, target, setup=False)
    # the recorded member left: its stale ids' commit is refused
    assert _committed(target, group, topic) == -1
    target.close()


@pytest.mark.broker_kinds("mock", "apache_kafka")  # Tansu: as above
@pytest.mark.needs("classic_groups")
def test_a_threaded_finding_shrinks_with_what_its_kept_steps_issued(broker):
    # As many ApiVersions before the group's steps as there are group steps: the first
    # chunk ddmin drops, on a group the recorded member has left. The commit without them
    # is accepted only with the ids this sending's JoinGroup got threaded into it
    # (unthreaded, no candidate fires and no step goes).
    topic, group = broker.new_topic(prefix="replay"), _group()
    target = _coordinator(broker, group)
    finding, _ = _record(target, group, topic)
    n = len(finding.steps) - 1
    harmless = [make_case(schema.api(18), 0, ApiVersionsRequest(), target.next_correlation_id()
                          ).wire for _ in range(n)]
    finding.steps, finding.issued = harmless + finding.steps, [[]] * n + finding.issued
    recorded = list(zip(finding.steps, finding.issued))
    fuzzer = Fuzzer(FuzzConfig("{}:{}".format(target.host, target.port), seconds=4.0),
                    target)
    fuzzer.stats.started = time.monotonic()  # shrinking within a 4 s run: a few candidates
    shrink.shrink_sequence(fuzzer, finding, Verdict("content", "OffsetCommit accepted", ""),
                           Exchange(finding.wire, True, ANSWER))
    assert not set(harmless) & set(finding.steps) and finding.steps[-1] == finding.wire
    assert list(zip(finding.steps, finding.issued)) == [s for s in recorded
                                                        if s[0] in finding.steps]
    assert _committed(target, group, topic) == OFFSET
    target.close()
