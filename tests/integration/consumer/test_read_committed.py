"""read_committed end to end: a real transactional producer, Tansu, and a rewriting proxy.

Local brokers send no aborted-transaction list in Fetch responses (tests.brokers), so
a small proxy on 127.0.0.1 sits between kproto and Tansu: it forwards every frame, points
Metadata's broker address at itself, and re-encodes each Fetch response with kproto's
encoder after filling in ``aborted_transactions`` from the real control batches in the
records (what a broker's aborted-transaction index holds: producer id and first offset
of every aborted transaction). Records and markers are the broker's bytes, unchanged.
"""

from __future__ import annotations

import struct

import pytest

from kproto import KafkaConsumer, TopicPartition
from kproto.messages import FetchResponse, MetadataResponse
from kproto.protocol.headers import response_header_version
from kproto.records import read_batches
from tests.brokers.proxy import BrokerProxy
from tests.support.reading import assert_same, consume

FETCH, METADATA = 1, 3


def aborted_transactions(records: bytes) -> list[FetchResponse.AbortedTransaction]:
    """(producer id, first offset) of each aborted transaction in ``records``."""
    first_offset: dict[int, int] = {}
    aborted = []
    for batch in read_batches(records, check_crcs=False):
        if not batch.is_transactional:
            continue
        if batch.is_control_batch:
            control = batch.control_record()
            start = first_offset.pop(batch.producer_id, None)
            if control is not None and control.is_abort and start is not None:
                aborted.append(FetchResponse.AbortedTransaction(producer_id=batch.producer_id, first_offset=start))
        else:
            first_offset.setdefault(batch.producer_id, batch.base_offset)
    return aborted


class AbortIndexProxy(BrokerProxy):
    """One upstream broker behind a listening socket on 127.0.0.1 (stopped by close()),
    rewriting Fetch and Metadata answers."""

    rewrites_responses = True

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.fetches_rewritten = 0
        super().__init__(upstream)

    def rewrite_response(self, frame: bytes, api_key: int, api_version: int) -> bytes:
        if api_key not in (FETCH, METADATA):
            return frame
        body = self._rewrite(frame[4:], api_key, api_version)
        return struct.pack(">i", len(body)) + body

    def _rewrite(self, frame: bytes, api_key: int, version: int) -> bytes:
        flexible = response_header_version(api_key, version) == 1
        header_len = 5 if flexible else 4  # correlation id (+ an empty tagged-field count)
        header, body = frame[:header_len], frame[header_len:]
        if api_key == METADATA:
            response = MetadataResponse.decode(body, version, allow_trailing=True)
            for b in response.brokers:
                b.host, b.port = "127.0.0.1", self.port
            return header + response.encode(version)
        response = FetchResponse.decode(body, version)
        for topic in response.responses:
            for partition in topic.partitions:
                if partition.records is not None and len(partition.records):
                    partition.aborted_transactions = aborted_transactions(bytes(partition.records))
        self.fetches_rewritten += 1
        return header + response.encode(version)


@pytest.fixture
def proxied_tansu(tansu_broker):
    proxy = AbortIndexProxy(tansu_broker.addresses[0])
    yield tansu_broker, proxy
    proxy.close()


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_read_committed_skips_the_aborted_transaction(proxied_tansu, codec):
    broker, proxy = proxied_tansu
    topic = broker.new_topic(partitions=1)
    txns = broker.produce_transactions(topic, committed=15, aborted=12, codec=codec)
    after = broker.produce(topic, 5, partitions=[0], start_index=100, tag="after")
    bootstrap = "127.0.0.1:{}".format(proxy.port)
    tp = TopicPartition(topic, 0)
    with KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                       isolation_level="read_committed") as consumer:
        consumer.assign([tp])
        records = consume(consumer, len(txns.committed) + len(after))
        assert consumer.poll(timeout_ms=300) == {}
        assert_same(records, txns.committed + after)
        # The position moved past the skipped batches and both markers.
        assert consumer.position(tp) == after[-1].offset + 1
    assert proxy.fetches_rewritten > 0
    with KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                       isolation_level="read_uncommitted") as consumer:
        consumer.assign([tp])
        records = consume(consumer, len(txns.committed) + len(txns.aborted) + len(after))
        assert consumer.poll(timeout_ms=300) == {}
        # Control records are never returned; aborted data is, when reading uncommitted.
        assert_same(records, txns.committed + txns.aborted + after)
