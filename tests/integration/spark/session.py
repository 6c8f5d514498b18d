"""One SparkSession for a Spark test module: local Spark (or a ``spark://`` master), Python
workers that import a snapshot of kproto, the ``kproto`` source registered; stopped with its
JVM (a child process PySpark started) when the module ends."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from typing import Any, Iterator


def _stop_spark(session) -> None:
    """Stop the SparkContext, then the JVM PySpark launched (by its pid) and forget it."""
    from pyspark import SparkContext

    session.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except Exception:
                proc.kill()
                proc.wait(timeout=30)
        SparkContext._gateway = None
        SparkContext._jvm = None


def _snapshot_kproto(directory) -> str:
    """Copy the kproto package (its source as it is now) into ``directory``; returns the
    directory, for the Python workers' PYTHONPATH."""
    import kproto

    shutil.copytree(os.path.dirname(kproto.__file__), os.path.join(str(directory), "kproto"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return str(directory)


@contextlib.contextmanager
def spark_session(tmp_path_factory, master: str = "local[2]", **config: str) -> Iterator[Any]:
    """A SparkSession on ``master`` with the kproto source registered, ``config`` added
    (e.g. ``spark.jars``); stopped, with its JVM, on exit."""
    saved = {k: os.environ.get(k)
             for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP", "PYTHONPATH")}
    # Workers must run this interpreter, or they miss the venv's packages (kproto, pyarrow).
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # Spark binds nothing but loopback
    # Spark's Python workers (planning and tasks) are new processes that import kproto from
    # disk whenever one starts, long after this session imported it: a source file changed
    # meanwhile (an edit in a shared working tree) would run in the workers only, mixed
    # with older modules, and fail reads mid-module. They import a copy taken once, here
    # (PYTHONPATH comes before the venv's editable install); in an unchanged tree, as in
    # CI, the copy is the same code.
    snapshot = _snapshot_kproto(tmp_path_factory.mktemp("kproto-workers"))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (snapshot, saved["PYTHONPATH"]) if p)
    from pyspark.sql import SparkSession

    import kproto.spark

    # The JVM, and so every worker it starts, runs in the snapshot's directory: a worker's
    # sys.path starts with its working directory, which would otherwise be this tree.
    cwd = os.getcwd()
    os.chdir(snapshot)
    try:
        builder = (SparkSession.builder.master(master).appName("kproto-spark-tests")
                   .config("spark.ui.enabled", "false")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.driver.memory", "1g")
                   # Executors of a spark:// cluster start their workers from their own
                   # environment, not this one: they are told where the snapshot is.
                   .config("spark.executorEnv.PYTHONPATH", snapshot))
        for key, value in config.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
    finally:
        os.chdir(cwd)
    try:
        session.sparkContext.setLogLevel("ERROR")
        # Ready before the first test: this starts Spark's Python daemon and a worker (a
        # cold start on a busy machine is paid here, not inside a test), and checks that
        # the workers import the snapshot.
        where = session.sparkContext.parallelize([0], 1).map(lambda _: __import__("kproto").__file__).collect()
        assert where == [os.path.join(snapshot, "kproto", "__init__.py")], where
        kproto.spark.register(session)
        yield session
    finally:
        _stop_spark(session)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
