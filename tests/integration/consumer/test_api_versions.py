"""Which API versions the consumer sends: the newest both sides have, and still the oldest
kproto supports when that is all a broker offers.

- Tansu behind :class:`~tests.brokers.proxy.BrokerProxy` (Tansu advertises the proxy, so
  every connection goes through it): the proxy records the version of each request, from
  the broker's side of the wire, which must be the newest the broker advertises unless
  kproto's own cap (``kproto.net.client_versions.CLIENT_MAX_VERSIONS``, the classic group
  caps) is lower.
- librdkafka's mock cluster with one API narrowed to a single old version
  (``set_apiversion``): a group consumer of either engine still reads every record,
  commits and reads its commit back, and the mock's request log shows it used that API.
"""

from __future__ import annotations

import time
import uuid
from typing import Callable

import pytest

from kproto import KafkaConsumer
from kproto.consumer.classic import group_requests
from kproto.tools.embedded import create_topic
from kproto.messages import API_KEYS, ApiVersionsRequest
from kproto.net.client_versions import client_max_version
from tests.brokers import seeding
from tests.brokers.proxy import BrokerProxy
from tests.brokers.raw import roundtrip
from tests.brokers.tansu import tansu_behind
from tests.support.versions import kproto_max

FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 1, 2, 3, 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, API_VERSIONS, CONSUMER_GROUP_HEARTBEAT = 11, 12, 13, 14, 18, 68
RECORDS = 12


def consume_commit_and_close(consumer: KafkaConsumer, expected: int, timeout_s: float = 30.0,
                             until: Callable[[], bool] = lambda: True) -> list:
    """Poll until ``expected`` records arrived and ``until()`` holds, commit them, read the
    commit back, close."""
    records: list = []
    deadline = time.monotonic() + timeout_s
    try:
        while (len(records) < expected or not until()) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        consumer.commit()
        committed = {tp: consumer.committed(tp) for tp in consumer.assignment()}
        assert sum(c for c in committed.values() if c is not None) == expected
    finally:
        consumer.close()
    return records


@pytest.fixture(scope="module")
def proxied_tansu():
    with BrokerProxy(("127.0.0.1", 1)) as proxy, tansu_behind(proxy):  # (upstream set by tansu_behind)
        yield proxy


def test_classic_consumer_sends_the_newest_versions_tansu_advertises(proxied_tansu):
    proxy = proxied_tansu
    advertised = {k.api_key: (k.min_version, k.max_version)
                  for k in roundtrip(proxy.upstream, ApiVersionsRequest(), 3).api_keys}
    topic = "versions-" + uuid.uuid4().hex[:8]
    create_topic(proxy.bootstrap_servers, topic, partitions=2)
    seeding.produce_records(proxy.bootstrap_servers, topic, RECORDS, partitions=[0, 1])
    before = len(proxy.requests())
    # Tansu completes a join after about half the session timeout: keep it short.
    consumer = KafkaConsumer(topic, bootstrap_servers=proxy.bootstrap_servers, group_id="g-" + uuid.uuid4().hex,
                             auto_offset_reset="earliest", enable_auto_commit=False, client_id="versions",
                             session_timeout_ms=6000, heartbeat_interval_ms=500, max_poll_interval_ms=6000)
    assert len(consume_commit_and_close(consumer, RECORDS)) == RECORDS
    sent: dict[int, set[int]] = {}
    for request in proxy.requests()[before:]:
        if request.client_id == "versions":
            sent.setdefault(request.api_key, set()).add(request.api_version)
    used = {FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP,
            API_VERSIONS}
    assert used <= set(sent), "the consumer sent no {}".format(used - set(sent))
    # ApiVersions goes out at kproto's newest first (the broker's versions are unknown
    # then); Tansu answers that one as if it were its own newest, so no retry follows.
    assert max(sent.pop(API_VERSIONS)) == kproto_max(API_VERSIONS)
    for api_key, versions in sent.items():
        assert max(versions) == min(advertised[api_key][1], kproto_max(api_key)), \
            (API_KEYS[api_key][0].__name__, versions, advertised[api_key])


# The oldest version each engine's consumer works with, per API (and the mock's own floor:
# it has OffsetForLeaderEpoch v2 and ConsumerGroupHeartbeat v1 only). The KIP-848 engine
# needs OffsetCommit v9 (member epochs) and Metadata v10 (topic ids: its assignments name
# topics by id); the classic one commits from v2, as Java's.
OLDEST = {
    "classic": {FETCH: 0, LIST_OFFSETS: 0, METADATA: 0, OFFSET_COMMIT: 2, OFFSET_FETCH: 1, FIND_COORDINATOR: 0,
                JOIN_GROUP: 0, SYNC_GROUP: 0, HEARTBEAT: 0, LEAVE_GROUP: 0},
    "consumer": {FETCH: 0, LIST_OFFSETS: 0, METADATA: 10, OFFSET_COMMIT: 9, OFFSET_FETCH: 1,
                 FIND_COORDINATOR: 0, CONSUMER_GROUP_HEARTBEAT: 1},
}


@pytest.mark.parametrize("group_protocol, api_key", [(p, k) for p, apis in OLDEST.items() for k in apis],
                         ids=lambda v: API_KEYS[v][0].__name__[:-len("Request")] if isinstance(v, int) else v)
def test_consumer_reads_when_an_api_is_capped_at_its_oldest_version(mock_cluster_factory, group_protocol, api_key):
    cluster = mock_cluster_factory(1)
    cluster.group_initial_rebalance_delay(0)
    version = OLDEST[group_protocol][api_key]
    cluster.set_apiversion(api_key, version, version)
    topic = cluster.new_topic(partitions=2)
    cluster.produce(topic, RECORDS)
    cluster.start_request_tracking()
    extra = {"heartbeat_interval_ms": 100} if group_protocol == "classic" else {}
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers, group_id="g-" + uuid.uuid4().hex,
                             group_protocol=group_protocol, auto_offset_reset="earliest", enable_auto_commit=False,
                             **extra)
    # Heartbeats start after a heartbeat interval (commits come after the records, and
    # LeaveGroup on close).
    records = consume_commit_and_close(consumer, RECORDS, until=lambda: api_key != HEARTBEAT or HEARTBEAT in {
        r.api_key for r in cluster.requests()})
    sent = {r.api_key for r in cluster.requests()}
    assert len({(r.partition, r.offset) for r in records}) == len(records) == RECORDS
    assert api_key in sent, "the consumer never sent {} v{}".format(API_KEYS[api_key][0].__name__, version)
