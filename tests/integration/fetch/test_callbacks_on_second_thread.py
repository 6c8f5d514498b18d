"""Fetch and offset-reset callbacks on a second thread, against real brokers.

In the classic engine the heartbeat thread sometimes drives the shared NetworkClient, so
Fetch and ListOffsets answers are handled on it while the application thread sends the
next fetches and collects records. Here a thread polls the client non-stop (the worst
case of that) while the application thread consumes, seeks and resets: every record must
arrive once, in order, with no error on either thread.
"""

from __future__ import annotations

import threading

import pytest

from kproto.consumer.classic.classic_kafka_consumer import ClassicKafkaConsumer
from kproto.consumer.config import ConsumerConfig
from kproto.structs import TopicPartition
from tests.threads import TestThread

pytestmark = pytest.mark.broker_kinds("mock", "apache_kafka")

PARTITIONS = 4
PER_PARTITION = 300
MAX_POLLS = 2000


class _Poller(TestThread):
    """Polls the client until stopped, as a heartbeat thread that drives the I/O would."""

    def __init__(self, client) -> None:
        super().__init__(name="test-foreign-poller", daemon=True)
        self.client = client
        self.stop = threading.Event()

    def work(self) -> None:
        while not self.stop.is_set():
            self.client.poll(timeout_ms=5)


def _record_threads(obj, name: str, seen: list) -> None:
    original = getattr(obj, name)

    def wrapper(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return original(*args, **kwargs)
    setattr(obj, name, wrapper)


def _consume_until(consumer: ClassicKafkaConsumer, got: dict, done) -> None:
    for _ in range(MAX_POLLS):
        for tp, records in consumer.poll(timeout_ms=50, max_records=37).items():
            got.setdefault(tp.partition, []).extend(records)
        if done():
            return
    raise AssertionError("records did not all arrive: {}".format({p: len(r) for p, r in got.items()}))


def test_callbacks_on_a_second_thread_lose_and_repeat_nothing(broker):
    topic = broker.new_topic(partitions=PARTITIONS)
    written = broker.produce(topic, PARTITIONS * PER_PARTITION)
    expected = {p: [w for w in written if w.partition == p] for p in range(PARTITIONS)}
    consumer = ClassicKafkaConsumer(ConsumerConfig(bootstrap_servers=broker.bootstrap_servers,
                                                   auto_offset_reset="earliest", fetch_max_wait_ms=20,
                                                   max_partition_fetch_bytes=4096))
    fetch_threads: list = []
    reset_threads: list = []
    _record_threads(consumer.fetcher, "handle_fetch_success", fetch_threads)
    _record_threads(consumer.offset_fetcher, "_on_reset_response", reset_threads)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    poller = _Poller(consumer.client)
    try:
        consumer.assign(tps)
        poller.start()
        got: dict = {}
        _consume_until(consumer, got, lambda: all(len(got.get(p, ())) >= PER_PARTITION // 2
                                                  for p in range(PARTITIONS)))
        # Rewind half the partitions by a reset (ListOffsets answered on either thread).
        consumer.seek_to_beginning(tuple(tps[:2]))
        rewound = {p: len(got[p]) for p in range(2)}
        _consume_until(consumer, got, lambda: all(
            len(got.get(p, ())) >= PER_PARTITION + rewound.get(p, 0) for p in range(PARTITIONS)))
        for p in range(PARTITIONS):
            offsets = [r.offset for r in got[p]]
            want = [w.offset for w in expected[p]]
            if p in rewound:
                # Until the reset: a prefix read in order; then everything from offset 0.
                # Data buffered or in flight for the old position is dropped, never
                # returned (DESIGN's first invariant): the first record after the seek is 0.
                head, tail = offsets[:rewound[p]], offsets[rewound[p]:]
                assert head == want[:len(head)]
                assert tail == want
            else:
                assert offsets == want
            assert [r.value for r in got[p][-PER_PARTITION:]] == [w.value for w in expected[p]]
        poller.raise_if_failed()
        # The test means something only if the other thread handled answers.
        assert "test-foreign-poller" in fetch_threads
    finally:
        poller.stop.set()
        poller.join()
        consumer.close(timeout_ms=2000)
