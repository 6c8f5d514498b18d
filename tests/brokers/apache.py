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
- the default: Kafka 4.4 from the test ground's pom (:class:`MavenKafka`: jars resolved by
  ``mvn``, ``java -cp ... kafka.Kafka``, one KRaft combined broker/controller, see
  :mod:`tests.brokers.maven`), where ``mvn`` and ``java`` are on the PATH.

:class:`MavenKafkaCluster` is the three-node cluster (a controller quorum of three combined
nodes, internal topics with three replicas) for what one node cannot show.

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
from tests.brokers.proxy import BrokerProxy

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


def _answers(bootstrap: str) -> bool:
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
        if not wait_until(lambda: _answers(bootstrap_servers.split(",")[0]), startup_timeout,
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
                              or _answers(self.bootstrap_servers), startup_timeout,
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
            if not wait_until(lambda: _answers(self.bootstrap_servers), startup_timeout,
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


def _kraft_settings(node_id: int, port: int, controller_port: int) -> dict[str, str]:
    """One combined broker/controller's listeners on loopback (the quorum is added by the
    caller: a dynamic one for a single node, static voters for the cluster)."""
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "listeners": "PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}".format(
            port, controller_port),
        "advertised.listeners": "PLAINTEXT://127.0.0.1:{}".format(port),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        # Small segments and a quick retention check, so a test can roll the log and see
        # retention delete a segment without writing megabytes.
        "log.retention.check.interval.ms": "1000",
    }


def _add_listener(settings: dict[str, str], name: str, port: int, advertised_port: int) -> None:
    """Another PLAINTEXT listener on ``port``, advertised at ``advertised_port``."""
    settings["listeners"] += ",{}://127.0.0.1:{}".format(name, port)
    settings["advertised.listeners"] += ",{}://127.0.0.1:{}".format(name, advertised_port)
    settings["listener.security.protocol.map"] += ",{}:PLAINTEXT".format(name)


def _wait_ready(bootstrap: str, nodes: "list[maven.KafkaNode]", timeout: float) -> None:
    if not wait_until(lambda: any(not n.alive() for n in nodes) or _answers(bootstrap),
                      timeout, interval=0.25) or any(not n.alive() for n in nodes):
        tails = "\n".join(n.log_tail() for n in nodes)
        raise RuntimeError("Kafka 4.4 (test ground) not answering on {} after {:.0f}s:\n{}"
                           .format(bootstrap, timeout, tails))


def _warm_group_coordinator(bootstrap: str, timeout: float) -> None:
    """Have a fresh broker create __consumer_offsets and load its coordinator, as a broker
    in use has: until then it answers a first group's commits NOT_COORDINATOR, which every
    test on a fresh broker would otherwise have to outwait. An independent client commits
    one offset of a topic of its own until the commit is taken."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition as CTopicPartition

    topic = "kproto-warm-up"
    create_topic(bootstrap, topic, 1, 1, timeout_s=60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kproto-warm-up",
                         "enable.auto.commit": False, "log_level": 0})
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                consumer.commit(offsets=[CTopicPartition(topic, 0, 0)], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


class MavenKafka(_Kafka):
    """Kafka 4.4 from the test ground (:mod:`tests.brokers.maven`): one KRaft combined
    broker/controller formatted ``--standalone`` (a dynamic quorum of one), loopback
    ports, a temporary directory, :data:`SINGLE_NODE_SETTINGS`; stopped by pid.

    ``node`` is the :class:`~tests.brokers.maven.KafkaNode` (its ``log_path`` is the
    broker's own log: print ``node.log_tail()`` when a test fails); ``extra_settings``
    adds to or overrides the server properties; ``extra_jvm`` adds JVM options (the
    fuzzer's tests start JaCoCo's agent so).
    """

    def __init__(self, extra_settings: dict[str, str] | None = None,
                 startup_timeout: float = 120.0, extra_jvm: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.port, cport = free_ports(2)
        self.bootstrap_servers = "127.0.0.1:{}".format(self.port)
        self._dir = maven.new_directory("kproto-kafka44-")
        settings = {**_kraft_settings(1, self.port, cport),
                    "controller.quorum.bootstrap.servers": "127.0.0.1:{}".format(cport),
                    **SINGLE_NODE_SETTINGS, **self._more_settings(cport),
                    **(extra_settings or {})}
        self.node = maven.KafkaNode(self._dir, settings, maven.random_cluster_id(),
                                    format_args=("--standalone", *self._format_args()))
        try:
            self.node.start(extra_jvm=extra_jvm)
            _wait_ready(self.bootstrap_servers, [self.node], startup_timeout)
            self._read_capabilities()
            _warm_group_coordinator(self.bootstrap_servers, startup_timeout)
        except BaseException:
            self.close()
            raise
        log.info("kafka 4.4 (maven) pid %s ready on %s", self.node.pid, self.bootstrap_servers)

    def _more_settings(self, controller_port: int) -> dict[str, str]:
        """What a subclass adds to the server properties (listeners of its own: see
        :class:`tests.brokers.secure_kafka.SecureKafka`)."""
        return {}

    def _format_args(self) -> tuple[str, ...]:
        """What a subclass adds to ``StorageTool format`` (e.g. ``--add-scram``)."""
        return ()

    def log_tail(self, chars: int = 4000) -> str:
        return self.node.log_tail(chars)

    def close(self) -> None:
        node = getattr(self, "node", None)
        if node is not None:
            node.close()
        directory, self._dir = getattr(self, "_dir", None), None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


class MavenKafkaCluster(_Kafka):
    """Three Kafka 4.4 nodes from the test ground, each a combined broker/controller, the
    three forming the controller quorum (static voters); internal topics (offsets,
    transactions, share state) with three replicas and min ISR 2, so one node may die.

    ``nodes[i]`` is node id ``i + 1`` (:class:`~tests.brokers.maven.KafkaNode`), its
    PLAINTEXT port ``ports[i]``: ``kill(node_id)`` stops one with SIGKILL (a crash),
    ``restart(node_id)`` brings it back on the same ports and data and waits until it
    answers. ``racks`` gives each broker a ``broker.rack`` (rack-aware fetching, KIP-392)
    when set.

    ``proxied_listeners`` (names such as ``"EXTERNAL"``) adds client listeners whose
    advertised addresses are :class:`~tests.brokers.proxy.BrokerProxy` ports the cluster
    owns, one per node (``proxies[name][i]``, in front of node ``i + 1``'s own port of that
    listener, ``listener_address(name, node_id)``). Kafka answers Metadata and
    FindCoordinator with the endpoints of the listener the request came in on, so a client
    bootstrapped on such a listener is sent to the proxies; ``take_away(name)`` closes them
    (connections dropped, the addresses refuse new ones) and ``bring_back(name)`` opens
    them again on the same ports, while the quorum and replication go on over CONTROLLER
    and PLAINTEXT (``inter.broker.listener.name``) untouched: the addresses the metadata
    names can all go away while the cluster keeps running.
    """

    name = "apache_kafka_cluster"
    # One rack per node, as the session fixture starts it (node id i in RACKS[i - 1]).
    RACKS = ("rack-a", "rack-b", "rack-c")

    def __init__(self, size: int = 3, racks: tuple[str, ...] | None = None,
                 startup_timeout: float = 180.0, proxied_listeners: tuple[str, ...] = ()) -> None:
        super().__init__()
        all_ports = free_ports((2 + len(proxied_listeners)) * size)
        ports, cports = all_ports[:size], all_ports[size:2 * size]
        self.ports = ports
        self.bootstrap_servers = ",".join("127.0.0.1:{}".format(p) for p in ports)
        self._listener_ports = {name: all_ports[(2 + k) * size:(3 + k) * size]
                                for k, name in enumerate(proxied_listeners)}
        self.proxies: dict[str, list[BrokerProxy]] = {}
        self._away: set[str] = set()  # proxied listeners taken away
        self._dir = maven.new_directory("kproto-kafka44-cluster-")
        voters = ",".join("{}@127.0.0.1:{}".format(i + 1, c) for i, c in enumerate(cports))
        cluster_id = maven.random_cluster_id()
        replicated = {
            "offsets.topic.replication.factor": str(min(3, size)),
            "transaction.state.log.replication.factor": str(min(3, size)),
            "transaction.state.log.min.isr": str(min(2, size)),
            "share.coordinator.state.topic.replication.factor": str(min(3, size)),
            "share.coordinator.state.topic.min.isr": str(min(2, size)),
            "default.replication.factor": str(min(3, size)),
            "min.insync.replicas": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
        }
        self.nodes: list[maven.KafkaNode] = []
        try:
            for name, own in self._listener_ports.items():
                self.proxies[name] = [BrokerProxy(("127.0.0.1", p)) for p in own]
            for i in range(size):
                settings = {**_kraft_settings(i + 1, ports[i], cports[i]),
                            "controller.quorum.voters": voters, **replicated}
                for name, own in self._listener_ports.items():
                    _add_listener(settings, name, own[i], self.proxies[name][i].port)
                if racks:
                    settings["broker.rack"] = racks[i % len(racks)]
                    settings["replica.selector.class"] = (
                        "org.apache.kafka.common.replica.RackAwareReplicaSelector")
                self.nodes.append(maven.KafkaNode(
                    os.path.join(self._dir, "node{}".format(i + 1)), settings, cluster_id))
            for node in self.nodes:
                node.format()
            for node in self.nodes:
                node.start()
            _wait_ready(self.bootstrap_servers.split(",")[0], self.nodes, startup_timeout)
            wait_until(lambda: self._broker_count() >= size, startup_timeout, interval=0.5)
            _warm_group_coordinator(self.bootstrap_servers, startup_timeout)
            self._read_capabilities()
            self.capabilities = self.capabilities | {"multi_broker"}
        except BaseException:
            self.close()
            raise
        log.info("kafka 4.4 cluster (maven) ready on %s", self.bootstrap_servers)

    def _broker_count(self) -> int:
        from confluent_kafka.admin import AdminClient

        try:
            md = AdminClient({"bootstrap.servers": self.bootstrap_servers,
                              "log_level": 0}).list_topics(timeout=5)
        except Exception:  # KafkaException while brokers are still registering
            return 0
        return len(md.brokers)

    def _create_topic(self, name: str, partitions: int, replication: int) -> None:
        # Replicated by default here: a topic of the cluster survives one broker's death.
        create_topic(self.bootstrap_servers, name, partitions,
                     replication if replication > 1 else len(self.nodes), timeout_s=60)
        self._await_topic(name, partitions)

    def node(self, node_id: int) -> "maven.KafkaNode":
        return self.nodes[node_id - 1]

    def kill(self, node_id: int) -> None:
        """SIGKILL one node (a crash: no controlled shutdown)."""
        self.node(node_id).stop(kill=True)

    def restart(self, node_id: int, timeout: float = 120.0) -> None:
        """Start a stopped node again (same ports and data) and wait until it answers."""
        node = self.node(node_id)
        node.start()
        _wait_ready("127.0.0.1:{}".format(self.ports[node_id - 1]), [node], timeout)

    def listener_address(self, listener: str, node_id: int) -> tuple[str, int]:
        """Node ``node_id``'s own address on a proxied listener (what its proxy forwards
        to, and where a test's own proxy may point)."""
        return ("127.0.0.1", self._listener_ports[listener][node_id - 1])

    def take_away(self, listener: str) -> None:
        """Close the proxies a proxied listener advertises: open connections through them
        are dropped and their addresses refuse new ones (the nodes keep running)."""
        self._away.add(listener)
        for proxy in self.proxies[listener]:
            proxy.close()

    def bring_back(self, listener: str) -> None:
        """Open the proxies of a listener taken away again, on the same ports (their
        request logs start empty); nothing if it is not away."""
        if listener in self._away:
            self.proxies[listener] = [BrokerProxy(proxy.upstream, port=proxy.port)
                                      for proxy in self.proxies[listener]]
            self._away.discard(listener)

    def log_tail(self, chars: int = 2000) -> str:
        return "\n".join(n.log_tail(chars) for n in self.nodes)

    def close(self) -> None:
        # SIGKILL: the data is deleted anyway, and a node shutting down in a controlled way
        # after the others are gone waits for a quorum that no longer exists.
        for node in getattr(self, "nodes", []):
            node.stop(kill=True)
        for node in getattr(self, "nodes", []):
            node.close()
        for proxies in getattr(self, "proxies", {}).values():
            for proxy in proxies:
                proxy.close()
        directory, self._dir = getattr(self, "_dir", None), None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
