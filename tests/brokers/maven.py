"""The test ground's Java side: Apache Kafka 4.4 and its Java client, resolved by Maven.

Owns :func:`classpath` (the jars of ``tests/ground/pom.xml``, resolved once by ``mvn
dependency:build-classpath``: Maven's local repository is the cache, and the resolved
classpath is kept under ``tests/ground/target/`` next to a hash of the pom, so a later run
reads it back in milliseconds) and :class:`KafkaNode`, one KRaft process of Kafka 4.4
started as ``java -cp ... kafka.Kafka`` after ``kafka.tools.StorageTool format`` (Kafka's
own main classes, no distribution scripts), on loopback ports, in a temporary directory,
logging through Log4j 2 to a file a failing test can print the tail of, and stopped by
pid.

Nothing here names a registry: ``mvn`` resolves from whatever its settings say.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid

log = logging.getLogger("kproto.tests.brokers")

GROUND = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ground")
POM = os.path.join(GROUND, "pom.xml")
TARGET = os.path.join(GROUND, "target")
_lock = threading.Lock()

#: JVM options of every node: a small heap (a 2-core, shared machine runs up to four), and a
#: fast start (no tiered compilation beyond C1 would save CPU, but slows Fetch-heavy tests).
HEAP_OPTS = ("-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-Djava.awt.headless=true")


class MavenUnavailable(RuntimeError):
    """No ``mvn`` or ``java`` here, or Maven could not resolve the test ground."""


def java() -> str:
    """The ``java`` to run (``$JAVA_HOME/bin/java`` when set, else the PATH's)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise MavenUnavailable("no java on the PATH (the test ground needs Java 17+)")
    return found


def javac() -> str:
    """The ``javac`` beside :func:`java` (the Java peer is compiled by the tests)."""
    candidate = os.path.join(os.path.dirname(os.path.realpath(java())), "javac")
    if os.path.exists(candidate):
        return candidate
    found = shutil.which("javac")
    if found is None:
        raise MavenUnavailable("no javac (a JDK, not only a JRE, is needed for the Java peer)")
    return found


def unavailable_reason() -> str | None:
    """None when ``mvn`` and ``java`` are both here; otherwise what is missing."""
    if shutil.which("mvn") is None:
        return "no mvn on the PATH (the test ground resolves Kafka 4.4 with Maven)"
    try:
        java()
    except MavenUnavailable as exc:
        return str(exc)
    return None


#: Spark's own Kafka source, for the differential tests (its version: the PySpark one).
SPARK_POM = os.path.join(GROUND, "spark", "pom.xml")


def _stamp(pom: str, properties: dict[str, str]) -> str:
    with open(pom, "rb") as f:
        digest = hashlib.sha256(f.read())
    for key, value in sorted(properties.items()):
        digest.update("\0{}={}".format(key, value).encode())
    return digest.hexdigest()


def classpath(timeout_s: float = 900.0, pom: str = POM, properties: dict[str, str] | None = None) -> str:
    """The jars of ``pom`` (by default the test ground's: Kafka 4.4 broker and client, Log4j 2
    binding), ``properties`` set as ``-Dname=value``.

    The first call on a machine resolves the jars with Maven (a minute or two with a cold
    local repository); later calls read the kept file while the pom and properties are
    unchanged. Each pom keeps its own file under ``tests/ground/target/``.
    """
    properties = dict(properties or {})
    name = "classpath" if pom == POM else "classpath-" + os.path.basename(os.path.dirname(pom))
    classpath_file = os.path.join(TARGET, name + ".txt")
    stamp_file = os.path.join(TARGET, name + ".sha256")
    with _lock:
        digest = _stamp(pom, properties)
        try:
            with open(stamp_file) as f:
                fresh = f.read().strip() == digest
            if fresh:
                with open(classpath_file) as f:
                    return f.read().strip()
        except OSError:
            pass
        reason = unavailable_reason()
        if reason is not None:
            raise MavenUnavailable(reason)
        os.makedirs(TARGET, exist_ok=True)
        done = subprocess.run(
            ["mvn", "-q", "-B", "-f", pom, "dependency:build-classpath",
             "-Dmdep.outputFile=" + classpath_file,
             *("-D{}={}".format(k, v) for k, v in sorted(properties.items()))],
            capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        if done.returncode:
            raise MavenUnavailable("mvn could not resolve {} {}(exit {}):\n{}{}".format(
                pom, properties or "", done.returncode, done.stdout[-3000:], done.stderr[-3000:]))
        with open(stamp_file, "w") as f:
            f.write(digest)
        with open(classpath_file) as f:
            return f.read().strip()


def spark_kafka_jars(spark_version: str, spark_jars_dir: str) -> list[str]:
    """The jars Spark's own Kafka source (``format("kafka")``) adds to a PySpark install:
    ``spark-sql-kafka-0-10`` of ``spark_version`` and what it needs that
    ``spark_jars_dir`` (PySpark's ``jars/``) lacks, by artifact name (Spark, Scala and
    Hadoop come from the install, in its versions). Local paths, for ``spark.jars``."""
    shipped = {_artifact(name) for name in os.listdir(spark_jars_dir)}
    jars = classpath(pom=SPARK_POM, properties={"spark.version": spark_version}).split(os.pathsep)
    return [jar for jar in jars if _artifact(os.path.basename(jar)) not in shipped]


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients`` (the name before the version)."""
    stem = jar_name[:-4] if jar_name.endswith(".jar") else jar_name
    parts = stem.split("-")
    for i, part in enumerate(parts):
        if i and part[:1].isdigit():
            return "-".join(parts[:i])
    return stem


def jacoco_agent() -> str:
    """The JaCoCo runtime agent jar the test ground resolved (for ``-javaagent``)."""
    for jar in classpath().split(os.pathsep):
        if "org.jacoco.agent" in os.path.basename(jar) and jar.endswith("-runtime.jar"):
            return jar
    raise MavenUnavailable("no JaCoCo agent in the test ground's classpath")


def random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding (what
    ``StorageTool random-uuid`` prints), made here to save a JVM start. Never one that
    starts with "-", as Kafka's ``Uuid.randomUuid``: StorageTool's argument parser takes
    ``-t -abc...`` for an option (1 start in 64 failed so)."""
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class KafkaNode:
    """One Kafka 4.4 KRaft process from the test ground's classpath.

    ``settings`` is its whole ``server.properties``; ``directory`` holds it, the data
    (``data/``), ``server.log`` (Log4j 2) and ``server.out`` (the JVM's own output).
    :meth:`start` formats the storage once, then runs ``kafka.Kafka`` in a session of its
    own; :meth:`stop` signals that pid (SIGKILL with ``kill=True``: a crash, for the tests
    that kill a broker mid-read); :meth:`start` again brings the same node back on the same
    ports and data.
    """

    def __init__(self, directory: str, settings: dict[str, str], cluster_id: str,
                 format_args: tuple[str, ...] = ()) -> None:
        self.directory = directory
        self.settings = dict(settings, **{"log.dirs": os.path.join(directory, "data")})
        self.cluster_id = cluster_id
        self.format_args = format_args
        self.process: subprocess.Popen | None = None
        self._output = None
        self._formatted = False
        os.makedirs(directory, exist_ok=True)
        self.config_path = os.path.join(directory, "server.properties")
        self.log_path = os.path.join(directory, "server.log")
        with open(self.config_path, "w") as f:
            f.writelines("{}={}\n".format(k, v) for k, v in self.settings.items())
        self._log4j = os.path.join(directory, "log4j2.properties")
        with open(self._log4j, "w") as f:
            f.write(_LOG4J2.format(log=self.log_path))

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _java(self, main: str, *args: str, extra_jvm: tuple[str, ...] = ()) -> list[str]:
        return [java(), *HEAP_OPTS, *extra_jvm,
                "-Dlog4j2.configurationFile=" + self._log4j, "-cp", classpath(), main, *args]

    def format(self) -> None:
        argv = self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                          "-c", self.config_path, *self.format_args)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)
        if done.returncode:
            raise RuntimeError("kafka StorageTool format failed ({}):\n{}{}".format(
                done.returncode, done.stdout[-2000:], done.stderr[-2000:]))
        self._formatted = True

    def start(self, extra_jvm: tuple[str, ...] = ()) -> None:
        """Start the process (formatting the storage the first time); returns at once."""
        if self.alive():
            return
        if not self._formatted:
            self.format()
        if self._output is not None:
            self._output.close()
        self._output = open(os.path.join(self.directory, "server.out"), "ab")
        self.process = subprocess.Popen(
            self._java("kafka.Kafka", self.config_path, extra_jvm=extra_jvm),
            stdout=self._output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        log.info("kafka node %s pid %s started in %s", self.settings.get("node.id"),
                 self.process.pid, self.directory)

    def stop(self, kill: bool = False, timeout: float = 30.0) -> None:
        """Stop the process: SIGTERM (a controlled shutdown) or SIGKILL; SIGKILL anyway
        after ``timeout``."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout)
        self.process = None

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the broker's own log and of the JVM's output (for failure messages)."""
        parts = []
        for name in ("server.log", "server.out"):
            try:
                with open(os.path.join(self.directory, name), "rb") as f:
                    f.seek(0, os.SEEK_END)
                    f.seek(max(0, f.tell() - chars))
                    parts.append("--- {} ---\n{}".format(name, f.read().decode(errors="replace")))
            except OSError:
                pass
        return "\n".join(parts)

    def close(self) -> None:
        self.stop()
        if self._output is not None:
            self._output.close()
            self._output = None


def new_directory(prefix: str) -> str:
    return tempfile.mkdtemp(prefix=prefix)
