"""NetworkClients for the net tests against the mock cluster (closed after the test), and
driving one until a future completes or a condition holds."""

from __future__ import annotations

import time

import pytest

from kproto.net.client import NetworkClient


@pytest.fixture
def clients():
    made: list[NetworkClient] = []

    def make(cluster, **config) -> NetworkClient:
        config.setdefault("request_timeout_ms", 10_000)
        client = NetworkClient(bootstrap_servers=cluster.bootstrap_servers, **config)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def wait(client: NetworkClient, future, timeout_ms: float = 20_000):
    client.poll(timeout_ms, future=future)
    assert future.is_done, "no answer within {} ms".format(timeout_ms)
    if future.failed():
        raise future.exception
    return future.value


def poll_until(client: NetworkClient, predicate, timeout_ms: float = 20_000) -> bool:
    deadline = time.monotonic() + timeout_ms / 1000
    while not predicate():
        if time.monotonic() > deadline:
            return False
        client.poll(100)
    return True
