"""Kafka 4.4 from the test ground's pom: :class:`MavenKafka` (one node) and
:class:`MavenKafkaCluster` (three).

Owns starting and stopping the test ground's own brokers (the jars and the JVM are
:mod:`tests.brokers.maven`'s): their KRaft settings, readiness (answering, every node
registered, the group coordinator warmed up), a start again on new ports when a port was
taken before the JVM bound it (:class:`PortTaken`), and, for the cluster, killing and
restarting nodes and the proxied listeners. :func:`tests.brokers.apache.start_apache_kafka`
picks :class:`MavenKafka` by default.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
from typing import Callable

from kproto.tools.embedded import create_topic
from tests.brokers import maven
from tests.brokers._net import free_ports, hold_ports, release_ports, wait_until
from tests.brokers.apache import SINGLE_NODE_SETTINGS, _Kafka, answers
from tests.brokers.proxy import BrokerProxy

log = logging.getLogger("kproto.tests.brokers")


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


#: How often a Kafka of the test ground is started on new ports when one of its ports was
#: taken before the JVM bound it (see :class:`PortTaken`).
START_ATTEMPTS = 3


class PortTaken(RuntimeError):
    """A node died at startup because one of its ports was in use: the ports were free
    when :func:`~tests.brokers._net.free_ports` chose them, but the JVM binds them seconds
    later, and meanwhile any process (another worker's broker, a client's outgoing
    connection, which takes its local port from the same ephemeral range) may take one.
    The caller starts again on other ports."""


def _start_on_free_ports(broker: _Kafka, start: Callable[[], None], what: str) -> None:
    """``start()`` (one start on ports free a moment ago), up to :data:`START_ATTEMPTS`
    times while it fails with :class:`PortTaken`; ``broker.close()`` after every failed
    start (it releases what the start left: processes, ports, the directory), and any
    other failure ends it at once."""
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            start()
            return
        except PortTaken:
            broker.close()
            if attempt == START_ATTEMPTS:
                raise
            log.warning("%s: a port was taken before the JVM bound it; starting again on other ports",
                        what)
        except BaseException:
            broker.close()
            raise


def _check_alive(nodes: "list[maven.KafkaNode]", what: str) -> None:
    """Raise if a node has died: :class:`PortTaken` when its log says a port was in use."""
    dead = [n for n in nodes if not n.alive()]
    if dead:
        tails = "\n".join(n.log_tail() for n in dead)
        # SocketServer: "Socket server failed to bind to 127.0.0.1:port: Address already in use."
        error = PortTaken if "Address already in use" in tails else RuntimeError
        raise error("Kafka 4.4 (test ground) node died {}:\n{}".format(what, tails))


def _wait_ready(bootstrap: str, nodes: "list[maven.KafkaNode]", timeout: float) -> None:
    answered = wait_until(lambda: any(not n.alive() for n in nodes) or answers(bootstrap),
                          timeout, interval=0.25)
    _check_alive(nodes, "before answering on {}".format(bootstrap))
    if not answered:
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
        _start_on_free_ports(self, lambda: self._start(extra_settings, startup_timeout, extra_jvm),
                             "kafka 4.4 (maven)")
        log.info("kafka 4.4 (maven) pid %s ready on %s", self.node.pid, self.bootstrap_servers)

    def _start(self, extra_settings: dict[str, str] | None, startup_timeout: float,
               extra_jvm: tuple[str, ...]) -> None:
        """One start on ports free a moment ago, in a new directory (the caller closes what
        a failed start left)."""
        self.port, cport = free_ports(2)
        self.bootstrap_servers = "127.0.0.1:{}".format(self.port)
        self._dir = maven.new_directory("kproto-kafka44-")
        settings = {**_kraft_settings(1, self.port, cport),
                    "controller.quorum.bootstrap.servers": "127.0.0.1:{}".format(cport),
                    **SINGLE_NODE_SETTINGS, **self._more_settings(cport),
                    **(extra_settings or {})}
        self.node = maven.KafkaNode(self._dir, settings, maven.random_cluster_id(),
                                    format_args=("--standalone", *self._format_args()))
        self.node.start(extra_jvm=extra_jvm)
        _wait_ready(self.bootstrap_servers, [self.node], startup_timeout)
        self._read_capabilities()
        _warm_group_coordinator(self.bootstrap_servers, startup_timeout)
        # Still ours: what answered on the port was this node, not whoever took it.
        _check_alive([self.node], "while starting")

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
        _start_on_free_ports(self, lambda: self._start(size, racks, startup_timeout, proxied_listeners),
                             "kafka 4.4 cluster (maven)")
        log.info("kafka 4.4 cluster (maven) ready on %s", self.bootstrap_servers)

    def _start(self, size: int, racks: tuple[str, ...] | None, startup_timeout: float,
               proxied_listeners: tuple[str, ...]) -> None:
        """One start on ports free a moment ago, in a new directory (the caller closes what
        a failed start left)."""
        # The proxies listen first (each on a port bind(0) picks), their upstreams set once
        # the nodes' ports are chosen: made after, a proxy's bind(0) could pick one of the
        # ports free_ports has just released for a node.
        self.proxies: dict[str, list[BrokerProxy]] = {
            name: [BrokerProxy(("127.0.0.1", 0)) for _ in range(size)] for name in proxied_listeners}
        all_ports = free_ports((2 + len(proxied_listeners)) * size)
        ports, cports = all_ports[:size], all_ports[size:2 * size]
        self.ports = ports
        self._controller_ports = cports
        self._held: dict[int, list[socket.socket]] = {}  # node id -> its ports, held while down
        self.bootstrap_servers = ",".join("127.0.0.1:{}".format(p) for p in ports)
        self._listener_ports = {name: all_ports[(2 + k) * size:(3 + k) * size]
                                for k, name in enumerate(proxied_listeners)}
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
        for name, own in self._listener_ports.items():
            for proxy, port in zip(self.proxies[name], own):
                proxy.upstream = ("127.0.0.1", port)
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
        # Every node registered (a node that died meanwhile, e.g. on a port taken, ends
        # the wait at once).
        registered = wait_until(lambda: any(not n.alive() for n in self.nodes)
                                or self._broker_count() >= size, startup_timeout, interval=0.5)
        _check_alive(self.nodes, "before the cluster listed every node")
        if not registered:
            raise RuntimeError("Kafka 4.4 cluster: not all {} nodes registered after {:.0f}s:\n{}"
                               .format(size, startup_timeout, self.log_tail()))
        _warm_group_coordinator(self.bootstrap_servers, startup_timeout)
        self._read_capabilities()
        self.capabilities = self.capabilities | {"multi_broker"}
        _check_alive(self.nodes, "while starting")

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
        """SIGKILL one node (a crash: no controlled shutdown). Its ports are held until
        :meth:`restart` (see :func:`~tests.brokers._net.hold_ports`)."""
        self.node(node_id).stop(kill=True)
        i = node_id - 1
        # The node must come back on the same ports (static voters, advertised listeners,
        # the proxies' upstreams); while it is down (tens of seconds in the kill tests),
        # every bind(0) on the machine (mock clusters of other workers, proxies) may take
        # one of them, and the restart would die on 'Address already in use'.
        self._held[node_id] = hold_ports([self.ports[i], self._controller_ports[i]]
                                         + [own[i] for own in self._listener_ports.values()])

    def restart(self, node_id: int, timeout: float = 120.0) -> None:
        """Start a stopped node again (same ports and data) and wait until it answers."""
        node = self.node(node_id)
        release_ports(self._held.pop(node_id, []))
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
        for held in getattr(self, "_held", {}).values():
            release_ports(held)
        for proxies in getattr(self, "proxies", {}).values():
            for proxy in proxies:
                proxy.close()
        directory, self._dir = getattr(self, "_dir", None), None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
