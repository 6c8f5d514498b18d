"""read_committed over a real transactional producer's aborted transactions on Kafka 4.4,
with the log rolled between them.

The topic rolls a segment on any append 100 ms after the segment's first record
(``segment.ms`` set at creation), so the second round of transactions lands in a new
segment while the consumer is reading. Kafka's Fetch answers list the aborted
transactions (producer id, first offset) from its index: a raw read_committed Fetch
shows both, and the consumer's own Fetch answers carried them (its wire trace). Under
read_committed the consumer returns every committed and plain record once and no aborted
one, and its position ends at the log end, past the markers; read_uncommitted returns the
aborted records too.
"""

from __future__ import annotations

import uuid

import pytest

from kproto import KafkaConsumer, TopicPartition
from kproto.tools.embedded import create_topic
from tests.brokers import raw
from tests.support.reading import assert_same, consume
from tests.wire_log import WireLog

pytestmark = pytest.mark.needs("aborted_transactions_in_fetch")
READ_COMMITTED = 1


def by_offset(records):
    return sorted(records, key=lambda r: (r.partition, r.offset))


@pytest.mark.broker_kinds("apache_kafka")
@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_read_committed_across_aborted_transactions_and_a_rolled_segment(broker, group_protocol):
    topic = "txn-roll-" + uuid.uuid4().hex  # a name no test uses
    create_topic(broker.bootstrap_servers, topic, 1, timeout_s=60, configs={"segment.ms": "100"})
    tp = TopicPartition(topic, 0)
    first = broker.produce_transactions(topic, committed=8, aborted=6)
    plain = broker.produce(topic, 3, partitions=[0], start_index=50, tag="plain")
    with WireLog() as wire, KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
            fetch_max_wait_ms=100, isolation_level="read_committed",
            group_protocol=group_protocol) as consumer:
        consumer.assign([tp])
        got = consume(consumer, len(first.committed) + len(plain))
        # Written now, long after the segment's first record: Kafka rolls a new segment.
        second = broker.produce_transactions(topic, committed=7, aborted=5, start_index=100)
        after = broker.produce(topic, 4, partitions=[0], start_index=200, tag="after")
        got += consume(consumer, len(second.committed) + len(after))
        assert consumer.poll(timeout_ms=300) == {}
        log_end = after[-1].offset + 1
        assert consumer.position(tp) == log_end
    assert_same(got, by_offset(first.committed + plain + second.committed + after))

    aborted_first_offsets = {first.aborted[0].offset, second.aborted[0].offset}
    log = raw.fetch_log(broker.bootstrap_servers, topic, 0, isolation_level=READ_COMMITTED)
    assert {offset for _, offset in log.aborted_transactions} == aborted_first_offsets
    assert log.last_stable_offset == log.high_watermark == log_end
    # One Fetch stops at a segment's end: the log has more than one.
    whole = raw.fetch_partition(broker.bootstrap_servers, topic, 0, 0, isolation_level=READ_COMMITTED)
    read_to = max(h.base_offset + h.last_offset_delta + 1 for h in raw.batch_headers(bytes(whole.records)))
    assert read_to < log_end, "the log was not rolled"
    # The consumer's own Fetch answers listed the aborted transactions it skipped.
    listed = {a["first_offset"] for _, resp in wire.pairs("Fetch") for t in resp.tree["responses"]
              for p in t["partitions"] for a in p["aborted_transactions"] or []}
    assert listed == aborted_first_offsets

    with KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                       fetch_max_wait_ms=100, isolation_level="read_uncommitted",
                       group_protocol=group_protocol) as consumer:
        consumer.assign([tp])
        everything = by_offset(first.committed + first.aborted + plain + second.committed
                               + second.aborted + after)
        got = consume(consumer, len(everything))
        assert consumer.poll(timeout_ms=300) == {}
    assert_same(got, everything)
