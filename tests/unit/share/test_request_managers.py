"""Sans-IO: the share engine's request managers on a fake clock.

ShareMembershipManager + ShareHeartbeatRequestManager (join, interval, fencing, leave,
fatal errors) and ShareConsumeRequestManager (what goes to which node: opening fetches,
piggy-backed acknowledgements, commits in ShareAcknowledge, one request in flight per
node, no fetch while a node's records are buffered, session errors, closing), driven by
calling ``poll`` and completing the UnsentRequests with decoded response objects.
Metadata is a small stand-in (leaders and topic names), as the managers only read it.
"""

from __future__ import annotations

import queue
import uuid

from kproto.consumer.background.coordinator_request_manager import Coordinator, CoordinatorRequestManager
from kproto.consumer.background.events import BackgroundEventHandler, ErrorEvent, drain
from kproto.consumer.share.acknowledgements import Acknowledgements, AcknowledgeType
from kproto.consumer.share.events import AckEntry, ShareAcknowledgementCommitCallbackEvent
from kproto.consumer.share.share_consume_request_manager import ShareConsumeRequestManager
from kproto.consumer.share.share_fetch_buffer import ShareFetchBuffer
from kproto.consumer.share.share_heartbeat_request_manager import ShareHeartbeatRequestManager
from kproto.consumer.share.share_membership_manager import ShareMembershipManager
from kproto.consumer.subscription_state import SubscriptionState
from kproto.consumer.background.member_state import MemberState
from kproto.consumer.share.share_session_handler import FINAL_EPOCH, ShareFetchParams
from kproto.errors import ShareSessionNotFoundError
from kproto.messages import (ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
                             ShareGroupHeartbeatResponse)
from kproto.records.builder import build_batch
from kproto.structs import TopicIdPartition, TopicPartition

TID = uuid.UUID(int=42)
TIP0 = TopicIdPartition(TID, TopicPartition("t", 0))
TIP1 = TopicIdPartition(TID, TopicPartition("t", 1))


class Metadata:
    """Leaders and names, as the managers read them from ClusterMetadata."""

    def __init__(self, leaders: dict[int, int]) -> None:
        self.leaders = leaders

    def leader_for_partition(self, tp: TopicPartition) -> int:
        return self.leaders.get(tp.partition, -1)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return "t" if topic_id == TID else None


def heartbeat_answer(epoch: int = 1, partitions=None, error_code: int = 0, interval: int = 1000):
    response = ShareGroupHeartbeatResponse(error_code=error_code, member_epoch=epoch, heartbeat_interval_ms=interval)
    if partitions is not None:
        response.assignment = ShareGroupHeartbeatResponse.Assignment(topic_partitions=[
            ShareGroupHeartbeatResponse.TopicPartitions(topic_id=TID, partitions=list(partitions))])
    else:
        response.assignment = None
    return response


FLOOR_MS = 100  # retry_backoff_ms: the least time between two heartbeats


class Group:
    """A share member with its heartbeat manager; the coordinator is node 7."""

    def __init__(self, max_poll_interval_ms: int = 300_000) -> None:
        self.events: queue.Queue = queue.Queue()
        self.coordinator = CoordinatorRequestManager("g")
        self.coordinator.coordinator = Coordinator(7, "h", 1, 7)
        self.subscriptions = SubscriptionState()
        self.membership = ShareMembershipManager("g", self.subscriptions, topic_name_for_id=Metadata({}).topic_name)
        self.heartbeat = ShareHeartbeatRequestManager(0, self.coordinator, self.membership,
                                                      BackgroundEventHandler(self.events),
                                                      max_poll_interval_ms=max_poll_interval_ms)

    def subscribe(self, topics) -> None:
        """What the share engine does on subscribe(): it joins at once."""
        self.subscriptions.subscribe(topics)
        self.membership.on_subscription_updated()
        self.membership.on_consumer_poll()

    def send(self, now: int) -> list:
        self.membership.poll(now)  # add-only reconciliations run from the background loop
        return self.heartbeat.poll(now).unsent_requests

    def join(self, epoch: int = 3, partitions=(0, 1), now: int = 0):
        """Join and take ``partitions``; returns the join request."""
        self.subscribe(["t"])
        [join] = self.send(now)
        join.complete(heartbeat_answer(epoch=epoch, partitions=list(partitions)), now)
        # Reconciled at once (nothing to revoke): acknowledged at once, after the floor.
        [ack] = self.send(now + FLOOR_MS)
        ack.complete(heartbeat_answer(epoch=epoch), now + FLOOR_MS)
        return join


def test_join_reconciles_acknowledges_then_heartbeats_at_the_interval():
    g = Group()
    assert g.send(0) == []  # not subscribed: nothing to send
    g.subscribe(["t"])
    [join] = g.send(0)
    assert (join.request.member_epoch, join.request.subscribed_topic_names) == (0, ["t"])
    assert g.send(1) == []  # never two in flight
    join.complete(heartbeat_answer(epoch=5, partitions=[0, 1], interval=1000), 10)
    assert g.send(99) == []  # the floor: no two heartbeats less than retry_backoff_ms apart
    [ack] = g.send(100)
    assert g.membership.state is MemberState.STABLE and g.membership.member_epoch == 5
    assert [tip.partition for tip in g.membership.assigned_partitions()] == [0, 1]
    assert {tip.topic_id for tip in g.membership.assigned_partitions()} == {TID}
    ack.complete(heartbeat_answer(epoch=5), 112)
    assert g.send(1111) == []
    [beat] = g.send(1112)
    # The topic names are sent only when joining or after they changed.
    assert (beat.request.member_epoch, beat.request.subscribed_topic_names) == (5, None)
    assert beat.request.member_id == join.request.member_id


def test_a_join_answered_without_an_assignment_heartbeats_again_only_after_the_interval():
    """A share member joining while the coordinator has no assignment for it yet (epoch,
    no assignment): the join is the only immediate heartbeat; then one per interval, even
    when the network loop polls every millisecond and every answer comes at once."""
    g = Group()
    g.subscribe(["t"])
    sent_at = []
    for now in range(10_000):
        for unsent in g.send(now):
            sent_at.append(now)
            unsent.complete(heartbeat_answer(epoch=0, interval=3000), now)
    assert g.membership.state is MemberState.JOINING
    assert sent_at == [0, 3000, 6000, 9000]


def test_a_revocation_waits_for_the_applications_poll():
    g = Group()
    g.join(partitions=(0, 1))
    [beat] = g.send(5000)
    beat.complete(heartbeat_answer(epoch=4, partitions=[1]), 5000)
    g.send(5001)
    assert [tip.partition for tip in g.membership.assigned_partitions()] == [0, 1]  # still owned
    g.membership.maybe_reconcile(can_commit=True)  # the application's next poll
    assert [tip.partition for tip in g.membership.assigned_partitions()] == [1]


def test_fenced_member_drops_its_assignment_and_rejoins_with_the_same_id():
    g = Group()
    join = g.join()
    [beat] = g.send(5000)
    beat.complete(heartbeat_answer(error_code=110), 5000)  # FENCED_MEMBER_EPOCH
    assert g.membership.state is MemberState.JOINING and g.membership.assigned_partitions() == []
    [rejoin] = g.send(5000 + FLOOR_MS)  # no backoff, no interval: the floor only
    assert (rejoin.request.member_epoch, rejoin.request.member_id) == (0, join.request.member_id)
    assert rejoin.request.subscribed_topic_names == ["t"]


def test_not_coordinator_forgets_the_coordinator():
    g = Group()
    g.subscribe(["t"])
    [join] = g.send(0)
    join.complete(heartbeat_answer(error_code=16), 0)  # NOT_COORDINATOR
    assert g.coordinator.coordinator is None
    assert g.send(1) == []  # waits for the coordinator
    assert g.membership.state is MemberState.JOINING


def test_a_fatal_error_is_surfaced_and_stops_heartbeats():
    g = Group()
    g.subscribe(["t"])
    [join] = g.send(0)
    join.complete(heartbeat_answer(error_code=81), 0)  # GROUP_MAX_SIZE_REACHED
    [event] = drain(g.events)
    assert isinstance(event, ErrorEvent) and type(event.error).__name__ == "GroupMaxSizeReachedError"
    assert g.membership.state is MemberState.FATAL
    assert g.send(10_000) == []


def test_leave_sends_epoch_minus_one_and_releases_the_assignment():
    g = Group()
    g.join()
    future = g.membership.leave_group()
    assert g.membership.assigned_partitions() == []
    [leave] = g.send(2 * FLOOR_MS)
    assert leave.request.member_epoch == FINAL_EPOCH
    assert future.done() and g.membership.state is MemberState.UNSUBSCRIBED  # the leave went out
    assert g.send(10_000) == []


# --- ShareConsumeRequestManager --------------------------------------------------------------


class Consumer:
    """A consume manager over two partitions: 0 led by node 1, 1 led by node 2."""

    def __init__(self) -> None:
        self.events: queue.Queue = queue.Queue()
        self.membership = ShareMembershipManager("g", SubscriptionState(), topic_name_for_id=Metadata({}).topic_name)
        self.membership.subscriptions.subscribe(["t"])
        self.membership.transition_to_joining()
        self.membership.on_heartbeat_success(heartbeat_answer(epoch=1, partitions=[0, 1]))
        self.membership.maybe_reconcile(can_commit=True)
        assert len(self.membership.assigned_partitions()) == 2
        self.buffer = ShareFetchBuffer()
        self.manager = ShareConsumeRequestManager(
            "g", self.membership, Metadata({0: 1, 1: 2}), self.buffer, BackgroundEventHandler(self.events),
            ShareFetchParams(max_records=10))
        self.now = 0

    def poll(self):
        self.now += 1
        return {u.node_id: u for u in self.manager.poll(self.now).unsent_requests}

    def build(self, unsent, version=1):
        return unsent.request.build(version)[0]

    def fetch_all(self):
        """Open both sessions with records 0-2 acquired on each partition."""
        self.manager.request_fetch()
        built = {}
        for node_id, unsent in self.poll().items():
            built[node_id] = self.build(unsent)  # built when sent, as the network thread does
            unsent.complete(fetch_answer(node_id - 1, 0, 2), self.now)
        return built


def fetch_answer(partition: int, first: int, last: int, error_code: int = 0, ack_error: int = 0):
    part = ShareFetchResponse.PartitionData(partition_index=partition, acknowledge_error_code=ack_error)
    if last >= first:
        part.records = build_batch([(None, b"x")] * (last - first + 1), base_offset=first)
        part.acquired_records = [ShareFetchResponse.AcquiredRecords(first_offset=first, last_offset=last,
                                                                    delivery_count=1)]
    return ShareFetchResponse(error_code=error_code, responses=[
        ShareFetchResponse.ShareFetchableTopicResponse(topic_id=TID, partitions=[part])])


def ack_answer(partition: int, error_code: int = 0, top_error: int = 0):
    return ShareAcknowledgeResponse(error_code=top_error, responses=[
        ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse(topic_id=TID, partitions=[
            ShareAcknowledgeResponse.PartitionData(partition_index=partition, error_code=error_code)])])


def entry(node: int, tip: TopicIdPartition, generation: int = 0, **types: int) -> AckEntry:
    a = Acknowledgements()
    for offset, t in types.items():
        a.add(int(offset[1:]), t)
    return AckEntry(node, generation, tip, a)


def test_fetches_go_to_each_leader_only_when_asked_and_open_sessions():
    c = Consumer()
    assert c.poll() == {}  # the application did not ask for records
    sent = c.fetch_all()
    assert set(sent) == {1, 2}
    first = sent[1]
    assert isinstance(first, ShareFetchRequest) and first.share_session_epoch == 0
    assert [p.partition_index for p in first.topics[0].partitions] == [0]
    assert c.manager.handler(1).epoch == 1 and c.manager.handler(2).epoch == 1
    assert {f.partition.partition for f in c.buffer.drain()} == {0, 1}


def test_no_fetch_to_a_node_whose_records_are_still_buffered():
    c = Consumer()
    c.fetch_all()
    fetch_node1 = [f for f in c.buffer.drain() if f.node_id == 1][0]
    c.buffer.add(fetch_node1)  # node 1's records not yet handed out
    c.manager.request_fetch()
    assert set(c.poll()) == {2}


def test_acknowledgements_ride_on_the_next_fetch_to_the_node_that_delivered_them():
    c = Consumer()
    c.fetch_all()
    c.buffer.drain()
    c.manager.add_acknowledgements([entry(1, TIP0, o0=1, o1=1, o2=AcknowledgeType.RELEASE)])
    c.manager.request_fetch()
    sent = c.poll()
    request = c.build(sent[1])
    assert isinstance(request, ShareFetchRequest) and request.share_session_epoch == 1
    batches = request.topics[0].partitions[0].acknowledgement_batches
    assert [(b.first_offset, b.last_offset, b.acknowledge_types) for b in batches] == [(0, 1, [1]), (2, 2, [2])]
    assert not c.build(sent[2]).topics  # node 2: same partitions, nothing to acknowledge
    sent[1].complete(fetch_answer(0, 3, 2), c.now)
    [event] = [e for e in drain(c.events) if isinstance(e, ShareAcknowledgementCommitCallbackEvent)]
    assert [(e.tip, e.acks.offsets(), e.acks.error) for e in event.entries] == [(TIP0, {0, 1, 2}, None)]


def test_commit_sends_share_acknowledge_and_completes_with_per_partition_results():
    c = Consumer()
    c.fetch_all()
    future = c.manager.add_acknowledgements(
        [entry(1, TIP0, o0=1), entry(2, TIP1, o0=AcknowledgeType.REJECT)], commit=True)
    sent = c.poll()
    assert {n: type(c.build(u)) for n, u in sent.items()} == {1: ShareAcknowledgeRequest, 2: ShareAcknowledgeRequest}
    sent[1].complete(ack_answer(0), c.now)
    assert not future.done()
    sent[2].complete(ack_answer(1, error_code=121), c.now)  # INVALID_RECORD_STATE
    result = future.result(0)
    assert result[TIP0] is None and type(result[TIP1]).__name__ == "InvalidRecordStateError"
    assert c.manager.handler(1).epoch == 2  # ShareAcknowledge moved the session on


def test_one_request_in_flight_per_node_keeps_acknowledgements_in_order():
    c = Consumer()
    c.fetch_all()
    c.manager.add_acknowledgements([entry(1, TIP0, o0=1)], commit=True)
    first = c.poll()[1]
    c.manager.add_acknowledgements([entry(1, TIP0, o1=1)], commit=True)
    assert 1 not in c.poll()  # waits for the first answer
    first.complete(ack_answer(0), c.now)
    second = c.build(c.poll()[1])
    assert [b.first_offset for b in second.topics[0].partitions[0].acknowledgement_batches] == [1]


def test_a_session_error_drops_the_nodes_buffered_records_and_fails_old_acknowledgements_locally():
    c = Consumer()
    c.fetch_all()
    c.buffer.drain()
    c.buffer.add(_fetch_for(c, 1))  # node 1 delivered records still buffered
    c.manager.add_acknowledgements([entry(1, TIP0, o0=1)], commit=True)
    sent = c.poll()
    sent[1].complete(ack_answer(0, top_error=122), c.now)  # SHARE_SESSION_NOT_FOUND
    assert c.manager.handler(1).epoch == 0 and c.manager.handler(1).generation == 1
    assert 1 not in c.buffer.buffered_nodes()
    # An acknowledgement of a record the ended session delivered is not sent anywhere.
    future = c.manager.add_acknowledgements([entry(1, TIP0, generation=0, o1=1)], commit=True)
    assert 1 not in c.poll()
    assert isinstance(future.result(0)[TIP0], ShareSessionNotFoundError)


def _fetch_for(c: Consumer, node_id: int):
    from kproto.consumer.share.share_completed_fetch import ShareCompletedFetch
    return ShareCompletedFetch(node_id, TIP0, build_batch([(None, b"x")]), [(0, 0, 1)])


def test_a_disconnect_ends_the_session_and_the_next_fetch_opens_a_new_one():
    c = Consumer()
    c.fetch_all()
    c.buffer.drain()
    c.manager.request_fetch()
    sent = c.poll()
    from kproto.errors import KafkaConnectionError
    sent[1].complete_exceptionally(KafkaConnectionError("gone"), c.now)
    assert c.manager.handler(1).epoch == 0
    c.now += 10_000  # past the backoff
    c.manager.request_fetch()
    assert c.build(c.poll()[1]).share_session_epoch == 0


def test_close_sends_a_final_acknowledge_to_every_open_session():
    c = Consumer()
    c.fetch_all()
    future = c.manager.acknowledge_on_close([entry(1, TIP0, o0=1)])
    c.manager.request_fetch()  # ignored while closing
    sent = c.poll()
    requests = {n: c.build(u) for n, u in sent.items()}
    assert {n: (type(r), r.share_session_epoch) for n, r in requests.items()} == {
        1: (ShareAcknowledgeRequest, FINAL_EPOCH), 2: (ShareAcknowledgeRequest, FINAL_EPOCH)}
    assert requests[1].topics[0].partitions[0].acknowledgement_batches[0].first_offset == 0
    assert not requests[2].topics
    sent[1].complete(ack_answer(0), c.now)
    assert not future.done()
    sent[2].complete(ShareAcknowledgeResponse(), c.now)
    assert future.done() and c.poll() == {}


def test_renew_on_a_node_without_version_2_fails_its_acknowledgements_and_keeps_the_session():
    c = Consumer()
    c.fetch_all()
    future = c.manager.add_acknowledgements([entry(1, TIP0, o0=AcknowledgeType.RENEW)], commit=True)
    unsent = c.poll()[1]
    from kproto.errors import UnsupportedVersionError
    with __import__("pytest").raises(UnsupportedVersionError):
        unsent.request.build(1)  # the network thread completes the request with this error
    unsent.complete_exceptionally(UnsupportedVersionError("v1 only"), c.now)
    assert isinstance(future.result(0)[TIP0], UnsupportedVersionError)
    assert c.manager.handler(1).epoch == 1  # never sent: the session is intact


def test_a_member_not_polled_for_max_poll_interval_leaves_and_rejoins_on_the_next_poll():
    g = Group(max_poll_interval_ms=10_000)
    join = g.join()
    [leave] = g.send(10_000)
    assert leave.request.member_epoch == FINAL_EPOCH and g.membership.assigned_partitions() == []
    assert g.membership.state is MemberState.STALE
    assert g.send(20_000) == []  # stays out until the application polls
    g.heartbeat.reset_poll_timer(20_001)
    [rejoin] = g.send(20_002)
    assert (rejoin.request.member_epoch, rejoin.request.member_id) == (0, join.request.member_id)


def test_records_arriving_after_close_began_are_not_buffered():
    c = Consumer()
    c.manager.request_fetch()
    sent = c.poll()
    c.manager.acknowledge_on_close([])
    for node_id, unsent in sent.items():
        unsent.request.build(1)
        unsent.complete(fetch_answer(node_id - 1, 0, 2), c.now)
    assert c.buffer.is_empty()  # the sessions' closing requests release them
    assert {n: c.build(u).share_session_epoch for n, u in c.poll().items()} == {1: FINAL_EPOCH, 2: FINAL_EPOCH}


def test_the_answer_to_a_leave_is_not_taken_for_a_rejoin_sent_after_it():
    g = Group()
    join = g.join()
    g.membership.leave_group()
    [leave] = g.send(200)
    g.subscribe(["t"])  # unsubscribe() returned once the leave went out; subscribe() again
    assert g.membership.state is MemberState.JOINING and g.send(201) == []  # the leave is in flight
    leave.complete(heartbeat_answer(epoch=-1), 202)
    [rejoin] = g.send(300)
    assert (rejoin.request.member_epoch, rejoin.request.member_id) == (0, join.request.member_id)
    rejoin.complete(heartbeat_answer(epoch=7, partitions=[0]), 301)
    g.send(400)
    assert g.membership.state is MemberState.STABLE and g.membership.member_epoch == 7


def test_buffered_records_carry_the_lock_duration_the_answer_gave():
    c = Consumer()
    c.manager.request_fetch()
    for node_id, unsent in c.poll().items():
        c.build(unsent)
        answer = fetch_answer(node_id - 1, 0, 2)
        answer.acquisition_lock_timeout_ms = 15000 if node_id == 1 else 0  # 0: a v0 answer says nothing
        unsent.complete(answer, c.now)
    assert {f.node_id: f.acquisition_lock_timeout_ms for f in c.buffer.drain()} == {1: 15000, 2: None}


def _forgotten(request) -> list[int]:
    return [p for topic in request.forgotten_topics_data for p in topic.partitions]


def test_a_fenced_member_forgets_a_partition_only_once_the_application_settled_what_it_holds_of_it():
    """Fenced (nothing assigned) with node 2's records arriving from a fetch in flight and
    then taken by the application: no ShareFetch forgets partition 1 at node 2 until the
    application's next poll settled them (librdkafka's mock releases a member's records of
    a partition its session forgets: their acknowledgements would fail, the records come
    again). Node 1, holding nothing, forgets partition 0 at once."""
    c = Consumer()
    c.fetch_all()
    [from_node2] = [f for f in c.buffer.drain() if f.node_id == 2]
    c.membership.transition_to_fenced()
    assert c.membership.assigned_partitions() == []
    c.buffer.add(from_node2)  # its answer came after the fence
    c.manager.request_fetch()
    sent = c.poll()
    assert set(sent) == {1} and _forgotten(c.build(sent[1])) == [0]
    # The application's poll begins a round, takes node 2's records from the buffer, and
    # only then does the background thread get that poll's event: they stay held.
    taken_in = c.buffer.next_round()
    c.buffer.drain()
    c.buffer.mark_outstanding(2)
    c.buffer.clear_outstanding(taken_in)
    c.manager.request_fetch()
    assert 2 not in c.poll()
    # The next poll acknowledges them: first in ShareAcknowledge, then partition 1 is forgotten.
    c.manager.add_acknowledgements([entry(2, TIP1, o0=1, o1=1, o2=1)])
    c.buffer.clear_outstanding(c.buffer.next_round())
    c.manager.request_fetch()
    acknowledge = c.poll()[2]
    assert isinstance(c.build(acknowledge), ShareAcknowledgeRequest)
    acknowledge.complete(ack_answer(1), c.now)
    c.manager.request_fetch()
    forget = c.build(c.poll()[2])
    assert isinstance(forget, ShareFetchRequest) and _forgotten(forget) == [1] and not forget.topics


def test_a_poll_round_settles_only_what_earlier_rounds_handed_out():
    buffer = ShareFetchBuffer()
    first = buffer.next_round()
    buffer.mark_outstanding(1)
    second = buffer.next_round()
    buffer.mark_outstanding(2)  # taken by the second poll before its event was handled
    buffer.clear_outstanding(second)
    assert buffer.buffered_nodes() == {2}
    buffer.clear_outstanding(buffer.next_round())
    assert buffer.buffered_nodes() == set() and first < second
