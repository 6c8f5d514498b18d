"""The Java consumer of Kafka 4.4 as a peer in the tests: ``tests/ground/peer/JavaPeer.java``.

Owns :func:`compile_peer` (``javac`` against the test ground's classpath,
:func:`tests.brokers.maven.classpath`, into ``tests/ground/target/peer/``, git-ignored;
compiled again only when the source's hash changed), :class:`JavaPeerProgram` (what the
session fixture ``java_peer`` gives: ``start(mode, ...)`` runs one peer) and
:class:`JavaPeer`, one peer process: a member of a classic group (``mode="classic"``,
``assignor`` range or cooperative-sticky), of a KIP-848 group (``"consumer"``, the server
assignor ``uniform`` or ``range``), of a share group (``"share"``, Java's
``KafkaShareConsumer``, ``ack`` implicit or explicit), or an assign-mode reader
(``"assign"``: given partitions from the beginning to their end offsets, then ``done``
with count, bytes, checksum and timings, the JVM's start-up reported apart as ``jvm_ms``).

A :class:`JavaPeer` is a thread reading the peer's JSON lines (see the Java source's
comment for every event) and offers the views of the librdkafka and kproto group members
of ``tests/integration/groups`` (``member_name``, ``stop()`` and those of
:class:`~tests.support.member_views.MemberViews`), so a test can mix member kinds. Times are the
peer's ``System.nanoTime()``, CLOCK_MONOTONIC like :func:`time.monotonic_ns` here. An
``error`` event from the peer, or its death while not asked to stop, fails the views at
once (with the end of its stderr). :meth:`JavaPeer.stop` sends ``close`` on stdin (the
consumer leaves the group cleanly) and waits for the exit; :meth:`JavaPeer.kill` kills the
pid (a crash: the broker notices at the session timeout).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any, Callable, Optional

from kproto.structs import TopicPartition
from tests.brokers import maven
from tests.support.member_views import CallbackEvent, MemberViews

SOURCE = os.path.join(maven.GROUND, "peer", "JavaPeer.java")
CLASSES = os.path.join(maven.TARGET, "peer", "classes")
_STAMP = os.path.join(maven.TARGET, "peer", "source.sha256")
_LOG4J2 = os.path.join(maven.TARGET, "peer", "log4j2.properties")
_lock = threading.Lock()

#: A peer's JVM: small, and quick to start (C1 only), since several run beside a broker.
JVM_OPTS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true")

# The client logs through SLF4J to Log4j 2, whose default would print errors on stdout
# (the JSON channel): warnings go to stderr, which the wrapper keeps in a file.
_LOG4J2_TEXT = """\
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""


class PeerError(AssertionError):
    """The Java peer reported an error, or died while nobody asked it to stop."""


def unavailable_reason() -> Optional[str]:
    """None when the peer can be built here (mvn, java and javac); otherwise why not."""
    reason = maven.unavailable_reason()
    if reason is not None:
        return reason
    try:
        maven.javac()
    except maven.MavenUnavailable as exc:
        return str(exc)
    return None


def compile_peer() -> str:
    """Compile the peer if its source changed since the last build; the class directory."""
    with _lock:
        with open(SOURCE, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        try:
            with open(_STAMP) as f:
                if f.read().strip() == digest and os.path.exists(
                        os.path.join(CLASSES, "JavaPeer.class")):
                    return CLASSES
        except OSError:
            pass
        os.makedirs(CLASSES, exist_ok=True)
        done = subprocess.run(
            [maven.javac(), "-nowarn", "-cp", maven.classpath(), "-d", CLASSES, SOURCE],
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        if done.returncode:
            raise maven.MavenUnavailable("javac failed on {} (exit {}):\n{}{}".format(
                SOURCE, done.returncode, done.stdout[-3000:], done.stderr[-3000:]))
        with open(_LOG4J2, "w") as f:
            f.write(_LOG4J2_TEXT)
        with open(_STAMP, "w") as f:
            f.write(digest)
        return CLASSES


class JavaPeerProgram:
    """The compiled peer (the ``java_peer`` session fixture): :meth:`start` runs one; every
    peer still running at :meth:`close` is killed."""

    def __init__(self) -> None:
        self.classes = compile_peer()
        self.classpath = CLASSES + os.pathsep + maven.classpath()
        self.peers: list[JavaPeer] = []

    def start(self, mode: str, bootstrap: str, group: Optional[str] = None,
              topics: Any = (), name: str = "java", **options: Any) -> "JavaPeer":
        """Start a peer and its reader thread; returns at once (``wait_started()`` waits
        for the JVM). ``options`` become ``--option value`` (underscores as dashes: e.g.
        ``client_id``, ``assignor``, ``session_timeout_ms``, ``heartbeat_interval_ms``,
        ``max_records``, ``commit`` sync|async|auto|none, ``ack``, ``ack_type``,
        ``partitions`` [(topic, partition)], ``report_records``, ``instance_id``);
        ``properties={...}`` passes client settings as they are."""
        peer = JavaPeer(self, mode, bootstrap, group, topics, name, options)
        self.peers.append(peer)
        peer.start()
        return peer

    def close(self) -> None:
        for peer in self.peers:
            peer.kill()


def _tp_set(items: Any) -> frozenset:
    return frozenset(TopicPartition(t, p) for t, p in items)


class JavaPeer(MemberViews):
    """One peer process and the thread reading its JSON lines (see the module docstring)."""

    def __init__(self, program: JavaPeerProgram, mode: str, bootstrap: str,
                 group: Optional[str], topics: Any, name: str, options: dict) -> None:
        super().__init__(name="java-peer-" + name, daemon=True)
        self.member_name = name
        self.mode = mode
        argv = [maven.java(), *JVM_OPTS, "-Dlog4j2.configurationFile=" + _LOG4J2,
                "-cp", program.classpath, "JavaPeer", "--mode", mode, "--bootstrap", bootstrap,
                "--client-id", str(options.pop("client_id", name))]
        if group is not None:
            argv += ["--group", group]
        if isinstance(topics, str):
            topics = [topics]
        if topics:
            argv += ["--topics", ",".join(topics)]
        for key, value in (options.pop("properties", None) or {}).items():
            argv += ["--property", "{}={}".format(key, value)]
        partitions = options.pop("partitions", None)
        if partitions:
            argv += ["--partitions", ",".join("{}:{}".format(t, p) for t, p in partitions)]
        for key, value in options.items():
            argv += ["--" + key.replace("_", "-"), str(value).lower() if isinstance(value, bool) else str(value)]
        self.argv = argv
        self.lock = threading.Lock()
        self.lines: list[dict] = []  # every event, as parsed
        self.processed: list[tuple[str, int, int]] = []  # (topic, partition, offset)
        self.records: list[dict] = []  # the record events (hashes, delivery_count)
        self.ownership: list[tuple[int, frozenset]] = []  # (generation, assignment) on change
        self.events: list[tuple[str, int, frozenset, int]] = []  # (callback, generation, parts, ns)
        self.commits: list[tuple[int, str, int, int]] = []  # (ns, topic, partition, offset)
        self.acks_committed: list[tuple[str, int, int, Optional[str]]] = []  # share: offset, error
        self.member_id: Optional[str] = None
        self.started_event: Optional[dict] = None
        self.done: Optional[dict] = None  # assign mode's result
        self.ended_ns: Optional[int] = None  # when the process was seen gone (killed/closed)
        self._stopping = False
        self._stderr = tempfile.NamedTemporaryFile(prefix="kproto-java-peer-", suffix=".err")
        self.process: Optional[subprocess.Popen] = None

    # --- the process ---------------------------------------------------------------------

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            start_new_session=True)
        super().start()

    def work(self) -> None:
        process = self.process
        assert process is not None and process.stdout is not None
        for raw in process.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue  # not a peer event (a JVM warning on stdout)
            self._take(event)
        status = process.wait()
        if self.ended_ns is None:
            self.ended_ns = time.monotonic_ns()
        if not self._stopping and self.done is None and self.error is None:
            raise PeerError("java peer {} exited ({}) unasked:\n{}".format(
                self.member_name, status, self.stderr_tail()))

    def _take(self, event: dict) -> None:
        kind = event["event"]
        with self.lock:
            self.lines.append(event)
            if kind == "record":
                self.records.append(event)
                self.processed.append((event["topic"], event["partition"], event["offset"]))
            elif kind == "assignment":
                self.ownership.append((event["generation"], _tp_set(event["partitions"])))
            elif kind in ("assigned", "revoked", "lost"):
                self.events.append((kind, event["generation"], _tp_set(event["partitions"]),
                                    event["mono_ns"]))
            elif kind == "commit":
                self.commits.extend((event["mono_ns"], t, p, o) for t, p, o in event["offsets"])
            elif kind == "ack_committed":
                self.acks_committed.extend((t, p, o, event["error"]) for t, p, offsets in event["offsets"]
                                           for o in offsets)
            elif kind == "member":
                self.member_id = event["member_id"]
            elif kind == "started":
                self.started_event = event
            elif kind == "done":
                self.done = event
            elif kind == "closed":
                self.ended_ns = event["mono_ns"]
        if kind == "error" and self.error is None:
            self.error = PeerError("java peer {}: {}\n{}".format(
                self.member_name, event["error"], self.stderr_tail()))

    def send(self, command: str) -> None:
        """One command on the peer's stdin (``close``, ``halt``, ``commit``)."""
        process = self.process
        assert process is not None and process.stdin is not None
        try:
            process.stdin.write(command.encode() + b"\n")
            process.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # already gone: the reader thread says why

    def stop(self, close: bool = True, timeout_s: float = 60.0) -> None:
        """``close``: leave cleanly (the consumer's close()) and wait for the exit; else kill."""
        if not close:
            self.kill()
            self.join(timeout_s)
            return
        self._stopping = True
        self.send("close")
        process = self.process
        assert process is not None
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise PeerError("java peer {} did not close within {} s:\n{}".format(
                self.member_name, timeout_s, self.stderr_tail()))
        self.join(timeout_s)  # re-raises what the reader saw (an error event)

    def kill(self) -> None:
        """SIGKILL the peer's pid (a crash: no LeaveGroup, nothing released)."""
        self._stopping = True
        process = self.process
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
        self.ended_ns = time.monotonic_ns()
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass

    def stderr_tail(self, chars: int = 3000) -> str:
        try:
            with open(self._stderr.name, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - chars))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    # --- views (those of the group members in tests/integration/groups) ------------------

    def wait_for(self, condition: Callable[["JavaPeer"], Any], what: str, limit_s: float = 60.0) -> Any:
        """Wait until ``condition(self)`` holds; fail naming ``what`` (or at once if the peer
        failed)."""
        end = time.monotonic() + limit_s
        while True:
            self.raise_if_failed()
            value = condition(self)
            if value:
                return value
            if not self.is_alive() and self.error is None:
                raise PeerError("java peer {} ended while waiting for {}".format(self.member_name, what))
            if time.monotonic() > end:
                raise AssertionError("timed out waiting for java peer {}: {}".format(self.member_name, what))
            time.sleep(0.05)

    def wait_started(self, limit_s: float = 60.0) -> dict:
        return self.wait_for(lambda p: p.started_event, "its JVM to start", limit_s)

    def wait_done(self, limit_s: float = 300.0) -> dict:
        """Assign mode: the ``done`` event (records, bytes, checksum, jvm/setup/read times)."""
        return self.wait_for(lambda p: p.done, "the end of its read", limit_s)

    def callback_events(self) -> list[CallbackEvent]:
        # ``until`` of an interval still open is the process's end (None while running).
        return [(kind, parts, ns) for kind, _g, parts, ns in self.events]
