"""FindCoordinator for a group (kproto.consumer.find_coordinator), shared by both engines:
the request in every version, picking the group's entry out of an answer, and the classic
engine's CoordinatorDiscovery against real brokers (the lookup, and the coordinator's own
connection being opened as soon as it is found)."""

from __future__ import annotations

import threading
import time

import pytest

from kproto import errors
from kproto.consumer.background.coordinator_request_manager import CoordinatorRequestManager
from kproto.consumer.classic.coordinator_discovery import CoordinatorDiscovery
from kproto.consumer.find_coordinator import build_find_coordinator_request, group_coordinator
from kproto.messages import FindCoordinatorRequest, FindCoordinatorResponse
from kproto.clock import monotonic_ms
from kproto.net.client import NetworkClient
from kproto.net.metadata import coordinator_broker_id, coordinator_connection_id

Coordinator = FindCoordinatorResponse.Coordinator


@pytest.mark.parametrize("version", range(FindCoordinatorRequest.min_version,
                                          FindCoordinatorRequest.max_version + 1))
def test_the_group_key_travels_in_the_field_each_version_has(version):
    wire = build_find_coordinator_request("my-group", version).encode(version)
    request = FindCoordinatorRequest.decode(wire, version)
    if version >= 4:
        assert (request.coordinator_keys, request.key_type) == (["my-group"], 0)
    else:
        assert request.key == "my-group"
        assert request.key_type == 0 or version == 0  # v0 has no key type: groups only


def test_the_groups_entry_is_picked_from_a_batched_answer():
    response = FindCoordinatorResponse(coordinators=[
        Coordinator(key="other", node_id=1, host="h1", port=1),
        Coordinator(key="mine", node_id=2, host="h2", port=2)])
    entry, error = group_coordinator(response, "mine")
    assert error is None and (entry.node_id, entry.host, entry.port) == (2, "h2", 2)


def test_an_answer_before_v4_is_its_top_level_fields():
    entry, error = group_coordinator(FindCoordinatorResponse(node_id=3, host="h3", port=3), "g")
    assert error is None and (entry.node_id, entry.host, entry.port) == (3, "h3", 3)


def test_the_groups_error_is_returned_with_the_brokers_text():
    response = FindCoordinatorResponse(coordinators=[Coordinator(
        key="g", error_code=errors.GroupAuthorizationFailedError.errno, error_message="denied")])
    _, error = group_coordinator(response, "g")
    assert isinstance(error, errors.GroupAuthorizationFailedError) and "denied" in str(error)


def test_an_answer_without_the_group_is_an_illegal_state_in_both_engines():
    response = FindCoordinatorResponse(coordinators=[Coordinator(key="other", node_id=1, host="h", port=1)])
    _, error = group_coordinator(response, "g")
    assert isinstance(error, errors.IllegalStateError)
    # The KIP-848 manager treats it as fatal (not retriable) and hands it to the heartbeat.
    manager = CoordinatorRequestManager("g")
    manager._on_response(0, response)
    assert manager.coordinator is None
    assert isinstance(manager.get_and_clear_fatal_error(), errors.IllegalStateError)


def _discover(client, discovery, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while discovery.coordinator_id is None:
        assert time.monotonic() < deadline, "no coordinator found"
        future = discovery.lookup_coordinator()
        client.poll(timeout_ms=100, future=future)


def test_discovery_finds_the_coordinator_and_opens_its_own_connection_at_once(broker):
    client = NetworkClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=5000)
    found, fatal = [], []
    discovery = CoordinatorDiscovery(
        client, "find-coordinator-group", lock=threading.RLock(), clock=monotonic_ms,
        retry_backoff_ms=50, retry_backoff_max_ms=500, on_discovered=lambda: found.append(1),
        on_fatal_error=fatal.append)
    try:
        _discover(client, discovery)
        connection = discovery.coordinator_id
        broker_id = discovery.coordinator_broker_id
        assert connection == coordinator_connection_id(broker_id)
        assert coordinator_broker_id(connection) == broker_id
        assert found == [1] and fatal == []
        # Java's client.tryConnect(coordinator): the coordinator's connection is opened as it
        # is found, before any group request needs it.
        assert not client.is_disconnected(connection)
        deadline = time.monotonic() + 10
        while not client.is_ready(connection):
            assert time.monotonic() < deadline, "the coordinator connection never became ready"
            client.poll(timeout_ms=50)
        assert not discovery.coordinator_unknown()
        discovery.mark_coordinator_unknown("test")
        assert discovery.coordinator_id is None and discovery.coordinator_unknown()
    finally:
        client.close()


@pytest.mark.needs("fault_injection")
def test_forgetting_the_coordinator_closes_its_connection_and_fails_what_is_in_flight(broker):
    """Java's markCoordinatorUnknown disconnects: a request parked at a coordinator that has
    stopped answering (a SyncGroup held by a broker that forgot the member, a heartbeat after
    the session timed out) fails at once, instead of holding the member until its request
    timeout. Here the coordinator answers 20 s late; forgetting it must fail the request first."""
    client = NetworkClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=60_000)
    discovery = CoordinatorDiscovery(
        client, "forget-coordinator-group", lock=threading.RLock(), clock=monotonic_ms,
        retry_backoff_ms=50, retry_backoff_max_ms=500, on_discovered=lambda: None,
        on_fatal_error=lambda exc: None)
    try:
        _discover(client, discovery)
        connection = discovery.coordinator_id
        deadline = time.monotonic() + 10
        while not client.is_ready(connection):
            assert time.monotonic() < deadline, "the coordinator connection never became ready"
            client.poll(timeout_ms=50)
        broker.broker_rtt(coordinator_broker_id(connection), 20_000)
        version = client.api_version(FindCoordinatorRequest.api_key, connection)
        in_flight = client.send(connection, build_find_coordinator_request("forget-coordinator-group", version),
                                version=version)
        client.poll(timeout_ms=200)  # written: now it waits for the late answer
        assert not in_flight.is_done
        discovery.mark_coordinator_unknown("no answer for a whole session")
        deadline = time.monotonic() + 60
        while not in_flight.is_done:
            assert time.monotonic() < deadline
            client.poll(timeout_ms=100)
        assert isinstance(in_flight.exception, errors.KafkaConnectionError)  # not the late answer
        assert client.is_disconnected(connection)
        assert discovery.coordinator_id is None
    finally:
        client.close()


def test_a_coordinator_forgotten_as_soon_as_found_is_looked_up_again_only_after_the_backoff(broker):
    """A coordinator answering NOT_COORDINATOR to everything is forgotten as soon as it is
    found: the next lookup waits ``retry_backoff_ms`` after the last one (both engines),
    instead of one FindCoordinator per round trip."""
    now = [1_000_000.0]
    client = NetworkClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=5000)
    discovery = CoordinatorDiscovery(
        client, "find-coordinator-floor", lock=threading.RLock(), clock=lambda: now[0],
        retry_backoff_ms=50, retry_backoff_max_ms=500, on_discovered=lambda: None, on_fatal_error=lambda exc: None)
    try:
        _discover(client, discovery)  # the fake clock stands still meanwhile
        discovery.mark_coordinator_unknown("NOT_COORDINATOR")
        deadline = time.monotonic() + 10
        while not client.ready(client.least_loaded_node()):  # a node to ask is ready...
            assert time.monotonic() < deadline
            client.poll(timeout_ms=50)
        assert discovery.lookup_coordinator() is None  # ... only the floor holds the lookup back
        now[0] += 49
        assert discovery.lookup_coordinator() is None
        now[0] += 1
        assert discovery.lookup_coordinator() is not None
    finally:
        client.close()

    manager = CoordinatorRequestManager("g", retry_backoff_ms=50, jitter=0)
    (find,) = manager.poll(0).unsent_requests
    find.complete(FindCoordinatorResponse(coordinators=[Coordinator(key="g", node_id=1, host="h", port=1)]), 2)
    manager.mark_coordinator_unknown("NOT_COORDINATOR", 2)
    result = manager.poll(2)
    assert result.unsent_requests == [] and result.time_until_next_poll_ms == 48
    assert len(manager.poll(50).unsent_requests) == 1
