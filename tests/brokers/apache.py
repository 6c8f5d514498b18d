"""Apache Kafka for the tests: the test ground's Kafka 4.4 from Maven, yours, or Docker's.

Owns :func:`start_apache_kafka`, which picks, in this order:

- ``KPROTO_KAFKA_BOOTSTRAP=host:port``: a running broker, used as it is
  (:class:`RunningKafka`; never stopped, no ``fresh_broker`` capability);
- ``KPROTO_KAFKA_HOME=/path/to/kafka``: an Apache Kafka distribution (3.9 or 4.x) started
  as a child process (:class:`LocalKafka`: KRaft combined broker/controller on loopback
  ports, a temporary log dir, stopped by its process group);
- ``KPROTO_KAFKA_DOCKER=1``: the official ``apache/kafka`` image through testcontainers
  (:class:`ApacheKafka`; the client listener is published on the same port number on
  127.0.0.1 so the advertised address is right without a restart);
- the default: Kafka 4.4 from the test ground's pom
  (:class:`~tests.brokers.maven_kafka.MavenKafka`, one KRaft combined broker/controller,
  and the three-node :class:`~tests.brokers.maven_kafka.MavenKafkaCluster`), where ``mvn``
  and ``java`` are on the PATH.

It also owns what every kind shares (:class:`_Kafka`: topic creation that waits until
every broker lists the topic, capabilities from ApiVersions; the readiness probe
:func:`answers`) and the suite's broker settings.

Where none is available it returns why, and the fixture skips. Every kind reads its
API-derived capabilities from the broker's ApiVersions answer once it is up.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time

from kproto.tools.embedded import create_topic
from tests.brokers import maven
from tests.brokers._net import api_versions_v0_probe, free_port, free_ports, wait_until
from tests.brokers.base import (API_CAPABILITIES, BROKER_CAPABILITIES, Broker,
                                capabilities_from_api_versions)

log = logging.getLogger("kproto.tests.brokers")

IMAGE = "apache/kafka:4.0.0"
ENV_BOOTSTRAP = "KPROTO_KAFKA_BOOTSTRAP"
ENV_HOME = "KPROTO_KAFKA_HOME"
ENV_DOCKER = "KPROTO_KAFKA_DOCKER"

#: Broker settings the suite relies on (single node: internal topics with one replica;
#: no initial rebalance delay; topics only when a test creates them).
SUITE_SETTINGS = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
}

#: Lower bounds for share groups' own settings (KIP-932), so a test may give its group
#: short locks and quick heartbeats with group configs (IncrementalAlterConfigs): Kafka's
#: defaults forbid locks under 15 s, heartbeats under 5 s and sessions under 45 s. The
#: defaults themselves stay Kafka's.
SHARE_GROUP_BOUNDS = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.min.session.timeout.ms": "6000",
}

#: What a single node adds for share groups (KIP-932): its state topic with one replica.
SINGLE_NODE_SETTINGS = {
    **SUITE_SETTINGS,
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    **SHARE_GROUP_BOUNDS,
}


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


def answers(bootstrap: str) -> bool:
    """The readiness test of every kind: ApiVersions answered, and Metadata lists a broker
    (listening is not enough: the broker must have registered with its controller)."""
    host, _, port = bootstrap.rpartition(":")
    return api_versions_v0_probe(host, int(port), 2.0) and _metadata_lists_a_broker(bootstrap)


def start_apache_kafka() -> tuple[Broker | None, str | None]:
    """(broker, None), or (None, why there is none) for the fixture to skip with."""
    bootstrap = os.environ.get(ENV_BOOTSTRAP)
    if bootstrap:
        return RunningKafka(bootstrap), None
    home = os.environ.get(ENV_HOME)
    if home:
        return LocalKafka(home), None
    if os.environ.get(ENV_DOCKER):
        reason = docker_unavailable_reason()
        if reason is not None:
            return None, "{}={}: {}".format(ENV_DOCKER, os.environ[ENV_DOCKER], reason)
        return ApacheKafka(), None
    reason = maven.unavailable_reason()
    if reason is not None:
        return None, "{} (or set {} or {})".format(reason, ENV_HOME, ENV_BOOTSTRAP)
    from tests.brokers.maven_kafka import MavenKafka  # it builds on _Kafka, below

    return MavenKafka(), None


class _Kafka(Broker):
    """What every Apache Kafka kind shares: topic creation, and capabilities read from the
    broker's ApiVersions once it answers (the static table's other entries as they are)."""

    name = "apache_kafka"
    fresh = True  # started by this session with SUITE_SETTINGS

    def _read_capabilities(self) -> None:
        from tests.brokers import raw

        prior = BROKER_CAPABILITIES["apache_kafka"] - set(API_CAPABILITIES)
        if not self.fresh:
            prior -= {"fresh_broker"}
        self.capabilities = prior | capabilities_from_api_versions(
            raw.api_versions(self.addresses[0]))

    def _create_topic(self, name: str, partitions: int, replication: int) -> None:
        create_topic(self.bootstrap_servers, name, partitions, replication, timeout_s=60)
        self._await_topic(name, partitions)

    def _await_topic(self, name: str, partitions: int, timeout_s: float = 60.0) -> None:
        """Wait until every broker that answers lists ``name`` with its ``partitions``.

        A CreateTopics answer only says the controller committed the topic: each broker
        applies the metadata log afterwards (on a loaded machine, seconds later) and until
        then answers UNKNOWN_TOPIC_OR_PARTITION for it, so a test asking right away
        (``topics()``, ``partitions_for_topic()``, a pattern) would miss the topic. A node
        that does not answer (killed by the test) is not waited for."""
        from tests.brokers import raw

        deadline = time.monotonic() + timeout_s
        for address in self.addresses:
            while True:
                try:
                    if _lists_topic(address, name, partitions):
                        break
                except (OSError, raw.RawProtocolError):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("{}:{} does not list the topic {} {:.0f} s after its creation".format(
                        *address, name, timeout_s))
                time.sleep(0.05)


def _lists_topic(address: tuple[str, int], topic: str, partitions: int) -> bool:
    """Whether the broker at ``address`` answers Metadata for ``topic`` with no topic error
    and ``partitions`` partitions (their leaders are the cluster's business, not this)."""
    from kproto.messages import MetadataRequest
    from tests.brokers import raw

    version = raw.negotiated_version(address, MetadataRequest, minimum=4)
    response = raw.roundtrip(address, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False), version)
    return any(t.name == topic and t.error_code == 0 and len(t.partitions) == partitions
               for t in response.topics)


class RunningKafka(_Kafka):
    """A broker someone else runs (``KPROTO_KAFKA_BOOTSTRAP``): used, never stopped."""

    fresh = False

    def __init__(self, bootstrap_servers: str, startup_timeout: float = 30.0) -> None:
        super().__init__()
        self.bootstrap_servers = bootstrap_servers
        if not wait_until(lambda: answers(bootstrap_servers.split(",")[0]), startup_timeout,
                          interval=0.5):
            raise RuntimeError("{}={} does not answer as a Kafka broker after {:.0f}s".format(
                ENV_BOOTSTRAP, bootstrap_servers, startup_timeout))
        self._read_capabilities()
        log.info("using the running kafka at %s", bootstrap_servers)

    def close(self) -> None:
        pass  # not ours to stop


class LocalKafka(_Kafka):
    """An Apache Kafka distribution (``KPROTO_KAFKA_HOME``, 3.9 or 4.x) as a child process:
    KRaft, one combined broker/controller with a static voter on loopback ports (the
    configuration both 3.9 and 4.x accept), a temporary log dir, :data:`SUITE_SETTINGS`.

    Needs Java on the PATH (or JAVA_HOME), as the distribution's scripts do. Never tried
    in this repository's CI (no distribution reachable there).
    """

    def __init__(self, home: str, startup_timeout: float = 120.0) -> None:
        super().__init__()
        self.home = home
        self.port, cport = free_ports(2)
        self.bootstrap_servers = "127.0.0.1:{}".format(self.port)
        self._dir = tempfile.mkdtemp(prefix="kproto-kafka-")
        self.process: subprocess.Popen | None = None
        try:
            config = self._write_config(cport)
            env = dict(os.environ, LOG_DIR=os.path.join(self._dir, "app-logs"))
            env.setdefault("KAFKA_HEAP_OPTS", "-Xmx512m -Xms256m")
            cluster_id = self._run(["kafka-storage.sh", "random-uuid"], env).split()[-1]
            # With a static voter set, format takes no --standalone (4.x refuses both).
            self._run(["kafka-storage.sh", "format", "-t", cluster_id, "-c", config], env)
            self._output = open(os.path.join(self._dir, "server.out"), "wb")
            # kafka-server-start.sh execs java; a session of its own lets close() signal
            # the whole group, whatever the script started.
            self.process = subprocess.Popen(
                [self._bin("kafka-server-start.sh"), config], stdout=self._output,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)
            if not wait_until(lambda: self.process.poll() is not None
                              or answers(self.bootstrap_servers), startup_timeout,
                              interval=0.5) or self.process.poll() is not None:
                raise RuntimeError("Apache Kafka from {} not answering on {} (exit code {}):"
                                   "\n{}".format(home, self.bootstrap_servers,
                                                 self.process.poll(), self.output()[-3000:]))
            self._read_capabilities()
        except BaseException:
            self.close()
            raise
        log.info("apache kafka pid %s from %s ready on %s", self.process.pid, home,
                 self.bootstrap_servers)

    def _bin(self, script: str) -> str:
        return os.path.join(self.home, "bin", script)

    def _run(self, argv: list[str], env: dict) -> str:
        done = subprocess.run([self._bin(argv[0])] + argv[1:], capture_output=True, text=True,
                              env=env, timeout=120, stdin=subprocess.DEVNULL)
        if done.returncode:
            raise RuntimeError("{} failed ({}):\n{}{}".format(
                " ".join(argv), done.returncode, done.stdout[-2000:], done.stderr[-2000:]))
        return done.stdout

    def _write_config(self, cport: int) -> str:
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:{}".format(cport),
            "listeners": "PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}".format(
                self.port, cport),
            "advertised.listeners": "PLAINTEXT://127.0.0.1:{}".format(self.port),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": os.path.join(self._dir, "data"),
            **SUITE_SETTINGS,
        }
        path = os.path.join(self._dir, "server.properties")
        with open(path, "w") as f:
            f.writelines("{}={}\n".format(k, v) for k, v in settings.items())
        return path

    def output(self) -> str:
        """What the broker printed so far (for failure messages)."""
        try:
            with open(os.path.join(self._dir, "server.out"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def close(self, timeout: float = 30.0) -> None:
        """Terminate the process group (kill after ``timeout``), then remove the log dir."""
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout)
            self._output.close()
        directory, self._dir = getattr(self, "_dir", None), None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


class ApacheKafka(_Kafka):
    """A single-node Apache Kafka 4 in KRaft mode in Docker; :meth:`close` removes the
    container."""

    def __init__(self, image: str = IMAGE, startup_timeout: float = 120.0) -> None:
        from testcontainers.core.container import DockerContainer

        super().__init__()
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
        }
        env.update(("KAFKA_" + k.upper().replace(".", "_"), v) for k, v in SUITE_SETTINGS.items())
        container = DockerContainer(image)
        for key, value in env.items():
            container = container.with_env(key, value)
        container = container.with_bind_ports(p, p)
        # Same port inside and out; publish on loopback only (docker-py takes (ip, port),
        # testcontainers' with_bind_ports only a port).
        container.ports[str(p)] = ("127.0.0.1", p)
        self._container = container
        self._container.start()
        self.bootstrap_servers = "127.0.0.1:{}".format(p)
        try:
            if not wait_until(lambda: answers(self.bootstrap_servers), startup_timeout,
                              interval=0.5):
                logs = b"".join(self._container.get_logs()).decode(errors="replace")
                raise RuntimeError("Apache Kafka not answering on 127.0.0.1:{} after {:.0f}s:"
                                   "\n{}".format(p, startup_timeout, logs[-3000:]))
            self._read_capabilities()
        except BaseException:
            self.close()
            raise
        log.info("apache kafka container ready on %s", self.bootstrap_servers)

    def close(self) -> None:
        container, self._container = getattr(self, "_container", None), None
        if container is not None:
            container.stop()
