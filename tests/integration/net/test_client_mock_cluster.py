"""NetworkClient against librdkafka's mock cluster (3 brokers, real sockets on 127.0.0.1)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest

from kproto import errors
from kproto.messages import (ApiVersionsRequest, FetchRequest, HeartbeatRequest, MetadataRequest,
                             MetadataResponse)
from kproto.net.broker import ConnectionState
from kproto.net.client import NetworkClient
from kproto.structs import TopicPartition
from tests.brokers._net import closed_port
from tests.threads import TestThread
from tests.support.polling import clients, poll_until, wait

METADATA, FETCH, HEARTBEAT, API_VERSIONS = 3, 1, 12, 18


def test_bootstrap_then_metadata_gives_brokers_leaders_epochs_and_topic_ids(mock_cluster, clients):
    topic = mock_cluster.new_topic(partitions=3)
    client = clients(mock_cluster)
    wait(client, client.cluster.set_topics([topic]))
    cluster = client.cluster
    assert {b.node_id for b in cluster.brokers()} == {1, 2, 3}
    assert {(b.host, b.port) for b in cluster.brokers()} == set(mock_cluster.addresses)
    assert cluster.partitions_for_topic(topic) == {0, 1, 2}
    for p in range(3):
        assert cluster.leader_for_partition(TopicPartition(topic, p)) in {1, 2, 3}
        assert cluster.leader_epoch_for_partition(TopicPartition(topic, p)) >= 0
    topic_id = cluster.topic_id(topic)
    assert topic_id is not None and topic_id.int != 0
    assert cluster.topic_name(topic_id) == topic
    assert cluster.partitions_for_topic("no-such-topic") is None


def test_send_negotiates_the_highest_common_version(mock_cluster_factory, clients):
    cluster = mock_cluster_factory(3)
    cluster.set_apiversion(METADATA, 0, 4)
    cluster.set_apiversion(HEARTBEAT, 0, 2)
    client = clients(cluster)
    wait(client, client.request_metadata_update())
    node = sorted(b.node_id for b in client.cluster.brokers())[0]
    response = wait(client, client.send(node, MetadataRequest(topics=[])))
    assert isinstance(response, MetadataResponse)
    assert client.api_version(METADATA, node) == 4
    assert client.broker_api_versions(node)[METADATA] == (0, 4)
    assert client.api_version(HEARTBEAT, node) == 2
    # Capped at what kproto's message class has even if a broker offered more.
    assert client.api_version(FETCH, node) == min(client.broker_api_versions(node)[FETCH][1],
                                                   FetchRequest.max_version)
    # An explicit version is sent as asked (the fuzzing use).
    older = wait(client, client.send(node, MetadataRequest(topics=[]), version=1))
    assert [b.node_id for b in older.brokers] and older.cluster_id is None


def test_api_versions_fallback_body_of_the_mock_is_understood(mock_cluster_factory, clients):
    # The mock answers ApiVersions v3/v4 in its fallback format unless told it supports
    # them; both paths must end with a ready connection.
    cluster = mock_cluster_factory(1)
    client = clients(cluster)
    wait(client, client.request_metadata_update())
    assert wait(client, client.send(1, ApiVersionsRequest(), version=0)).error_code == 0
    versions = client.broker_api_versions(1)
    assert versions[API_VERSIONS][1] < ApiVersionsRequest.max_version  # so the fallback ran
    cluster.set_apiversion(API_VERSIONS, 0, 3)
    fresh = clients(cluster)
    wait(fresh, fresh.request_metadata_update())
    assert wait(fresh, fresh.send(1, MetadataRequest(topics=[]))).brokers
    assert fresh.broker_api_versions(1)[API_VERSIONS] == (0, 3)


def test_unknown_node_fails_at_once(mock_cluster, clients):
    client = clients(mock_cluster)
    future = client.send(42, MetadataRequest(topics=[]))
    assert future.failed() and isinstance(future.exception, errors.UnknownBrokerIdError)


def test_request_timeout_fails_the_request_and_closes_the_connection(mock_cluster_factory, clients):
    cluster = mock_cluster_factory(3)
    client = clients(cluster)
    wait(client, client.request_metadata_update())
    assert wait(client, client.send(2, MetadataRequest(topics=[])))
    cluster.broker_rtt(2, 3_000)
    slow = client.send(2, MetadataRequest(topics=[]), timeout_ms=300)
    other = client.send(2, MetadataRequest(topics=[]), timeout_ms=60_000)
    client.poll(20_000, future=slow)
    assert isinstance(slow.exception, errors.RequestTimeoutError)
    assert slow.retriable()
    # The connection was closed: the other request in flight failed too, retriably.
    client.poll(0)
    assert other.failed() and isinstance(other.exception, errors.KafkaConnectionError)
    assert client.in_flight_request_count(2) == 0
    cluster.broker_rtt(2, 0)
    assert poll_until(client, lambda: client.connection_delay(2) == 0)
    assert wait(client, client.send(2, MetadataRequest(topics=[]))).brokers


def test_broker_down_fails_fast_backs_off_idle_and_comes_back(mock_cluster_factory, clients):
    cluster = mock_cluster_factory(3)
    client = clients(cluster, reconnect_backoff_ms=200, reconnect_backoff_max_ms=800)
    wait(client, client.request_metadata_update())
    assert wait(client, client.send(3, MetadataRequest(topics=[])))
    cluster.broker_down(3)
    # Requests to it fail (connection closed or refused), none hangs.
    failures = []
    for _ in range(3):
        future = client.send(3, HeartbeatRequest(group_id="g", member_id="m"))
        client.poll(10_000, future=future)
        assert future.failed()
        failures.append(future.exception)
    assert all(getattr(exc, "retriable", False) for exc in failures)
    assert any(isinstance(exc, errors.NodeNotReadyError) for exc in failures) or \
        client.connection_delay(3) > 0
    # While the node is backing off a request fails at once, without any I/O.
    if client.connection_delay(3) > 0:
        immediate = client.send(3, MetadataRequest(topics=[]))
        assert isinstance(immediate.exception, errors.NodeNotReadyError)
    # Waiting does not spin: reconnect attempts are spaced by the backoff. The CPU time of
    # this thread, which does all of the client's work (the process's would count the
    # in-process mock cluster's threads, and any other thread, too).
    cpu, wall = time.thread_time(), time.monotonic()
    while time.monotonic() - wall < 1.5:
        client.ready(3)
        client.poll(100)
    assert time.thread_time() - cpu < 1.0
    assert client.connection_failed(3) is not None or not client.is_ready(3)
    cluster.broker_up(3)
    assert poll_until(client, lambda: client.ready(3))
    assert wait(client, client.send(3, MetadataRequest(topics=[]))).brokers


def test_poll_with_nothing_to_do_sleeps(mock_cluster, clients):
    client = clients(mock_cluster, metadata_max_age_ms=60_000)
    wait(client, client.request_metadata_update())
    cpu = time.thread_time()  # this thread's: the client's poll runs on it
    client.poll(1_000)
    assert time.thread_time() - cpu < 0.5


def test_poll_due_ms_reports_the_work_no_socket_announces(mock_cluster, clients):
    """What an event-loop shell (kproto.aio) polls the client for besides a socket's
    readiness and io_interest's deadline: a refresh asked for, bytes not yet written, a
    disconnect asked for. Idle, the next is the periodic refresh."""
    client = clients(mock_cluster, metadata_max_age_ms=60_000)
    wait(client, client.request_metadata_update())
    node = sorted(b.node_id for b in client.cluster.brokers())[0]
    assert poll_until(client, lambda: client.ready(node))
    assert 1_000 < client.poll_due_ms() <= 60_000  # the periodic refresh
    refresh = client.request_metadata_update()
    # Due now, or once the backoff after an answer that taught nothing new passes (at
    # most retry_backoff_max_ms, 1 s by default).
    assert client.poll_due_ms() <= 1_000
    wait(client, refresh)
    assert client.poll_due_ms() > 0
    answer = client.send(node, MetadataRequest(topics=[]))
    assert client.poll_due_ms() == 0
    wait(client, answer)
    assert client.poll_due_ms() > 0
    client.disconnect_async(node)
    assert client.poll_due_ms() == 0
    client.poll(0)
    assert client.poll_due_ms() > 0 and not client.is_ready(node)


def test_leader_move_is_seen_through_metadata(mock_cluster_factory, clients):
    cluster = mock_cluster_factory(3)
    topic = cluster.new_topic(partitions=1)
    client = clients(cluster)
    wait(client, client.cluster.set_topics([topic]))
    tp = TopicPartition(topic, 0)
    old_leader = client.cluster.leader_for_partition(tp)
    old_epoch = client.cluster.leader_epoch_for_partition(tp)
    new_leader = next(b for b in (1, 2, 3) if b != old_leader)
    cluster.set_partition_leader(topic, 0, new_leader)
    # A newer epoch seen elsewhere (e.g. in a Fetch response) triggers the refresh.
    assert client.cluster.update_last_seen_epoch_if_newer(tp, old_epoch + 1)
    assert client.cluster.need_update()
    assert poll_until(client, lambda: client.cluster.leader_for_partition(tp) == new_leader)
    assert client.cluster.leader_epoch_for_partition(tp) > old_epoch
    assert tp in client.cluster.partitions_for_broker(new_leader)


def test_not_leader_error_requests_a_refresh(mock_cluster, clients):
    client = clients(mock_cluster, metadata_max_age_ms=600_000)
    wait(client, client.request_metadata_update())
    assert not client.cluster.need_update()
    before = client.cluster.update_count
    assert client.cluster.maybe_request_update_for_error(errors.NotLeaderOrFollowerError.errno)
    assert client.cluster.maybe_request_update_for_error(errors.UnknownTopicOrPartitionError())
    assert not client.cluster.maybe_request_update_for_error(errors.RebalanceInProgressError)
    assert poll_until(client, lambda: client.cluster.update_count > before)


def test_idle_connection_is_closed(mock_cluster, clients):
    client = clients(mock_cluster, connections_max_idle_ms=300, metadata_max_age_ms=600_000)
    wait(client, client.request_metadata_update())
    assert wait(client, client.send(1, MetadataRequest(topics=[])))
    assert not client.cluster.need_update()
    updates = client.cluster.update_count
    assert client.connection_state(1) is ConnectionState.READY
    assert poll_until(client, lambda: client.is_disconnected(1), timeout_ms=10_000)
    # Closing an idle connection is not a failure: it may reconnect at once.
    assert client.connection_failed(1) is None
    # As in Java, where the Selector reports an idle expiry like any disconnect, it asks for
    # a metadata refresh (metadata_max_age_ms is far away here).
    assert client.cluster.need_update() or client.cluster.update_count > updates
    assert wait(client, client.send(1, MetadataRequest(topics=[]))).brokers


def test_closing_a_connection_fails_its_requests_retriably(mock_cluster_factory, clients):
    cluster = mock_cluster_factory(3)
    client = clients(cluster)
    wait(client, client.request_metadata_update())
    assert wait(client, client.send(1, MetadataRequest(topics=[])))
    cluster.broker_rtt(1, 5_000)
    future = client.send(1, MetadataRequest(topics=[]))
    client.poll(50)
    client.close(1)
    assert future.failed() and isinstance(future.exception, errors.KafkaConnectionError)
    assert future.exception.retriable


def test_wakeup_interrupts_a_blocked_poll(mock_cluster, clients):
    client = clients(mock_cluster, metadata_max_age_ms=600_000)
    wait(client, client.request_metadata_update())
    returned = threading.Event()

    def poller():
        client.poll(120_000)
        returned.set()

    thread = TestThread(target=poller, daemon=True)
    thread.start()
    for _ in range(600):  # keep waking until the poller returns (it may not be in select yet)
        client.wakeup()
        if returned.wait(0.05):
            break
    assert returned.is_set()
    thread.join()


def test_heartbeat_thread_and_application_thread_share_the_client(mock_cluster, clients):
    client = clients(mock_cluster, metadata_max_age_ms=600_000)
    wait(client, client.request_metadata_update())
    results: list = []
    stop = threading.Event()

    def heartbeat():
        while not stop.is_set() and len(results) < 20:
            future = client.send(2, HeartbeatRequest(group_id="g", generation_id=1, member_id="m"))
            client.poll(5_000, future=future)
            results.append(future)

    thread = TestThread(target=heartbeat, daemon=True)
    thread.start()
    app = []
    for _ in range(20):
        future = client.send(1, MetadataRequest(topics=[]))
        client.poll(5_000, future=future)
        app.append(future)
    thread.join(60)
    stop.set()
    assert not thread.is_alive()
    assert all(f.succeeded() for f in app)
    assert len(results) == 20 and all(f.succeeded() for f in results)
    # The mock has no such group: the broker answered, which is what matters here.
    assert all(f.value.error_code != 0 for f in results)


def test_all_addresses_of_a_host_are_tried(mock_cluster, clients, monkeypatch):
    import socket

    host, port = mock_cluster.addresses[0]
    real = socket.getaddrinfo
    with closed_port() as dead_port:
        def resolve(name, *args, **kwargs):
            if name == "kproto-two-addresses.invalid":
                # First an address where nothing listens, then the broker.
                return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", dead_port)),
                        (socket.AF_INET, socket.SOCK_STREAM, 6, "", (host, port))]
            return real(name, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", resolve)
        client = NetworkClient(bootstrap_servers="kproto-two-addresses.invalid:{}".format(port))
        try:
            wait(client, client.request_metadata_update())
            assert len(client.cluster.brokers()) == 3
        finally:
            client.close()


@contextlib.contextmanager
def _closed_ports(n: int) -> Iterator[list[int]]:
    """Ports on 127.0.0.1 that refuse connections while the block runs (kept bound:
    :func:`tests.brokers._net.closed_port`)."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(closed_port()) for _ in range(n)]


def test_no_reachable_bootstrap_server_backs_off_without_spinning():
    with _closed_ports(1) as (port,):
        client = NetworkClient(bootstrap_servers="127.0.0.1:{}".format(port),
                               reconnect_backoff_ms=100, reconnect_backoff_max_ms=400)
        try:
            client.request_metadata_update()
            cpu = time.thread_time()  # this thread's: the client's poll runs on it
            client.poll(1_500)
            # The refresh stays due; between attempts the client sleeps in select.
            assert time.thread_time() - cpu < 0.75
            assert isinstance(client.connection_failed("bootstrap-0"), errors.KafkaConnectionError)
            assert client.connection_state("bootstrap-0") is not ConnectionState.READY
        finally:
            client.close()


def test_metadata_update_fails_once_every_bootstrap_server_failed():
    with _closed_ports(2) as ports:
        client = NetworkClient(bootstrap_servers=",".join("127.0.0.1:{}".format(p) for p in ports),
                               reconnect_backoff_ms=5_000, reconnect_backoff_max_ms=5_000)
        try:
            future = client.request_metadata_update()
            client.poll(20_000, future=future)
            assert future.failed()
            assert isinstance(future.exception, errors.NoBrokersAvailable)
            assert future.retriable()
            assert isinstance(future.exception.__cause__, errors.KafkaConnectionError)
            # Both servers were tried before giving up on this refresh.
            for node_id in ("bootstrap-0", "bootstrap-1"):
                assert isinstance(client.connection_failed(node_id), errors.KafkaConnectionError)
            # A later refresh is still attempted (and fails the same way) rather than hanging.
            again = client.request_metadata_update()
            client.poll(20_000, future=again)
            assert again.failed()
        finally:
            client.close()


def test_metadata_update_succeeds_when_one_bootstrap_server_is_down(mock_cluster, clients):
    with _closed_ports(1) as (port,):
        client = NetworkClient(bootstrap_servers="127.0.0.1:{},{}".format(
            port, mock_cluster.bootstrap_servers), reconnect_backoff_ms=5_000,
            reconnect_backoff_max_ms=5_000)
        try:
            # Whichever server least_loaded_node picks first, the refresh does not fail while
            # another one may still be tried.
            future = client.request_metadata_update()
            client.poll(20_000, future=future)
            assert future.succeeded(), future.exception
            assert len(client.cluster.brokers()) == 3
        finally:
            client.close()


def test_poll_returns_the_responses_it_completed_and_callbacks_run(mock_cluster, clients):
    client = clients(mock_cluster, metadata_max_age_ms=600_000)
    wait(client, client.request_metadata_update())
    seen = []
    futures = [client.send(node, MetadataRequest(topics=[])).add_callback(seen.append)
               for node in (1, 2, 3)]
    returned = []
    while not all(f.is_done for f in futures):
        returned += client.poll(10_000, future=futures[-1])
    assert all(f.succeeded() for f in futures)
    assert sorted(map(id, returned)) == sorted(id(f.value) for f in futures)
    assert sorted(map(id, seen)) == sorted(map(id, returned))
    errbacks = []
    client.send(99, MetadataRequest(topics=[])).add_errback(errbacks.append)
    assert isinstance(errbacks[0], errors.UnknownBrokerIdError)


def test_connect_that_never_completes_times_out():
    import socket

    # A listener whose accept queue is full: the kernel drops further SYNs, so a connect
    # stays in progress until the client's setup timeout gives up on it.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    client = NetworkClient(bootstrap_servers="127.0.0.1:{}".format(port),
                           socket_connection_setup_timeout_ms=200, reconnect_backoff_ms=1_000,
                           reconnect_backoff_max_ms=1_000)
    try:
        client.request_metadata_update()
        assert poll_until(client, lambda: client.connection_failed("bootstrap-0") is not None,
                          timeout_ms=20_000)
        failure = client.connection_failed("bootstrap-0")
        assert isinstance(failure, errors.KafkaConnectionError) and "timed out" in str(failure)
        assert client.connection_delay("bootstrap-0") > 0
    finally:
        client.close()
        for s in fillers + [server]:
            s.close()


def test_all_topics_metadata_for_pattern_subscriptions(mock_cluster, clients):
    first, second = mock_cluster.new_topic(partitions=1), mock_cluster.new_topic(partitions=2)
    client = clients(mock_cluster)
    wait(client, client.request_metadata_update())
    assert first not in client.cluster.topics()  # only topics of interest so far (none)
    client.cluster.need_all_topic_metadata()
    wait(client, client.request_metadata_update())
    assert {first, second} <= client.cluster.topics()
    assert client.cluster.partitions_for_topic(second) == {0, 1}


def test_a_stale_metadata_error_in_any_response_requests_a_refresh(mock_cluster_factory, clients):
    from kproto.messages import ListOffsetsRequest

    cluster = mock_cluster_factory(3)
    topic = cluster.new_topic(partitions=1)
    client = clients(cluster, metadata_max_age_ms=600_000)
    wait(client, client.cluster.set_topics([topic]))
    before = client.cluster.update_count
    leader = client.cluster.leader_for_partition(TopicPartition(topic, 0))
    cluster.push_request_errors(2, [errors.NotLeaderOrFollowerError.errno])
    request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
            partition_index=0, timestamp=-2)])])
    response = wait(client, client.send(leader, request))
    assert response.topics[0].partitions[0].error_code == 6  # per partition, not top level
    assert poll_until(client, lambda: client.cluster.update_count > before)


def test_versions_on_the_wire_follow_the_brokers_limits(mock_cluster_factory):
    # librdkafka's request tracking has no API version: a recording proxy in front of a
    # 1-broker mock reads the request headers the client really sent.
    from tests.brokers.proxy import BrokerProxy

    cluster = mock_cluster_factory(1)
    cluster.set_apiversion(FETCH, 4, 7)
    cluster.set_apiversion(METADATA, 0, 5)
    with BrokerProxy(cluster.addresses[0]) as proxy:
        client = NetworkClient(bootstrap_servers=proxy.bootstrap_servers, client_id="wire-check")
        try:
            response = wait(client, client.send("bootstrap-0", MetadataRequest(topics=[])))
            assert [b.node_id for b in response.brokers] == [1]
            request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[])
            wait(client, client.send("bootstrap-0", request))
            # An explicit version goes out as asked (the fuzzing use); the mock drops the
            # connection over a version it does not serve.
            with pytest.raises(errors.KafkaConnectionError):
                wait(client, client.send("bootstrap-0", request, version=8))
        finally:
            client.close()
        sent = proxy.requests()
    # ApiVersions first (its own fallback steps, if any, before anything else), then the
    # requests at the highest version both sides have.
    keys = [r.api_key for r in sent]
    first_other = next(i for i, k in enumerate(keys) if k != API_VERSIONS)
    assert first_other > 0 and API_VERSIONS not in keys[first_other:]
    # (the client's own metadata refresh adds Metadata requests of its own)
    assert {r.api_version for r in sent if r.api_key == METADATA} == {5}
    assert [r.api_version for r in sent if r.api_key == FETCH] == [7, 8]
    assert set(keys[first_other:]) == {METADATA, FETCH}
    assert {r.client_id for r in sent} == {"wire-check"}
    assert len({r.correlation_id for r in sent}) == len(sent)


def _usable_from_another_thread(client: NetworkClient) -> bool:
    """Can another thread use the client now (within 10 s)?"""
    done = []
    other = TestThread(target=lambda: done.append(client.is_ready(1)))
    other.start()
    other.join(10)
    return bool(done)


def test_metadata_update_callbacks_run_with_no_client_lock_held(mock_cluster, clients):
    # Another thread must be able to use the client while a refresh's callback runs (the
    # callback could wait for that thread, e.g. a heartbeat thread sending).
    client = clients(mock_cluster)
    seen = []
    future = client.request_metadata_update()
    future.add_both(lambda _: seen.append(_usable_from_another_thread(client)))
    wait(client, future)
    assert seen == [True]
    # A failed refresh goes the same way.
    with _closed_ports(1) as (port,):
        lonely = NetworkClient(bootstrap_servers="127.0.0.1:{}".format(port))
        try:
            failed = lonely.request_metadata_update()
            failed.add_errback(lambda _: seen.append(_usable_from_another_thread(lonely)))
            lonely.poll(20_000, future=failed)
            assert failed.failed() and seen == [True, True]
        finally:
            lonely.close()


def test_a_request_waiting_for_its_connection_times_out_on_its_own(mock_cluster_factory, clients):
    # The broker answers after 1.5 s, so the connection is still negotiating ApiVersions
    # when the short request's own timeout passes: it fails without being sent, the
    # connection is kept, and the patient request goes through once the node is ready.
    cluster = mock_cluster_factory(1)
    cluster.broker_rtt(1, 1_500)
    client = clients(cluster)
    short = client.send("bootstrap-0", MetadataRequest(topics=[]), timeout_ms=200)
    patient = client.send("bootstrap-0", MetadataRequest(topics=[]), timeout_ms=30_000)
    client.poll(20_000, future=short)
    assert short.failed()
    assert type(short.exception) is errors.KafkaTimeoutError  # not sent: no RequestTimeoutError
    assert short.retriable() and "not sent within" in str(short.exception)
    assert not patient.is_done
    assert wait(client, patient).brokers
    assert client.connection_failed("bootstrap-0") is None
