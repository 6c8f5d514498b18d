"""A Spark standalone cluster on loopback: one master and workers, started from the PySpark
install by Spark's own launch classes (``java -cp <pyspark>/jars/* ...deploy.master.Master``
and ``...deploy.worker.Worker``), no distribution scripts.

Owns :class:`StandaloneCluster`: every JVM binds ports of the kernel's choice (port 0; the
master's URL is read from its log), a work directory per worker (executor logs land
there), each JVM in a session of its own, stopped by pid (a worker can be killed alone, for
the failure tests). ``SPARK_HOME`` is the PySpark directory: a worker launches its
executors from its ``jars/``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from tests.brokers import maven

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


class StandaloneCluster:
    """``master_url`` (``spark://127.0.0.1:port``) once :meth:`start` returned; ``workers``
    (their processes); :meth:`kill_worker` and :meth:`close`."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.directory = tempfile.mkdtemp(prefix="kproto-spark-standalone-")
        self.count, self.cores, self.memory = workers, cores, memory
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = []
        self.master_url = ""
        self._worker_args: list[tuple[str, ...]] = []
        self._logs: list = []

    def _java(self, name: str, main: str, *args: str) -> subprocess.Popen:
        home = spark_home()
        # SPARK_SCALA_VERSION: without it Spark's launcher (building an executor's command)
        # looks for a source build's launcher/target/scala-2.13, which an install lacks.
        env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_SCALA_VERSION="2.13",
                   SPARK_LOG_DIR=self.directory, SPARK_NO_DAEMONIZE="1")
        log = open(os.path.join(self.directory, name + ".out"), "ab")
        self._logs.append(log)
        argv = [maven.java(), "-Xmx256m", "-cp", os.path.join(home, "jars", "*"), main, *args]
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=self.directory, start_new_session=True)

    def start(self, timeout_s: float = 180.0) -> "StandaloneCluster":
        # Port 0 everywhere: a port found free beforehand can be taken in the seconds a JVM
        # takes to start (by a broker another test worker starts, or as the local port of any
        # connection), and Spark then quietly binds the next one up.
        self.master = self._java("master", _MASTER, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0")
        self.master_url = _await_master_url(os.path.join(self.directory, "master.out"), self.master, timeout_s,
                                            self.log_tail)
        for i in range(self.count):
            work = os.path.join(self.directory, "worker-{}".format(i))
            os.makedirs(work)
            self._worker_args.append((
                "--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", str(self.cores),
                "--memory", self.memory, "--work-dir", work, self.master_url))
            self.workers.append(None)
            self.start_worker(i)
        return self

    def start_worker(self, index: int) -> None:
        """Start worker ``index`` (again, after :meth:`kill_worker`: same work directory); it
        registers with the master by itself."""
        process = self.workers[index]
        if process is None or process.poll() is not None:
            self.workers[index] = self._java("worker-{}".format(index), _WORKER, *self._worker_args[index])

    def kill_worker(self, index: int) -> None:
        """SIGKILL one worker with its executor and Python workers (its process group): a
        machine lost mid-batch."""
        process = self.workers[index]
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)

    def executor_logs(self) -> str:
        """Every executor's stderr under the workers' work directories."""
        parts = []
        for root, _, files in os.walk(self.directory):
            if "stderr" in files and os.sep + "worker-" in root:
                with open(os.path.join(root, "stderr"), errors="replace") as f:
                    parts.append("--- {} ---\n{}".format(root, f.read()))
        return "\n".join(parts)

    def log_tail(self, chars: int = 3000) -> str:
        parts = []
        for name in sorted(os.listdir(self.directory)):
            if name.endswith(".out"):
                with open(os.path.join(self.directory, name), "rb") as f:
                    f.seek(0, os.SEEK_END)
                    f.seek(max(0, f.tell() - chars))
                    parts.append("--- {} ---\n{}".format(name, f.read().decode(errors="replace")))
        return "\n".join(parts)

    def close(self) -> None:
        for process in [*self.workers, self.master]:
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(30)
        for log in self._logs:
            log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def _await_master_url(log: str, process: subprocess.Popen, timeout_s: float, tail) -> str:
    """The master's ``spark://`` URL from its log line "Starting Spark master at ...",
    written once its RPC endpoint is bound."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the Spark master exited ({}):\n{}".format(process.returncode, tail()))
        with open(log, errors="replace") as f:
            found = re.search(r"Starting Spark master at (spark://[\w.-]+:\d+)", f.read())
        if found:
            return found.group(1)
        time.sleep(0.2)
    raise RuntimeError("the Spark master did not start within {} s:\n{}".format(timeout_s, tail()))
