"""The Spark source's fetches on Kafka 4.4's session cache, without starting Spark.

What a streaming query runs on each micro-batch is the driver's :class:`OffsetResolver`
(planning) and one :func:`read_range` per task; here they run directly (a Spark session
would add a JVM and tens of seconds for nothing the fetches show) over two micro-batches
of one partition each:

- the resolver's Fetches (the log end of every partition at each planning) are all
  sessionless (session 0, epoch -1): in a session an idle partition's unchanged end would
  be left out of the answer;
- a partition's tasks read on one consumer from the worker's pool (Spark's consumer
  cache): one session (epoch 0) for both micro-batches, read incrementally (epochs 1, 2,
  ...) with no new session for the second, and closed (epoch -1 with its id) when the pool
  closes its consumers, so a worker leaves no session behind in Kafka's cache, whose slots
  are shared by every client and freed by Kafka only after two minutes unused.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow", reason="kproto.spark reads into PyArrow: pip install 'kproto[spark]'")

from kproto import TopicPartition  # noqa: E402
from kproto.spark.consumer_pool import POOL  # noqa: E402
from kproto.spark.options import parse_options  # noqa: E402
from kproto.spark.reader import read_range  # noqa: E402
from kproto.spark.resolver import OffsetResolver  # noqa: E402
from tests.wire_log import WireLog  # noqa: E402
from tests.threads import TestThread  # noqa: E402

pytestmark = [pytest.mark.needs("fetch_sessions"), pytest.mark.broker_kinds("apache_kafka")]


def test_stream_tasks_share_a_pooled_session_and_planning_is_sessionless(broker):
    topic = broker.new_topic(partitions=2)
    options = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic,
                             "kafka.max.partition.fetch.bytes": "2048"}, streaming=True)
    written = broker.produce(topic, 60)
    rows: dict[int, list] = {0: [], 1: []}
    starts = {TopicPartition(topic, p): 0 for p in range(2)}
    POOL.close()  # other tests' idle consumers: their sessions' closes are not this test's
    created, reused = POOL.created, POOL.reused
    with WireLog() as wire:
        with OffsetResolver(options) as resolver:
            for round_ in range(2):
                tps = resolver.topic_partitions()
                ends = resolver.latest(tps)
                threads = []
                for r in resolver.plan(starts, ends):
                    # A task per range, on a thread of its own (as executors run them).
                    def task(r=r) -> None:
                        for batch in read_range(options, r):
                            rows[r.partition].extend(batch.to_pylist())
                    threads.append(TestThread(target=task))
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(60)
                starts = ends
                if round_ == 0:
                    first_end = ends[TopicPartition(topic, 0)]
                    written += broker.produce(topic, 40, partitions=[0], start_index=100)
        # Partition 1 idles in the second micro-batch (an empty range borrows nothing).
        assert (POOL.created - created, POOL.reused - reused) == (2, 1)
        POOL.close()
    got = sorted((row["partition"], row["offset"]) for p in rows for row in rows[p])
    assert got == sorted((w.partition, w.offset) for w in written)

    answers = [resp.tree for _, resp in wire.pairs("Fetch")]
    assert all(a["error_code"] == 0 for a in answers)
    requests = [e.tree for e in wire.sent("Fetch")]
    resolver_fetches = [r for r in requests if (r["session_id"], r["session_epoch"]) == (0, -1)]
    assert resolver_fetches, "the resolver sent no Fetch"
    openings = [r for r in requests if (r["session_id"], r["session_epoch"]) == (0, 0)]
    assert len(openings) == 2  # one session per partition, for both micro-batches
    sessions: dict[int, list[dict]] = {}
    for r in requests:
        if r["session_id"] != 0:
            sessions.setdefault(r["session_id"], []).append(r)
    assert len(sessions) == 2
    for chain in sessions.values():
        # Epochs 1, 2, ... in order (a request still in flight when its task ended is
        # answered, or dropped, when its consumer is next used), then the close.
        *incremental, closing = chain
        assert [r["session_epoch"] for r in incremental] == list(range(1, len(incremental) + 1))
        assert closing["session_epoch"] == -1 and closing["topics"] == []
    # Partition 0's session holds both micro-batches' reads: past the first one's end.
    fetched = [p["fetch_offset"] for chain in sessions.values() for r in chain for t in r["topics"]
               for p in t["partitions"] if p["partition"] == 0]
    fetched += [p["fetch_offset"] for r in openings for t in r["topics"] for p in t["partitions"]
                if p["partition"] == 0]
    assert max(fetched) > first_end
