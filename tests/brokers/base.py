"""The interface every test broker offers, and the capability vocabulary.

Owns :data:`CAPABILITIES` (the names a test may list in ``@pytest.mark.needs(...)``),
:data:`BROKER_CAPABILITIES` (what each broker kind can serve, known before it starts, so
a test is skipped without starting a broker it cannot use) and :class:`Broker`, the base
of :class:`~tests.brokers.mock_cluster.MockCluster`,
:class:`~tests.brokers.tansu.TansuBroker` and :class:`~tests.brokers.apache.ApacheKafka`.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Sequence

from tests.brokers import seeding

#: capability -> what it means. Each was checked against the brokers (see
#: tests/integration/brokers/, tests/integration/messages/test_plain_socket.py) or comes from the measured behaviour in issue 3.
CAPABILITIES: dict[str, str] = {
    "classic_groups": "classic consumer groups (JoinGroup/SyncGroup/Heartbeat)",
    "kip848": "KIP-848 consumer groups (ConsumerGroupHeartbeat)",
    "kip848_regex": "ConsumerGroupHeartbeat v1 (broker-side regex subscriptions; "
                    "librdkafka's KIP-848 member)",
    "offset_for_leader_epoch": "OffsetForLeaderEpoch (log truncation detection)",
    "transactions": "a transactional producer can commit and abort transactions",
    "aborted_transactions_in_fetch": "Fetch responses list aborted transactions "
                                     "(neither the mock nor Tansu sends the list)",
    "valid_control_batch_crc": "transaction markers carry a correct CRC "
                               "(the mock's carry CRC 0)",
    "list_offsets_latest_is_log_end": "ListOffsets(LATEST) answers the log end offset "
                                      "(Tansu answers last batch base offset + 1)",
    "create_topics_api": "the CreateTopics request (the mock creates topics only "
                         "through its C API)",
    "fault_injection": "error/latency injection, broker down/up, leader moves "
                       "(librdkafka mock only; the test gets a fresh cluster)",
    "multi_broker": "more than one broker in the cluster",
    "fetch_sessions": "the broker keeps KIP-227 incremental fetch sessions (Apache Kafka; "
                      "Tansu behind tests/brokers/fetch_sessions.py)",
    "fast_classic_rebalance": "classic rebalances settle in about a second "
                              "(Tansu takes ~15 s for two members)",
    "fresh_broker": "a broker this session started with the suite's settings (not a "
                    "running one given by KPROTO_KAFKA_BOOTSTRAP)",
    "share_groups": "KIP-932 share groups (ShareGroupHeartbeat v1+, ShareFetch, "
                    "ShareAcknowledge: Kafka 4.1+, librdkafka's mock)",
}

#: broker kind -> capabilities. The kinds are the ``broker`` fixture's parameters. For
#: "apache_kafka" (whose version is unknown in advance) this is only the prior: what an
#: Apache Kafka might offer; the started broker reads the API-derived ones from its
#: ApiVersions answer (:func:`capabilities_from_api_versions`).
BROKER_CAPABILITIES: dict[str, frozenset[str]] = {
    "mock": frozenset({
        "classic_groups", "kip848", "kip848_regex", "offset_for_leader_epoch",
        "transactions", "list_offsets_latest_is_log_end", "fault_injection",
        "multi_broker", "fast_classic_rebalance", "fresh_broker", "share_groups"}),
    "tansu": frozenset({"classic_groups", "transactions", "create_topics_api",
                        "valid_control_batch_crc", "fresh_broker"}),
    "apache_kafka": frozenset({
        "classic_groups", "kip848", "kip848_regex", "offset_for_leader_epoch",
        "transactions", "aborted_transactions_in_fetch", "valid_control_batch_crc",
        "list_offsets_latest_is_log_end", "create_topics_api", "fast_classic_rebalance",
        "fresh_broker", "fetch_sessions", "share_groups"}),
}
# Tansu behind the fetch-session front: a broker kind only for tests needing sessions.
BROKER_CAPABILITIES["tansu_sessions"] = BROKER_CAPABILITIES["tansu"] | {"fetch_sessions"}

#: capability -> (api key, lowest max version) a broker must advertise to have it.
API_CAPABILITIES: dict[str, tuple[int, int]] = {
    "classic_groups": (11, 0),  # JoinGroup
    "kip848": (68, 0),  # ConsumerGroupHeartbeat
    "kip848_regex": (68, 1),  # SubscribedTopicRegex came with v1
    "offset_for_leader_epoch": (23, 0),
    "create_topics_api": (19, 0),
    # ShareGroupHeartbeat: v0 was Kafka 4.0's early access, kproto speaks v1 (4.1+).
    "share_groups": (76, 1),
}


def capabilities_from_api_versions(versions: dict[int, tuple[int, int]]) -> frozenset[str]:
    """The capabilities of :data:`API_CAPABILITIES` a broker has, from its ApiVersions
    answer (api_key -> (min, max), as :func:`tests.brokers.raw.api_versions` gives)."""
    return frozenset(name for name, (key, version) in API_CAPABILITIES.items()
                     if key in versions and versions[key][1] >= version)

_topic_counter = itertools.count()


class Broker:
    """Common surface of every test broker.

    Subclasses set ``name``, ``bootstrap_servers`` and ``capabilities`` and implement
    :meth:`_create_topic` and :meth:`close`.
    """

    name: str = "?"
    bootstrap_servers: str = ""
    capabilities: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._partition_counts: dict[str, int] = {}

    # --- topics ------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, replication: int = 1) -> None:
        """Create ``name`` with ``partitions`` partitions (fails if it cannot)."""
        self._create_topic(name, partitions, replication)
        self._partition_counts[name] = partitions

    def _create_topic(self, name: str, partitions: int, replication: int) -> None:
        raise NotImplementedError

    def new_topic(self, partitions: int = 1, prefix: str = "t") -> str:
        """Create a topic with a name no other test uses (brokers are shared per session)
        and return its name."""
        name = "{}-{}-{}-{}".format(prefix, os.getpid(), next(_topic_counter),
                                    time.monotonic_ns() % 1_000_000)
        self.create_topic(name, partitions)
        return name

    def partitions_of(self, topic: str) -> list[int]:
        """Partition ids of a topic created through this object (else from Metadata)."""
        if topic not in self._partition_counts:
            from confluent_kafka.admin import AdminClient

            md = AdminClient({"bootstrap.servers": self.bootstrap_servers,
                              "broker.address.family": "v4"}).list_topics(topic, timeout=10)
            self._partition_counts[topic] = len(md.topics[topic].partitions)
        return list(range(self._partition_counts[topic]))

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """(host, port) of every bootstrap broker."""
        out = []
        for hp in self.bootstrap_servers.split(","):
            host, _, port = hp.rpartition(":")
            out.append((host, int(port)))
        return out

    # --- seeding -----------------------------------------------------------------------

    def produce(self, topic: str, n: int, *, partitions: Sequence[int] | None = None,
                codec: str = "none", **kwargs) -> list[seeding.WrittenRecord]:
        """:func:`tests.brokers.seeding.produce_records` on this broker; ``partitions``
        defaults to every partition of the topic."""
        if partitions is None:
            partitions = self.partitions_of(topic)
        return seeding.produce_records(self.bootstrap_servers, topic, n,
                                       partitions=partitions, codec=codec, **kwargs)

    def produce_batch(self, topic: str, n: int, **kwargs) -> list[seeding.WrittenRecord]:
        """:func:`tests.brokers.seeding.produce_batch` on this broker: ``n`` records as
        exactly one batch (for a test that needs the layout)."""
        return seeding.produce_batch(self.bootstrap_servers, topic, n, **kwargs)

    def produce_transactions(self, topic: str, **kwargs) -> seeding.Transactions:
        """:func:`tests.brokers.seeding.produce_transactions` on this broker."""
        if "transactions" not in self.capabilities:
            raise RuntimeError("{} does not support transactions".format(self.name))
        return seeding.produce_transactions(self.bootstrap_servers, topic, **kwargs)

    # --- raw protocol ------------------------------------------------------------------

    def raw_fetch(self, topic: str, partition: int, offset: int = 0, **kwargs) -> bytes:
        """The records bytes of one Fetch of the partition from its leader (golden data).
        See :func:`tests.brokers.raw.fetch_partition_bytes`."""
        from tests.brokers import raw

        return raw.fetch_partition_bytes(self.bootstrap_servers, topic, partition, offset,
                                         **kwargs)

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "{}({!r})".format(type(self).__name__, self.bootstrap_servers)
