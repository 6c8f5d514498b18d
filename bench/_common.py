"""Shared pieces of the consume benchmarks: brokers, verified seeding, one read per client.

Owns the value recipe (:func:`value_for`), :func:`seed` (one topic written by
confluent-kafka's producer, returning the count, value bytes and checksum of what the broker
acknowledged), the record checksum (:func:`record_digest`), and one read per client variant
(:data:`VARIANTS`: kproto with and without CRC checks, kafka-python 3, confluent-kafka with
its defaults and with ``fetch.queue.backoff.ms=0``, aiokafka with and without its compiled
extension, and the hook for the Java consumer) that consumes a topic from the beginning
with ``assign()`` (no group) and returns a :class:`Tally` with the same checksum, so each
read is verified by count and checksum against what was written.

Every read starts the same way, timed from the consumer's construction: it asks for the
topic's metadata, then assigns. (librdkafka assigned a topic it has no metadata for leaves
the partitions unfetched until its next topic scan: ~0.5 s before the first record where,
with the metadata asked for first, it needs a few ms. kproto and kafka-python fetch that
metadata inside ``poll()`` either way, so assigning first charged librdkafka alone.) ``bench_consume.py`` runs
the reads in-process, ``bench_matrix.py`` in one child process per read.

The checksum is the sum over records of ``crc32(value, crc32(key, offset * 1031 +
partition))``: order-independent across partitions (clients interleave them differently),
and two C-level calls per record, the same small cost for every client inside the timed loop.
"""

from __future__ import annotations

import os
import random
import sys
import time
import zlib
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

#: Seconds a read waits with no record arriving before it gives up (and reports what it has).
IDLE_S = 10.0
_MASK32 = 0xFFFFFFFF
_WORDS = (b"kafka record value offset partition broker fetch batch topic stream event payload "
          b"consumer producer leader epoch commit group member session header timestamp key "
          b"segment index replica log compaction retention codec checksum window").split()
_POOL_SIZE = 1 << 20
_pool: Optional[bytes] = None


def _text_pool() -> bytes:
    """1 MiB of word salad (fixed seed): values lz4 can shrink, as real payloads often are."""
    global _pool
    if _pool is None:
        rng = random.Random(16)
        words = [rng.choice(_WORDS) for _ in range(_POOL_SIZE // 4)]
        _pool = b" ".join(words)[:_POOL_SIZE]
    return _pool


def value_for(i: int, size: int) -> bytes:
    """Value of record ``i``: its index, then ``size`` bytes' worth of the text pool."""
    head = b"%09d:" % i
    if size <= len(head):
        return head[-size:]
    pool = _text_pool()
    if size > len(pool):
        raise ValueError("values up to {} bytes".format(len(pool)))
    start = (i * 7919) % (len(pool) - size + 1)
    return head + pool[start:start + size - len(head)]


def key_for(i: int) -> bytes:
    return b"k%09d" % i


def record_digest(partition: int, offset: int, key: bytes, value: bytes) -> int:
    """One record's share of the checksum (the reads inline this expression)."""
    return zlib.crc32(value, zlib.crc32(key, (offset * 1031 + partition) & _MASK32))


class Tally(NamedTuple):
    """What a read saw (or a seeding wrote): records, value bytes, checksum; a seeding also
    the Java peer's checksum (the sum, mod 2**64, of crc32(key) + crc32(value)), which a
    Java read reports in ``checksum``."""

    count: int
    value_bytes: int
    checksum: int
    java_checksum: int = 0


def seed(bootstrap: str, topic: str, n: int, partitions: int, value_size: int,
         codec: str = "none", timeout_s: float = 600.0) -> Tally:
    """Write records ``0..n-1`` (key ``key_for(i)``, value ``value_for(i, value_size)``) to
    partition ``i % partitions`` with confluent-kafka's producer, compression ``codec``.

    The tally comes from the delivery reports (partition and offset the broker assigned),
    so a read is compared with what the broker acknowledged. Raises if any delivery fails.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "compression.type": codec, "queue.buffering.max.messages": 1_000_000,
                         "broker.address.family": "v4", "log_level": 3})
    producer.list_topics(topic, timeout=30)  # know the partitions before the first record
    acked = [0, 0, 0, 0]  # count, value bytes, checksum, the Java peer's checksum
    errors: list = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(err)
            return
        value = msg.value()
        acked[0] += 1
        acked[1] += len(value)
        acked[2] += record_digest(msg.partition(), msg.offset(), msg.key(), value)
        acked[3] = (acked[3] + zlib.crc32(msg.key()) + zlib.crc32(value)) & 0xFFFFFFFFFFFFFFFF

    for i in range(n):
        key, value = key_for(i), value_for(i, value_size)
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=i % partitions,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(timeout_s)
    if remaining or errors:
        raise SystemExit("seeding {} failed: {} undelivered, errors {}".format(
            topic, remaining, errors[:3]))
    return Tally(*acked)


def available(bootstrap: str, topic: str, partitions: int) -> tuple[int, int]:
    """(records the broker keeps, sum of beginning offsets), read with kproto.

    For the mock, which silently drops a partition's oldest data past ~5 MiB or 100k
    batches. Not for Tansu: its ListOffsets(LATEST) is the last batch's base offset + 1."""
    from kproto import KafkaConsumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with KafkaConsumer(bootstrap_servers=bootstrap) as c:
        begin, end = c.beginning_offsets(tps), c.end_offsets(tps)
    return sum(end[tp] - begin[tp] for tp in tps), sum(begin.values())


Progress = Callable[[int, int], None]  # (records so far, value bytes so far), once per poll


class Timing(NamedTuple):
    """A read's wall time from the consumer's construction to its last record, and its
    close after that, apart: a consumer with fetch sessions closes them as Java's does,
    which waits for an answer queued behind a long-polling fetch (up to
    ``fetch_max_wait_ms``), a cost the clients without sessions never pay."""

    seconds: float
    close_s: float


class ReadTimer:
    """Times one read of ``n`` records (``bench_matrix`` and ``bench_aio``): started at
    construction, ``progress`` (a read's per-poll callback) marks the last record,
    ``timing()`` after the close splits the wall time."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.start = time.perf_counter()
        self._last = 0.0

    def progress(self, count: int, size: int) -> None:
        if count >= self.n and not self._last:
            self._last = time.perf_counter() - self.start

    def timing(self) -> Timing:
        total = time.perf_counter() - self.start
        return Timing(self._last, total - self._last) if self._last else Timing(total, 0.0)


class Reader:
    """The verified read loop's state, one home for every client's read: :meth:`take` counts
    and checksums one ``{partition: [records]}`` batch (kafka-python's ``poll()`` and
    aiokafka's ``getmany()`` shape); :meth:`wants_more` until ``n`` records, or until
    ``IDLE_S`` pass without any."""

    __slots__ = ("n", "count", "size", "total", "idle")

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = self.size = self.total = 0
        self.idle = time.monotonic() + IDLE_S

    def wants_more(self) -> bool:
        return self.count < self.n and time.monotonic() < self.idle

    def take(self, batch: dict) -> None:
        if not batch:
            return
        self.idle = time.monotonic() + IDLE_S
        crc32 = zlib.crc32
        size = total = count = 0
        for records in batch.values():
            for r in records:
                value = r.value
                total += crc32(value, crc32(r.key, (r.offset * 1031 + r.partition) & _MASK32))
                size += len(value)
            count += len(records)
        self.count += count
        self.size += size
        self.total += total

    def tally(self) -> Tally:
        return Tally(self.count, self.size, self.total)


def _drain(consumer, n: int, progress: Optional[Progress]) -> Tally:
    """Poll a kafka-python-style consumer until ``n`` records (or IDLE_S without any)."""
    reader = Reader(n)
    try:
        while reader.wants_more():
            reader.take(consumer.poll(timeout_ms=500))
            if progress is not None:
                progress(reader.count, reader.size)
    finally:
        consumer.close()
    return reader.tally()


async def drain_asyncio(consumer, n: int, progress: Optional[Progress] = None) -> Tally:
    """``getmany()`` an aiokafka-style consumer until ``n`` records (or IDLE_S without any)."""
    reader = Reader(n)
    while reader.wants_more():
        reader.take(await consumer.getmany(timeout_ms=500))
        if progress is not None:
            progress(reader.count, reader.size)
    return reader.tally()


async def read_asyncio(consumer, tps: list, n: int, progress: Optional[Progress] = None) -> Tally:
    """An aiokafka-style consumer's read: ``start()``, ``assign(tps)``, :func:`drain_asyncio`,
    ``stop()``."""
    await consumer.start()
    try:
        consumer.assign(tps)
        return await drain_asyncio(consumer, n, progress)
    finally:
        await consumer.stop()


def read_kproto(bootstrap: str, topic: str, partitions: int, n: int, check_crcs: bool = True,
                progress: Optional[Progress] = None) -> Tally:
    from kproto import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             check_crcs=check_crcs)
    consumer.partitions_for_topic(topic)  # the same start as every client (module docstring)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    return _drain(consumer, n, progress)


def read_kproto_aio(bootstrap: str, topic: str, partitions: int, n: int, check_crcs: bool = True,
                    progress: Optional[Progress] = None) -> Tally:
    """``kproto.aio.AIOKafkaConsumer``: ``start()`` reads the cluster's metadata, so the
    topic is known before ``assign()``."""
    import asyncio

    from kproto.aio import AIOKafkaConsumer, TopicPartition

    async def read() -> Tally:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False, check_crcs=check_crcs)
        return await read_asyncio(consumer, [TopicPartition(topic, p) for p in range(partitions)], n, progress)

    return asyncio.run(read())


def read_kafka_python(bootstrap: str, topic: str, partitions: int, n: int,
                      progress: Optional[Progress] = None) -> Tally:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             check_crcs=True, enable_auto_commit=False)
    consumer.partitions_for_topic(topic)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    return _drain(consumer, n, progress)


def read_confluent(bootstrap: str, topic: str, partitions: int, n: int, tuned: bool = False,
                   progress: Optional[Progress] = None) -> Tally:
    """confluent-kafka with its defaults, or ``tuned`` with ``fetch.queue.backoff.ms=0``
    (librdkafka otherwise pauses fetching while its queue holds data)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    crc32 = zlib.crc32
    count = size = total = 0
    config = {"bootstrap.servers": bootstrap, "group.id": "bench-{}".format(time.monotonic_ns()),
              "enable.auto.commit": False, "broker.address.family": "v4"}
    if tuned:
        config["fetch.queue.backoff.ms"] = 0
    consumer = Consumer(config)
    consumer.list_topics(topic, timeout=30)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    idle = time.monotonic() + IDLE_S
    try:
        while count < n and time.monotonic() < idle:
            # consume() waits the whole timeout unless num_messages arrive (kproto's and
            # kafka-python's poll return with the first records): ask for no more than are
            # left, and wait briefly, so no call idles long on records that already came.
            msgs = consumer.consume(num_messages=min(10000, max(n - count, 1)), timeout=0.1)
            if msgs:
                idle = time.monotonic() + IDLE_S
            for m in msgs:
                if m.error():
                    continue
                value = m.value()
                total += crc32(value, crc32(m.key(), (m.offset() * 1031 + m.partition()) & _MASK32))
                size += len(value)
                count += 1
            if progress is not None:
                progress(count, size)
    finally:
        consumer.close()
    return Tally(count, size, total)


def read_aiokafka(bootstrap: str, topic: str, partitions: int, n: int,
                  progress: Optional[Progress] = None) -> Tally:
    """aiokafka (CRC checks on, its default); compiled or pure-Python records decoding as
    the process was started (``AIOKAFKA_NO_EXTENSIONS=1``: pure). ``start()`` asks for the
    cluster's metadata, so the topic is known before ``assign()``."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def read() -> Tally:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False, check_crcs=True)
        return await read_asyncio(consumer, [TopicPartition(topic, p) for p in range(partitions)], n, progress)

    return asyncio.run(read())


def aiokafka_compiled() -> bool:
    """Whether aiokafka decodes records with its compiled extension in this process."""
    from aiokafka.record import default_records

    return "_crecords" in default_records.DefaultRecordBatch.__module__


#: The last Java read's own figures (the peer times itself, its JVM start-up apart).
JAVA_TIMES: dict = {}


def read_java(bootstrap: str, topic: str, partitions: int, n: int,
              progress: Optional[Progress] = None) -> Tally:
    """The Java consumer 4.4: the test ground's Java peer (``tests/brokers/java_peer.py``)
    in assign mode, reading every partition from the beginning to the end offsets it saw
    at the start. Its checksum is the peer's (``Tally.java_checksum`` of the seeding); its
    bytes are keys and values, so the keys' 10 bytes each are taken off. Its timings go to
    ``JAVA_TIMES``: ``seconds`` from the consumer's construction to the last record
    (the peer's set-up and read), ``first_s`` and ``jvm_s``, the JVM's start-up, apart."""
    from tests.brokers import java_peer

    # The tests start their peers small and C1-only (quick to start beside a broker); the
    # benchmark gives the JVM its default JIT, so Java's read is not handicapped.
    java_peer.JVM_OPTS = ("-Xms64m", "-Xmx1g", "-Djava.awt.headless=true")
    program = java_peer.JavaPeerProgram()
    try:
        # The peer's own defaults suit tests (50 records a poll, 100 ms fetch waits); the
        # benchmark gives Java's defaults, as every other client runs with its own.
        peer = program.start("assign", bootstrap, topics=[topic], partitions=[(topic, p) for p in range(partitions)],
                             max_records=500, fetch_max_wait_ms=500)
        started = peer.wait_started(limit_s=300)
        done = peer.wait_done(limit_s=1800)
    finally:
        program.close()
    JAVA_TIMES.clear()
    JAVA_TIMES.update(seconds=(done["setup_ms"] + done["read_ms"]) / 1000.0,
                      first_s=(done["setup_ms"] + max(done["first_record_ms"], 0)) / 1000.0,
                      jvm_s=started.get("jvm_ms", 0) / 1000.0, close_s=done.get("close_ms", 0) / 1000.0)
    count = int(done["records"])
    return Tally(count, int(done["bytes"]) - 10 * count, int(done["checksum"]))


@dataclass(frozen=True)
class Variant:
    """One client configuration under test."""

    label: str
    package: str  # the client's import name (preloaded before timing)
    read: Callable[..., Tally]
    options: tuple[tuple[str, object], ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # set in the child process that reads

    def run(self, bootstrap: str, topic: str, partitions: int, n: int,
            progress: Optional[Progress] = None) -> Tally:
        return self.read(bootstrap, topic, partitions, n, progress=progress, **dict(self.options))


#: variant id -> Variant, in table order.
VARIANTS: dict[str, Variant] = {
    "kproto": Variant("kproto (check_crcs)", "kproto", read_kproto, (("check_crcs", True),)),
    "kproto-nocrc": Variant("kproto (no crc check)", "kproto", read_kproto, (("check_crcs", False),)),
    "kafka-python": Variant("kafka-python 3 (check_crcs)", "kafka", read_kafka_python),
    "confluent": Variant("confluent-kafka (defaults)", "confluent_kafka", read_confluent),
    "confluent-tuned": Variant("confluent-kafka (no fetch backoff)", "confluent_kafka",
                               read_confluent, (("tuned", True),)),
    "aiokafka": Variant("aiokafka (compiled extension, check_crcs)", "aiokafka", read_aiokafka),
    "aiokafka-pure": Variant("aiokafka (AIOKAFKA_NO_EXTENSIONS=1, check_crcs)", "aiokafka", read_aiokafka,
                             env=(("AIOKAFKA_NO_EXTENSIONS", "1"),)),
    "java": Variant("Java consumer 4.4 (assign mode)", "java", read_java),
}
#: Why a variant cannot run on a broker kind.
UNSUPPORTED = {("kafka-python", "mock"): "kafka-python cannot bootstrap against the mock cluster "
                                         "(it dies in its version probe)",
               ("java", "tansu"): "Tansu hangs up on Java 4.4's ApiVersions v5 naming its cluster and node "
                                  "(KIP-1242), so Java never reaches the partition leader",
               ("java", "mock"): "the mock's UNSUPPORTED_VERSION answer to ApiVersions v5 reads, at v5 as Java "
                                 "reads it, as a 1,179,648 ms throttle"}


def unavailable(variant: str) -> Optional[str]:
    """Why ``variant`` cannot run on this machine at all (None: it can)."""
    if variant == "java":
        from tests.brokers.java_peer import unavailable_reason

        return unavailable_reason()
    package = VARIANTS[variant].package
    try:
        __import__(package)
    except ImportError as exc:
        return "{} is not installed ({}; the test extra has it)".format(package, exc)
    return None


def preload(packages: set[str]) -> None:
    """Import the given clients before timing, so no read pays for module loading."""
    if "confluent_kafka" in packages:
        import confluent_kafka  # noqa: F401
    if "kafka" in packages:
        import kafka  # noqa: F401
    if "java" in packages:
        from tests.brokers.java_peer import compile_peer

        compile_peer()  # compiled (once) before timing
    if "aiokafka" in packages:
        import aiokafka  # noqa: F401
        import aiokafka.consumer  # noqa: F401
    if "kproto" in packages:
        import kproto.aio  # noqa: F401
        import kproto.consumer.classic.classic_kafka_consumer  # noqa: F401
        from kproto.consumer.config import ConsumerConfig

        ConsumerConfig({})


def start_broker(kind: str):
    """A fresh broker of ``kind`` ("tansu": a child process; "mock": librdkafka's mock
    cluster, 1 broker, in this process; "kafka": Apache Kafka 4.4, the test ground's broker,
    as ``tests.brokers.apache.start_apache_kafka`` finds it), with ``new_topic``,
    ``bootstrap_servers`` and ``close`` (a context manager)."""
    if kind == "kafka":
        from tests.brokers.apache import start_apache_kafka

        broker, why = start_apache_kafka()
        if broker is None:
            raise SystemExit("no Kafka 4.4: {}".format(why))
        return broker
    if kind == "tansu":
        from tests.brokers.tansu import TansuBroker

        return TansuBroker()
    if kind == "mock":
        from tests.brokers.mock_cluster import MockCluster

        return MockCluster(1)
    raise SystemExit("unknown broker {!r} (tansu, mock, kafka)".format(kind))
