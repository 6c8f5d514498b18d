"""The capability table (tests.brokers.base.BROKER_CAPABILITIES) checked against the brokers.

Each capability a broker claims is shown to work, and each it lacks is shown to be
missing (or to behave in the documented, measured way), so the table cannot drift from
what the brokers really do.
"""

from __future__ import annotations

import pytest

from kproto.messages import ListOffsetsRequest
from kproto.records import crc32c
from tests.brokers import raw
from tests.brokers.base import API_CAPABILITIES, capabilities_from_api_versions

LATEST = -1


def test_capabilities_read_from_api_versions_match_the_table(broker):
    # What apache_kafka decides by once started (ApiVersions read with kproto's own
    # messages), checked on the mock and Tansu, whose capabilities are the static table.
    derived = capabilities_from_api_versions(raw.api_versions(broker.addresses[0]))
    assert derived == broker.capabilities & set(API_CAPABILITIES)
    assert ("kip848_regex" in derived) <= ("kip848" in derived)


def test_multi_broker_matches_the_bootstrap_list(broker):
    assert ("multi_broker" in broker.capabilities) == (len(broker.addresses) > 1)


def _all_batches(broker, topic: str, end: int) -> list[raw.BatchHeader]:
    # Several Fetches: the mock answers one batch per Fetch, Kafka stops at segment ends.
    return raw.batch_headers(raw.fetch_log(broker.bootstrap_servers, topic, 0, end=end).records)


def test_list_offsets_latest(broker):
    topic = broker.new_topic(partitions=1)
    written = broker.produce(topic, 30)
    end = written[-1].offset + 1
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=LATEST)])])
    leader = raw.partition_leader(broker.bootstrap_servers, topic, 0)
    answer = raw.roundtrip(leader, request, 5).topics[0].partitions[0]
    assert answer.error_code == 0
    if "list_offsets_latest_is_log_end" in broker.capabilities:
        assert answer.offset == end
    else:
        # Tansu (measured): the last batch's base offset + 1.
        last = _all_batches(broker, topic, end)[-1]
        assert answer.offset == last.base_offset + 1
    assert raw.fetch_partition(broker.bootstrap_servers, topic, 0).high_watermark == end


@pytest.mark.needs("transactions")
def test_transaction_markers_and_aborted_lists(broker):
    topic = broker.new_topic(partitions=1)
    txns = broker.produce_transactions(topic, committed=3, aborted=3)
    end = txns.aborted[-1].offset + 2  # the abort marker follows the aborted records
    batches = _all_batches(broker, topic, end)
    markers = [b for b in batches if b.is_control]
    assert [m.base_offset for m in markers] == [txns.committed[-1].offset + 1,
                                                txns.aborted[-1].offset + 1]
    assert all(b.is_transactional for b in batches)
    if "valid_control_batch_crc" in broker.capabilities:
        assert all(crc32c(b.crc_covered) == b.crc for b in batches)
    else:
        # The mock (measured): data batches are right, markers carry CRC 0.
        assert all(crc32c(b.crc_covered) == b.crc for b in batches if not b.is_control)
        assert {m.crc for m in markers} == {0}
    # Read to the last stable offset: Kafka lists the aborted transactions that overlap
    # what each Fetch returns.
    committed = raw.fetch_log(broker.bootstrap_servers, topic, 0, isolation_level=1)
    aborted_list = committed.aborted_transactions
    if "aborted_transactions_in_fetch" in broker.capabilities:
        assert [first for _, first in aborted_list] == [txns.aborted[0].offset]
    else:
        assert aborted_list == []
    assert committed.last_stable_offset == end


@pytest.mark.broker_kinds("mock", "tansu", "apache_kafka", "tansu_sessions")
def test_fetch_sessions_capability_matches_the_broker(broker):
    from kproto.messages import FetchRequest

    topic = broker.new_topic(partitions=1)
    end = broker.produce(topic, 3)[-1].offset + 1

    def fetch(session_id: int, epoch: int, offset: int | None) -> FetchRequest:
        parts = [] if offset is None else [FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])]
        return FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, session_id=session_id,
                            session_epoch=epoch, topics=parts, forgotten_topics_data=[])

    with raw.RawConnection(raw.partition_leader(broker.bootstrap_servers, topic, 0)) as conn:
        first = conn.request(fetch(0, 0, 0), 11)
        assert first.error_code == 0
        assert ("fetch_sessions" in broker.capabilities) == (first.session_id != 0)
        if first.session_id:  # an incremental fetch with nothing new names no partition
            idle = conn.request(fetch(first.session_id, 1, end), 11)
            assert (idle.error_code, idle.session_id, idle.responses) == (0, first.session_id, [])
