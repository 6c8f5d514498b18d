"""The Spark source's fetches on Kafka 4.4's session cache, without starting Spark.

What a streaming query runs on each micro-batch is the driver's :class:`OffsetResolver`
(planning) and one :func:`read_range` per task; here they run directly (a Spark session
would add a JVM and tens of seconds for nothing the fetches show) over two micro-batches
of one partition each:

- the resolver's Fetches (the log end of every partition at each planning) are all
  sessionless (session 0, epoch -1): in a session an idle partition's unchanged end would
  be left out of the answer;
- each task's reader opens one session (epoch 0), reads on it incrementally (epochs 1,
  2, ...), and closes it when its range is read (epoch -1 with its id), so a stream's
  tasks leave no session behind in Kafka's cache, whose slots are shared by every client
  and freed by Kafka only after two minutes unused.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow", reason="kproto.spark reads into PyArrow: pip install 'kproto[spark]'")

from kproto import TopicPartition  # noqa: E402
from kproto.spark.options import parse_options  # noqa: E402
from kproto.spark.reader import read_range  # noqa: E402
from kproto.spark.resolver import OffsetResolver  # noqa: E402
from tests.wire_log import WireLog  # noqa: E402
from tests.threads import TestThread  # noqa: E402

pytestmark = [pytest.mark.needs("fetch_sessions"), pytest.mark.broker_kinds("apache_kafka")]


def test_stream_tasks_close_their_sessions_and_planning_is_sessionless(broker):
    topic = broker.new_topic(partitions=2)
    options = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic,
                             "kafka.max.partition.fetch.bytes": "2048"}, streaming=True)
    written = broker.produce(topic, 60)
    rows: dict[int, list] = {0: [], 1: []}
    starts = {TopicPartition(topic, p): 0 for p in range(2)}
    tasks = 0
    with WireLog() as wire:
        with OffsetResolver(options) as resolver:
            for round_ in range(2):
                tps = resolver.topic_partitions()
                ends = resolver.latest(tps)
                threads = []
                for r in resolver.plan(starts, ends):
                    tasks += r.size > 0  # an empty range opens no consumer
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
                    written += broker.produce(topic, 40, partitions=[0], start_index=100)
    got = sorted((row["partition"], row["offset"]) for p in rows for row in rows[p])
    assert got == sorted((w.partition, w.offset) for w in written)

    task_threads = {e.thread for e in wire.sent("Fetch")}
    resolver_fetches = []
    tasks_seen = incremental_seen = 0
    for thread in task_threads:
        requests = [e.tree for e in wire.sent("Fetch") if e.thread == thread]
        chains = split_sessions(requests)
        if all((r["session_id"], r["session_epoch"]) == (0, -1) for r in requests):
            resolver_fetches += requests
            continue
        for chain in chains:
            tasks_seen += 1
            (opening, *incremental, closing) = chain
            assert (opening["session_id"], opening["session_epoch"]) == (0, 0)
            session = incremental[0]["session_id"] if incremental else closing["session_id"]
            assert session != 0
            assert [r["session_epoch"] for r in incremental] == list(range(1, len(incremental) + 1))
            assert (closing["session_id"], closing["session_epoch"]) == (session, -1)
            assert closing["topics"] == []
            incremental_seen += len(incremental)
    assert resolver_fetches, "the resolver sent no Fetch"
    assert tasks_seen == tasks == 3  # partition 1 idles in the second micro-batch
    assert incremental_seen  # (2 KiB per partition and Fetch: a range takes several)
    answers = [resp.tree for _, resp in wire.pairs("Fetch")]
    assert all(a["error_code"] == 0 for a in answers)


def split_sessions(requests: list[dict]) -> list[list[dict]]:
    """A thread's Fetch requests cut into sessions: each starts at epoch 0."""
    chains: list[list[dict]] = []
    for r in requests:
        if r["session_epoch"] == 0 or not chains:
            chains.append([])
        chains[-1].append(r)
    return chains
