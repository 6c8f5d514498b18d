"""What a run may send, and the state it starts from.

Owns the plan (which APIs and versions, from the broker's ApiVersions and the options), the
safety lists (cluster-internal APIs left out by default; APIs that create, change or
delete, whose every name gets the fuzzer's prefix and which get only body-keeping
mutants), learning realistic names from Metadata, and the seed topic a run (and a replay)
creates.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Optional, Sequence

from kproto.errors import ToolUsageError
from kproto.tools.fuzz import schema
from kproto.tools.fuzz.target import Target
from kproto.tools.fuzz.values import Knowledge, TopicInfo
from kproto.messages import CreateTopicsRequest, FindCoordinatorRequest, ProduceRequest
from kproto.records import build_batch

CLUSTER_APIS = frozenset((
    "LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControlledShutdown", "WriteTxnMarkers",
    "AlterReplicaLogDirs", "ElectLeaders", "AlterPartitionReassignments", "AlterClientQuotas",
    "AlterUserScramCredentials", "Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Envelope",
    "FetchSnapshot", "AlterPartition", "UpdateFeatures", "BrokerRegistration",
    "BrokerHeartbeat", "UnregisterBroker", "AllocateProducerIds", "ControllerRegistration",
    "AssignReplicasToDirs", "AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter",
    "UnregisterController", "InitializeShareGroupState", "ReadShareGroupState",
    "WriteShareGroupState", "DeleteShareGroupState", "ReadShareGroupStateSummary",
    "CreateAcls", "DeleteAcls", "CreateDelegationToken", "RenewDelegationToken",
    "ExpireDelegationToken", "SaslHandshake", "SaslAuthenticate"))
PREFIXED_APIS = frozenset((
    "Produce", "CreateTopics", "DeleteTopics", "DeleteRecords", "DeleteGroups", "OffsetDelete",
    "CreatePartitions", "AlterConfigs", "IncrementalAlterConfigs", "OffsetCommit",
    "TxnOffsetCommit", "LeaveGroup", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn",
    "EndTxn", "AlterShareGroupOffsets", "DeleteShareGroupOffsets",
    "StreamsGroupHeartbeat", "ConsumerGroupHeartbeat", "ShareGroupHeartbeat", "JoinGroup",
    "SyncGroup", "Heartbeat", "ShareAcknowledge", "ShareFetch"))
# Mutations that leave the body's bytes as they are (safe for PREFIXED_APIS).
BODY_KEEPING = ("frame.size_lie", "frame.correlation_id", "frame.trailing")

def resolve_plan(advertised: dict[int, tuple[int, int]], apis: Optional[list[str]] = None,
                 versions: Optional[tuple[int, int]] = None, cluster_apis: bool = False,
                 skip_apis: Sequence[str] = ()) -> list[tuple[schema.ApiSpec, list[int]]]:
    """(API, versions) to fuzz: the ones asked for (or all advertised), within what both the
    broker and kproto know and ``--versions``."""
    if versions is not None and versions[0] > versions[1]:
        raise ToolUsageError("empty version range {}-{}".format(*versions))
    if apis:
        specs = []
        for name in apis:
            spec = schema.api_by_name(name)
            if spec is None:
                raise ToolUsageError("unknown API {!r}".format(name))
            if spec.api_key not in advertised:
                raise ToolUsageError("the broker does not advertise {}".format(spec.api_name))
            specs.append(spec)
    else:
        specs = [schema.api(k) for k in sorted(advertised) if k in schema.apis()]
        if not cluster_apis:
            specs = [s for s in specs if s.api_name not in CLUSTER_APIS]
    specs = [s for s in specs if s.api_name not in skip_apis]
    plan = []
    for spec in specs:
        lo, hi = advertised[spec.api_key]
        lo, hi = max(lo, spec.min_version), min(hi, spec.max_version)
        if versions is not None:
            lo, hi = max(lo, versions[0]), min(hi, versions[1])
        if lo <= hi:
            plan.append((spec, list(range(lo, hi + 1))))
    if not plan:
        raise ToolUsageError("no API version to fuzz: {} ∩ the broker's versions is empty"
                             .format("--versions {}-{}".format(*versions)
                                     if versions else "the selection"))
    return plan


def learn(target: Target, prefix: str) -> Knowledge:
    """Topics, ids, partitions and broker ids from one Metadata (all topics)."""
    know = Knowledge(prefix=prefix, groups=[prefix + "g" + str(i) for i in range(3)])
    md = target.metadata()
    if md is None:
        return know
    know.node_ids = [b.node_id for b in md.brokers]
    for t in md.topics:
        if t.error_code == 0 and t.name:
            know.topics.append(TopicInfo(t.name, t.topic_id,
                                         sorted(p.partition_index for p in t.partitions)))
    return know


def seed_topic(target: Target, know: Knowledge) -> None:
    """A prefixed 3-partition topic with two 3-record batches in each partition (created
    with CreateTopics when advertised), so reads have data and batch boundaries to get
    wrong."""
    name = know.prefix + "seed"
    if not any(t.name == name for t in know.topics):
        v = target.version_for(19, 7)
        if v is not None:
            target.call(CreateTopicsRequest(timeout_ms=5000, topics=[
                CreateTopicsRequest.CreatableTopic(name=name, num_partitions=3,
                                                   replication_factor=1)]), v, timeout=10.0)
    v = target.version_for(0, 12)
    if v is None or v < 3:
        return
    now = int(time.time() * 1000)
    for batch in range(2):
        records = build_batch([(None, "r{}-{}".format(batch, i).encode(), [], now)
                               for i in range(3)])
        target.call(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=name, partition_data=[
                ProduceRequest.PartitionProduceData(index=p, records=records)
                for p in range(3)])]), v)


def warm_coordinators(target: Target, know: Knowledge, wait: float = 20.0) -> bool:
    """Ask for the coordinators of a prefixed group and transactional id until both are
    found (a fresh Kafka creates __consumer_offsets and __transaction_state on the first
    ask and answers COORDINATOR_NOT_AVAILABLE until they are loaded), at most ``wait``
    seconds: the sequences then meet groups and transactions, not their loading."""
    v = target.version_for(10)
    if v is None or v < 1:
        return False
    keys = [(0, know.prefix + "g0"), (1, know.prefix + "txn")]
    deadline = time.monotonic() + wait
    while keys and time.monotonic() < deadline:
        for key_type, key in list(keys):
            req = FindCoordinatorRequest(key_type=key_type)
            if v >= 4:
                req.coordinator_keys = [key]
            else:
                req.key = key
            _, answer = target.call(req, v)
            if answer is None:
                return False
            code = answer.coordinators[0].error_code if v >= 4 and answer.coordinators \
                else answer.error_code
            if code == 0:
                keys.remove((key_type, key))
        if keys:
            time.sleep(0.5)
    return not keys


def enforce_prefix(request: Any, know: Knowledge, issued: frozenset[str] = frozenset()
                   ) -> Any:
    """Every string in the tree starts with the prefix, but for ``issued`` (member ids the
    broker gave in the fuzzer's own groups: they name nobody else's resource); every uuid
    names one of the fuzzer's own topics or nothing (a random id)."""
    own = [t.topic_id for t in know.topics if t.name.startswith(know.prefix)]

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            return value if value.startswith(know.prefix) or value == "" or \
                value in issued else know.prefix + value
        if isinstance(value, uuid.UUID):
            return value if value in own or value.int == 0 else uuid.uuid4()
        if isinstance(value, list):
            return [fix(v) for v in value]
        if hasattr(value, "_fields"):
            for name in value._fields:
                setattr(value, name, fix(getattr(value, name)))
        return value

    fix(request)
    return request


__all__ = ["ToolUsageError", "resolve_plan", "learn", "seed_topic", "warm_coordinators",
           "enforce_prefix",
           "CLUSTER_APIS", "PREFIXED_APIS", "BODY_KEEPING"]
