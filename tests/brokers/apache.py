"""Apache Kafka 4.x (KRaft, single combined broker/controller) in a Docker container.

Owns starting the official ``apache/kafka`` image through testcontainers where a Docker
engine is reachable. The container's client listener is published on the same port
number on 127.0.0.1 so the advertised address is right without a restart. Where no Docker
engine answers, :func:`docker_unavailable_reason` says why and the fixture skips.
"""

from __future__ import annotations

import logging

from tests.brokers._net import api_versions_v0_probe, free_port, wait_until
from tests.brokers.base import BROKER_CAPABILITIES, Broker

log = logging.getLogger("kproto.tests.brokers")

IMAGE = "apache/kafka:4.0.0"


def docker_unavailable_reason() -> str | None:
    """None when a Docker engine answers a ping; otherwise why not."""
    try:
        import docker
    except ImportError:
        return "the docker package is not installed (pip install testcontainers)"
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # any failure to reach the engine means "no Docker here"
        return "no Docker engine reachable ({})".format(str(exc).split(":")[0] or exc)
    return None


def _metadata_lists_a_broker(bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    try:
        md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(
            timeout=5)
    except Exception:  # KafkaException while the broker is still starting
        return False
    return bool(md.brokers)


class ApacheKafka(Broker):
    """A single-node Apache Kafka 4 in KRaft mode; :meth:`close` removes the container."""

    name = "apache_kafka"

    def __init__(self, image: str = IMAGE, startup_timeout: float = 120.0) -> None:
        from testcontainers.core.container import DockerContainer

        super().__init__()
        self.capabilities = BROKER_CAPABILITIES["apache_kafka"]
        self.port = free_port()
        p = self.port
        env = {
            "KAFKA_NODE_ID": "1",
            "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": "PLAINTEXT://:{},CONTROLLER://:9093".format(p),
            "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://127.0.0.1:{}".format(p),
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
            "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
            "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        }
        container = DockerContainer(image)
        for key, value in env.items():
            container = container.with_env(key, value)
        container = container.with_bind_ports(p, p)
        # Same port inside and out; publish on loopback only (docker-py takes (ip, port),
        # testcontainers' with_bind_ports only a port).
        container.ports[str(p)] = ("127.0.0.1", p)
        self._container = container
        self._container.start()
        try:
            # Listening is not enough: wait until the broker has registered with its
            # controller and Metadata lists it.
            if not wait_until(lambda: api_versions_v0_probe("127.0.0.1", p, 2.0)
                              and _metadata_lists_a_broker("127.0.0.1:{}".format(p)),
                              startup_timeout, interval=0.5):
                logs = b"".join(self._container.get_logs()).decode(errors="replace")
                raise RuntimeError("Apache Kafka not answering on 127.0.0.1:{} after {:.0f}s:"
                                   "\n{}".format(p, startup_timeout, logs[-3000:]))
        except BaseException:
            self.close()
            raise
        self.bootstrap_servers = "127.0.0.1:{}".format(p)
        log.info("apache kafka container ready on %s", self.bootstrap_servers)

    def _create_topic(self, name: str, partitions: int, replication: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        for future in admin.create_topics([NewTopic(name, partitions, replication)],
                                          operation_timeout=30).values():
            future.result(timeout=60)

    def close(self) -> None:
        container, self._container = getattr(self, "_container", None), None
        if container is not None:
            container.stop()
