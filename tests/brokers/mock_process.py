"""librdkafka's mock cluster in a child process, for tests that may crash it (the fuzzer).

``python -m tests.brokers.mock_process [--brokers N] [--topic NAME:PARTITIONS ...]`` starts
:class:`~tests.brokers.mock_cluster.MockCluster`, creates the topics, prints
``BOOTSTRAP host:port,...`` on one line and serves until it is terminated (or its stdin
closes). :class:`MockClusterProcess` runs it from a test and stops it by pid, so a crash
provoked in the mock is the child's death, seen as a finding, not the test run's.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from typing import Optional, Sequence

READY = "BOOTSTRAP "


class MockClusterProcess:
    """A mock cluster child process; ``bootstrap_servers``, ``pid``, ``alive()``, ``close()``."""

    def __init__(self, brokers: int = 1, topics: Sequence[tuple[str, int]] = (),
                 startup_timeout: float = 30.0) -> None:
        cmd = [sys.executable, "-m", "tests.brokers.mock_process", "--brokers", str(brokers)]
        for name, partitions in topics:
            cmd += ["--topic", "{}:{}".format(name, partitions)]
        self.process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)
        self.pid = self.process.pid
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.process.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(startup_timeout)
        if not line or not line[0].startswith(READY):
            self.close()
            raise RuntimeError("mock cluster child did not start: {!r}".format(line))
        self.bootstrap_servers = line[0][len(READY):].strip()

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def main(argv: Optional[list[str]] = None) -> int:
    from tests.brokers.mock_cluster import MockCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--topic", action="append", default=[], metavar="NAME:PARTITIONS")
    args = parser.parse_args(argv)
    cluster = MockCluster(args.brokers)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        for spec in args.topic:
            name, _, partitions = spec.rpartition(":")
            cluster.create_topic(name, int(partitions))
        print(READY + cluster.bootstrap_servers, flush=True)
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        stop.wait()
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
