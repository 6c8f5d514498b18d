"""GroupOffsets (blocking OffsetFetch/OffsetCommit with retries) against real coordinators.

The coordinator lookup here is a plain FindCoordinator over the same NetworkClient (the
classic engine's coordinator offers the same two methods); it counts how often the
loops told it to forget the coordinator.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kproto import errors
from kproto.consumer.classic.group_offsets import GroupOffsets
from kproto.consumer.find_coordinator import build_find_coordinator_request, group_coordinator
from kproto.messages import FindCoordinatorRequest, OffsetCommitRequest, OffsetFetchRequest
from kproto.net.client import NetworkClient
from kproto.structs import OffsetAndMetadata, TopicPartition

TIMEOUT_MS = 10000

pytestmark = pytest.mark.broker


class FindCoordinatorLookup:
    def __init__(self, client, group):
        self.client, self.group = client, group
        self.node = None
        self.forgotten = []

    def ensure_coordinator_ready(self, timeout_ms):
        c = self.client
        if self.node is None:
            bootstrap = c.least_loaded_node()
            while not c.ready(bootstrap):
                c.poll(timeout_ms=50)
            version = c.api_version(FindCoordinatorRequest.api_key, bootstrap)
            future = c.send(bootstrap, build_find_coordinator_request(self.group, version), version=version)
            c.poll(timeout_ms=timeout_ms, future=future)
            if not future.succeeded():
                return None
            entry, error = group_coordinator(future.value, self.group)
            if error is not None:
                return None
            self.node = entry.node_id
        while not c.ready(self.node):
            c.poll(timeout_ms=50)
        return self.node

    def mark_coordinator_unknown(self, reason, *, cause=None):
        self.forgotten.append(reason)
        self.node = None


@pytest.fixture
def setup(broker):
    client = NetworkClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=5000)
    topic = broker.new_topic(partitions=2)
    group = "group-offsets-" + topic
    lookup = FindCoordinatorLookup(client, group)
    yield SimpleNamespace(client=client, topic=topic, group=group, lookup=lookup,
                          offsets=GroupOffsets(client, group, lookup, retry_backoff_ms=20),
                          tps=[TopicPartition(topic, 0), TopicPartition(topic, 1)])
    client.close()


@pytest.mark.needs("classic_groups")
def test_commit_sync_then_fetch(broker, setup):
    t0, t1 = setup.tps
    assert setup.offsets.fetch_committed_offsets(setup.tps, TIMEOUT_MS) == {t0: None, t1: None}
    setup.offsets.commit_offsets_sync({t0: OffsetAndMetadata(5, "x", -1)}, TIMEOUT_MS)
    fetched = setup.offsets.fetch_committed_offsets(setup.tps, TIMEOUT_MS, require_stable=True)
    assert fetched[t1] is None and fetched[t0].offset == 5


@pytest.mark.needs("classic_groups")
def test_commit_async_reports_through_the_callback(broker, setup):
    t0, _ = setup.tps
    seen = []
    # Asynchronous commits never wait for a coordinator lookup: a grouped consumer has one.
    setup.lookup.ensure_coordinator_ready(TIMEOUT_MS)
    future = setup.offsets.commit_offsets_async({t0: OffsetAndMetadata(9)}, lambda o, e: seen.append((o, e)))
    setup.client.poll(timeout_ms=TIMEOUT_MS, future=future)
    assert seen == [({t0: OffsetAndMetadata(9)}, None)]
    assert setup.offsets.fetch_committed_offsets([t0], TIMEOUT_MS)[t0].offset == 9


@pytest.mark.broker_kinds("mock")
def test_commit_async_without_a_coordinator_fails_fast_and_retriably(broker, setup):
    class NoCoordinator:
        def ensure_coordinator_ready(self, timeout_ms):
            return None

        def mark_coordinator_unknown(self, reason, *, cause=None):
            pass

    seen = []
    offsets = GroupOffsets(setup.client, setup.group, NoCoordinator())
    assert offsets.commit_offsets_async({setup.tps[0]: OffsetAndMetadata(1)}, lambda o, e: seen.append(e)) is None
    assert len(seen) == 1 and isinstance(seen[0], errors.CoordinatorNotAvailableError) and seen[0].retriable


@pytest.mark.needs("fault_injection")
def test_not_coordinator_is_rediscovered_and_retried(broker, setup):
    t0, _ = setup.tps
    broker.push_request_errors(OffsetCommitRequest.api_key, [16, 15])
    setup.offsets.commit_offsets_sync({t0: OffsetAndMetadata(3)}, TIMEOUT_MS)
    assert len(setup.lookup.forgotten) == 2
    broker.push_request_errors(OffsetFetchRequest.api_key, [14, 16])
    assert setup.offsets.fetch_committed_offsets([t0], TIMEOUT_MS)[t0].offset == 3
    assert len(setup.lookup.forgotten) == 3  # LOAD_IN_PROGRESS keeps the coordinator


@pytest.mark.needs("fault_injection")
def test_stale_generation_fails_the_commit_and_tells_the_engine(broker, setup):
    t0, _ = setup.tps
    verdicts = []
    broker.push_request_errors(OffsetCommitRequest.api_key, [22])
    member = SimpleNamespace(generation_id_or_member_epoch=3, member_id="m", group_instance_id=None)
    with pytest.raises(errors.CommitFailedError):
        setup.offsets.commit_offsets_sync({t0: OffsetAndMetadata(3)}, TIMEOUT_MS, member, verdicts.append)
    assert len(verdicts) == 1 and verdicts[0].reset_generation and verdicts[0].request_rejoin


@pytest.mark.needs("fault_injection")
def test_retriable_errors_until_the_timeout(broker, setup):
    t0, _ = setup.tps
    # The coordinator found and connected first: the short timeout is for the retries, and
    # the error it ends with names the last answer only if one came within it.
    setup.lookup.ensure_coordinator_ready(TIMEOUT_MS)
    broker.push_request_errors(OffsetFetchRequest.api_key, [14] * 500)
    with pytest.raises(errors.KafkaTimeoutError, match="CoordinatorLoadInProgress"):
        setup.offsets.fetch_committed_offsets([t0], 800)
