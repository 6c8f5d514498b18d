"""Sequence-level strategies: stateful request sequences a normal client never sends.

Owns each named sequence (SyncGroup before JoinGroup, heartbeats with stale generations,
fetch-session epochs out of order, ConsumerGroupHeartbeat/ShareGroupHeartbeat epoch jumps,
KIP-848 static members and regex subscriptions, share-group fetches and acknowledgements
interleaved with leaves and session epochs out of order, transactions driven with wrong
producer ids and epochs, commits for unknown members, interleaved pipelined requests) and its own semantic check
(the broker must refuse what the protocol forbids). Each runs against a
:class:`~kproto.tools.fuzz.target.Target`, records every exchange it makes and returns
``(verdict, exchange)`` pairs; group names carry the fuzzer's prefix. A sequence whose
preconditions the broker does not meet (API not advertised, no fetch sessions) returns
nothing.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, Callable, Optional

from kproto.errors import ErrorCode
from kproto.tools.fuzz import oracles, schema
from kproto.tools.fuzz.dictionary import Dictionary
from kproto.tools.fuzz.mutators import make_case
from kproto.tools.fuzz.oracles import Exchange, Verdict
from kproto.tools.fuzz.target import Target
from kproto.tools.fuzz.values import Knowledge, ValueGenerator
from kproto.messages import (AddPartitionsToTxnRequest, ConsumerGroupHeartbeatRequest,
                             EndTxnRequest, FetchRequest, FindCoordinatorRequest,
                             HeartbeatRequest, InitProducerIdRequest, JoinGroupRequest,
                             OffsetCommitRequest, ShareAcknowledgeRequest, ShareFetchRequest,
                             ShareGroupHeartbeatRequest, SyncGroupRequest)

Found = list[tuple[Verdict, Exchange]]
SLOW = 10.0  # joins may wait for a rebalance delay


class Run:
    """One sequence's view of the broker: versions chosen at random among those both sides
    know, every exchange recorded."""

    def __init__(self, target: Target, rng: random.Random, knowledge: Knowledge,
                 dictionary: Optional[Dictionary] = None) -> None:
        self.target, self.rng, self.knowledge = target, rng, knowledge
        self.exchanges: list[Exchange] = []
        self.answers: list[Any] = []  # each exchange's decoded answer (None: none)
        self.found: Found = []
        self.apis: Optional[set[int]] = None  # the APIs being fuzzed (pipelines use them)
        self.dictionary = dictionary  # what the answers issued goes there too

    def version(self, key: int, lowest: int = 0, highest: Optional[int] = None
                ) -> Optional[int]:
        top = self.target.version_for(key, highest)
        if top is None or key not in self.target.api_versions:
            return None
        lo = max(self.target.api_versions[key][0], schema.api(key).min_version, lowest)
        return self.rng.randint(lo, top) if lo <= top else None

    def call(self, request: Any, version: int, timeout: Optional[float] = None) -> Any:
        ex, answer = self.target.call(request, version, timeout=timeout)
        self.record(ex, answer, request)
        return answer

    def record(self, ex: Exchange, answer: Any, request: Any) -> None:
        """One exchange made: judged, and what its answer issued harvested."""
        self.exchanges.append(ex)
        self.answers.append(answer)
        _, verdicts = oracles.evaluate(ex)
        self.found += [(v, ex) for v in verdicts]
        if self.dictionary is not None:
            self.dictionary.harvest(request, answer)

    def expect_refused(self, answer: Any, codes: list[int], what: str) -> None:
        """``what`` must not succeed: error code 0 in every place it could refuse is a
        finding (content oracle)."""
        if answer is None or not self.exchanges:
            return
        if codes and all(c == 0 for c in codes):
            self.found.append((Verdict("content", oracles.shape(what) + " accepted",
                                       "the broker accepted " + what), self.exchanges[-1]))

    def group(self) -> str:
        return "{}seq-{}".format(self.knowledge.prefix, uuid.UUID(int=self.rng.getrandbits(128)))


def sync_before_join(run: Run) -> None:
    v = run.version(14)
    if v is None:
        return
    answer = run.call(SyncGroupRequest(group_id=run.group(), generation_id=1,
                                       member_id="kproto-fuzz-ghost", protocol_type="consumer",
                                       protocol_name="range", assignments=[]), v)
    if answer is not None:
        run.expect_refused(answer, [answer.error_code], "SyncGroup before JoinGroup")


def _join(run: Run, group: str) -> Optional[tuple[str, int]]:
    v = run.version(11, lowest=4)
    if v is None:
        return None
    req = JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=1000,
                           member_id="", protocol_type="consumer", protocols=[
                               JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                         metadata=b"")])
    answer = run.call(req, v, timeout=SLOW)
    if answer is None:
        return None
    if answer.error_code == ErrorCode.MEMBER_ID_REQUIRED:  # join again with the id given
        req.member_id = answer.member_id
        answer = run.call(req, v, timeout=SLOW)
    if answer is None or answer.error_code != 0:
        return None
    return answer.member_id, answer.generation_id


def stale_generation_heartbeat(run: Run) -> None:
    group = run.group()
    joined = _join(run, group)
    v = run.version(12)
    if joined is None or v is None:
        return
    member, generation = joined
    stale = generation - 1 if run.rng.random() < 0.5 else generation + 7
    answer = run.call(HeartbeatRequest(group_id=group, generation_id=stale, member_id=member), v)
    if answer is not None:
        run.expect_refused(answer, [answer.error_code],
                           "Heartbeat with generation {} (current {})".format(stale, generation))


def commit_unknown_member(run: Run) -> None:
    v = run.version(8, lowest=1, highest=9)  # names (topic ids from v10)
    topics = run.knowledge.topics
    if v is None or not topics:
        return
    topic = run.rng.choice([t for t in topics if t.name.startswith(run.knowledge.prefix)]
                           or topics)
    req = OffsetCommitRequest(group_id=run.group(), generation_id_or_member_epoch=5,
                              member_id="kproto-fuzz-ghost", topics=[
                                  OffsetCommitRequest.OffsetCommitRequestTopic(
                                      name=topic.name, partitions=[
                                          OffsetCommitRequest.OffsetCommitRequestPartition(
                                              partition_index=topic.partitions[0]
                                              if topic.partitions else 0,
                                              committed_offset=0)])])
    answer = run.call(req, v)
    if answer is not None:
        codes = [p.error_code for t in answer.topics for p in t.partitions]
        run.expect_refused(answer, codes, "OffsetCommit for an unknown member (generation 5)")


def fetch_session_epochs(run: Run) -> None:
    v = run.version(1, lowest=7, highest=12)
    topics = run.knowledge.topics
    if v is None or not topics:
        return
    topic = run.rng.choice(topics)

    def fetch(session_id: int, epoch: int) -> Any:
        return run.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024,
                                     session_id=session_id, session_epoch=epoch, topics=[
                                         FetchRequest.FetchTopic(topic=topic.name, partitions=[
                                             FetchRequest.FetchPartition(
                                                 partition=topic.partitions[0]
                                                 if topic.partitions else 0,
                                                 partition_max_bytes=1024)])]), v)

    first = fetch(0, 0)
    if first is None or first.error_code != 0 or first.session_id == 0:
        return  # no fetch sessions here
    session = first.session_id
    jump = run.rng.choice((2, 5, 0x7FFFFFFF))
    answer = fetch(session, jump)
    if answer is not None:
        run.expect_refused(answer, [answer.error_code],
                           "Fetch session epoch {} after epoch 0".format(jump))
    fetch(session, -1)  # close the session


def _epoch_jump(run: Run, key: int, cls: Any, extra: dict[str, Any], name: str) -> None:
    v = run.version(key)
    if v is None:
        return
    group, member = run.group(), str(uuid.UUID(int=run.rng.getrandbits(128)))
    if key == 68 and v >= 1:
        # names and regex together from v1 (a null regex kills librdkafka's mock: the
        # generator finds that on its own; here the join must get through)
        extra = dict(extra, subscribed_topic_regex="")
    first = run.call(cls(group_id=group, member_id=member, member_epoch=0, **extra), v)
    if first is None or first.error_code != 0:
        return
    member = first.member_id or member
    jump = first.member_epoch + run.rng.choice((1, 10, 1000))
    extra_hb = {k: val for k, val in extra.items()
                if k not in ("subscribed_topic_names", "subscribed_topic_regex")}
    answer = run.call(cls(group_id=group, member_id=member, member_epoch=jump, **extra_hb), v)
    if answer is not None:
        run.expect_refused(answer, [answer.error_code], "{} epoch jump {} -> {}".format(
            name, first.member_epoch, jump))
    run.call(cls(group_id=group, member_id=member, member_epoch=-1), v)  # leave


def consumer_group_epoch_jump(run: Run) -> None:
    topics = [t.name for t in run.knowledge.topics[:2]]
    _epoch_jump(run, 68, ConsumerGroupHeartbeatRequest,
                {"rebalance_timeout_ms": 1000, "subscribed_topic_names": topics,
                 "topic_partitions": []}, "ConsumerGroupHeartbeat")


def share_group_epoch_jump(run: Run) -> None:
    topics = [t.name for t in run.knowledge.topics[:2]]
    _epoch_jump(run, 76, ShareGroupHeartbeatRequest, {"subscribed_topic_names": topics},
                "ShareGroupHeartbeat")


def _own_topic(run: Run) -> Any:
    own = [t for t in run.knowledge.topics if t.name.startswith(run.knowledge.prefix)]
    return run.rng.choice(own or run.knowledge.topics) if run.knowledge.topics else None


def txn_out_of_order(run: Run) -> None:
    """A transaction driven wrong after a good InitProducerId: partitions added under an
    epoch the coordinator never gave, or the transaction ended for another producer id or
    a future epoch. Each must be refused (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING); the transaction is aborted after."""
    vi, va, ve = run.version(22), run.version(24, highest=3), run.version(26)
    topic = _own_topic(run)
    if vi is None or va is None or ve is None or topic is None:
        return
    txn = "{}txn-{:x}".format(run.knowledge.prefix, run.rng.getrandbits(48))
    vf = run.version(10, lowest=1)
    if vf is not None:
        fc = FindCoordinatorRequest(key_type=1)
        if vf >= 4:
            fc.coordinator_keys = [txn]
        else:
            fc.key = txn
        run.call(fc, vf)
    init = run.call(InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=10000,
                                          producer_id=-1, producer_epoch=-1), vi, timeout=SLOW)
    if init is None or init.error_code != 0:
        return  # no transaction coordinator (yet)
    pid, epoch = init.producer_id, init.producer_epoch
    partition = topic.partitions[0] if topic.partitions else 0

    def add(producer_epoch: int) -> Any:
        return run.call(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=producer_epoch, v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                    name=topic.name, partitions=[partition])]), va)

    wrong = run.rng.choice(("add_future_epoch", "end_unknown_producer", "end_future_epoch"))
    if wrong == "add_future_epoch":
        answer = add(epoch + 1)
        if answer is not None:
            run.expect_refused(answer, [p.partition_error_code
                                        for t in answer.results_by_topic_v3_and_below
                                        for p in t.results_by_partition],
                               "AddPartitionsToTxn under a future producer epoch")
    else:
        add(epoch)
        end_pid, end_epoch = (pid + 1, epoch) if wrong == "end_unknown_producer" else (
            pid, epoch + 1)
        answer = run.call(EndTxnRequest(transactional_id=txn, producer_id=end_pid,
                                        producer_epoch=end_epoch, committed=True), ve)
        if answer is not None:
            run.expect_refused(answer, [answer.error_code], "EndTxn for {}".format(
                "another producer id" if wrong == "end_unknown_producer"
                else "a future producer epoch"))
    run.call(EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                           committed=False), ve)  # abort


def share_group_interleaved(run: Run) -> None:
    """A share group member joins, fetches, then either fetches with a share-session epoch
    out of order, or leaves and acknowledges afterwards: both must be refused
    (INVALID_SHARE_SESSION_EPOCH; a member that left holds no acquired records)."""
    vh, vf, va = run.version(76), run.version(78), run.version(79)
    topic = _own_topic(run)
    if vh is None or vf is None or va is None or topic is None or topic.topic_id is None:
        return
    group, member = run.group(), str(uuid.UUID(int=run.rng.getrandbits(128)))
    hb = run.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                             subscribed_topic_names=[topic.name]), vh)
    if hb is None or hb.error_code != 0:
        return
    member = hb.member_id or member
    partition = topic.partitions[0] if topic.partitions else 0

    def fetch(epoch: int) -> Any:
        req = ShareFetchRequest(group_id=group, member_id=member, share_session_epoch=epoch,
                                max_wait_ms=0, min_bytes=0, max_bytes=1 << 16, topics=[
                                    ShareFetchRequest.FetchTopic(
                                        topic_id=topic.topic_id, partitions=[
                                            ShareFetchRequest.FetchPartition(
                                                partition_index=partition)])])
        if vf >= 1:
            req.max_records, req.batch_size = 10, 10
        return run.call(req, vf)

    fetch(0)
    if run.rng.random() < 0.5:
        jump = run.rng.choice((3, 100, 0x7FFFFFFF))
        answer = fetch(jump)
        if answer is not None:
            run.expect_refused(answer, [answer.error_code],
                               "ShareFetch share-session epoch {} after 0".format(jump))
        run.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member,
                                            member_epoch=-1), vh)
        return
    run.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1), vh)
    answer = run.call(ShareAcknowledgeRequest(
        group_id=group, member_id=member, share_session_epoch=1, topics=[
            ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=topic.topic_id, partitions=[
                ShareAcknowledgeRequest.AcknowledgePartition(
                    partition_index=partition, acknowledgement_batches=[
                        ShareAcknowledgeRequest.AcknowledgementBatch(
                            first_offset=0, last_offset=0, acknowledge_types=[1])])])]), va)
    partitions = [p.error_code for t in answer.responses for p in t.partitions] \
        if answer is not None else []
    if partitions:  # an answer without the partition acknowledged nothing
        run.expect_refused(answer, [answer.error_code] + partitions,
                           "ShareAcknowledge after the member left")


def consumer_group_static_member(run: Run) -> None:
    """KIP-848 static membership: a second member joining with the instance id of an active
    one must be refused (UNRELEASED_INSTANCE_ID); subscriptions by name or, from v1, by
    regex."""
    v = run.version(68)
    topic = _own_topic(run)
    if v is None or topic is None:
        return
    group = run.group()
    instance = "{}inst-{:x}".format(run.knowledge.prefix, run.rng.getrandbits(32))
    members = [str(uuid.UUID(int=run.rng.getrandbits(128))) for _ in range(2)]

    def join(member: str) -> Any:
        req = ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                            instance_id=instance, rebalance_timeout_ms=1000,
                                            subscribed_topic_names=[topic.name],
                                            topic_partitions=[])
        if v >= 1:
            req.subscribed_topic_regex = ""
            if run.rng.random() < 0.5:
                req.subscribed_topic_names = None
                req.subscribed_topic_regex = run.knowledge.prefix + ".*"
        return run.call(req, v)

    first = join(members[0])
    if first is None or first.error_code != 0:
        return
    second = join(members[1])
    if second is not None:
        run.expect_refused(second, [second.error_code],
                           "a second member with an active static member's instance id")
    for i, answer in enumerate((first, second)):
        if answer is not None and answer.error_code == 0:
            run.call(ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=answer.member_id or members[i], member_epoch=-1,
                instance_id=instance), v)


PIPELINE_APIS = (3, 18, 2, 9, 10, 15, 16, 1)


def pipelined(run: Run) -> None:
    """Several requests written back to back (one correlation id used twice), answers read
    after: they must come back in order, each echoing its request's correlation id."""
    target, rng = run.target, run.rng
    gen = ValueGenerator(rng, run.knowledge, dictionary=run.dictionary)
    cases = []
    keys = [k for k in PIPELINE_APIS if target.version_for(k) is not None and
            (run.apis is None or k in run.apis)] or [18]
    for _ in range(rng.randint(3, 8)):
        key = rng.choice(keys)
        v = run.version(key)
        if v is None:
            continue
        cases.append(make_case(schema.api(key), v, gen.request(schema.api(key), v,
                                                                realism=1.0),
                               target.next_correlation_id()))
    if len(cases) >= 2:
        cases[-1].correlation_id = cases[-2].correlation_id  # the same id twice
    wire = b"".join(c.wire for c in cases)
    try:
        s = target.main()
        s.sendall(wire)
    except OSError:
        target.drop_main()
        return
    for case in cases:
        outcome, answer = target.read_frame(s, target.timeout)
        ex = Exchange(case.wire, True, outcome, answer, case.request, "seq.pipelined")
        run.record(ex, oracles.decode_answer(ex)[0], case.request)
        if outcome != oracles.ANSWER:
            target.drop_main()
            return


# The APIs each sequence sends (it runs only when all are being fuzzed).
SEQUENCE_APIS: dict[str, frozenset[int]] = {
    "seq.sync_before_join": frozenset((14,)),
    "seq.stale_generation_heartbeat": frozenset((11, 12)),
    "seq.commit_unknown_member": frozenset((8,)),
    "seq.fetch_session_epochs": frozenset((1,)),
    "seq.consumer_group_epoch_jump": frozenset((68,)),
    "seq.share_group_epoch_jump": frozenset((76,)),
    "seq.pipelined": frozenset(),
    "seq.txn_out_of_order": frozenset((22, 24, 26)),
    "seq.share_group_interleaved": frozenset((76, 78, 79)),
    "seq.consumer_group_static_member": frozenset((68,)),
}

SEQUENCES: dict[str, Callable[[Run], None]] = {
    "seq.sync_before_join": sync_before_join,
    "seq.stale_generation_heartbeat": stale_generation_heartbeat,
    "seq.commit_unknown_member": commit_unknown_member,
    "seq.fetch_session_epochs": fetch_session_epochs,
    "seq.consumer_group_epoch_jump": consumer_group_epoch_jump,
    "seq.share_group_epoch_jump": share_group_epoch_jump,
    "seq.pipelined": pipelined,
    "seq.txn_out_of_order": txn_out_of_order,
    "seq.share_group_interleaved": share_group_interleaved,
    "seq.consumer_group_static_member": consumer_group_static_member,
}


def start(name: str, target: Target, rng: random.Random, knowledge: Knowledge,
          apis: Optional[set[int]] = None, dictionary: Optional[Dictionary] = None) -> Run:
    """Run the sequence ``name``; the run holds its exchanges, answers and verdicts."""
    run = Run(target, rng, knowledge, dictionary)
    run.apis = apis
    SEQUENCES[name](run)
    return run


def run_sequence(name: str, target: Target, rng: random.Random, knowledge: Knowledge,
                 apis: Optional[set[int]] = None) -> tuple[Found, list[Exchange]]:
    run = start(name, target, rng, knowledge, apis)
    return run.found, run.exchanges


__all__ = ["SEQUENCES", "SEQUENCE_APIS", "run_sequence", "start", "Run"]
