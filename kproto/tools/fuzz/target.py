"""The socket shell around the fuzzer: connections to one broker, one exchange at a time.

Owns the sockets (a bounded number open at once), sending exact bytes and reading one
size-prefixed answer with a time bound, the liveness probe (a fresh connection answering
ApiVersions), valid helper calls (ApiVersions, Metadata, a high-watermark Fetch) and the
broker's RSS from /proc when its pid is known. Verdicts are not made here (see
:mod:`kproto.tools.fuzz.oracles`).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any, Optional

from kproto.errors import FuzzTargetError, KafkaError
from kproto.tools.fuzz import schema
from kproto.tools.fuzz.mutators import Case, make_case
from kproto.tools.fuzz.oracles import (ANSWER, CLOSED, NOT_EXPECTED, TIMEOUT, Exchange, decode_answer, no_answer_expected)
from kproto.protocol.headers import decode_response_header
from kproto.messages import ApiVersionsRequest, FetchRequest, MetadataRequest

MAX_ANSWER = 64 << 20
_I32 = struct.Struct(">i")


class Target:
    """One broker. ``exchange`` uses a kept connection, reopened after it closes."""

    def __init__(self, host: str, port: int, *, timeout: float = 6.0,
                 max_connections: int = 4, broker_pid: Optional[int] = None) -> None:
        self.host, self.port = host, port
        self.timeout = timeout
        self.max_connections = max_connections
        self.broker_pid = broker_pid
        self.connections_opened = 0
        self._open = 0
        self._conn: Optional[socket.socket] = None
        self._cid = 0
        self.api_versions: dict[int, tuple[int, int]] = {}

    # --- sockets -------------------------------------------------------------------

    def connect(self, timeout: Optional[float] = None) -> socket.socket:
        if self._open >= self.max_connections:
            raise FuzzTargetError("more than {} connections open".format(self.max_connections))
        s = socket.create_connection((self.host, self.port), timeout=timeout or self.timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections_opened += 1
        self._open += 1
        return s

    def release(self, s: Optional[socket.socket]) -> None:
        if s is None:
            return
        try:
            s.close()
        finally:
            self._open -= 1

    def drop_main(self) -> None:
        conn, self._conn = self._conn, None
        self.release(conn)

    def main(self) -> socket.socket:
        if self._conn is None:
            self._conn = self.connect()
        return self._conn

    def next_correlation_id(self) -> int:
        self._cid = (self._cid + 1) & 0x3FFFFFFF
        return self._cid

    def close(self) -> None:
        self.drop_main()

    # --- one exchange ----------------------------------------------------------------

    @staticmethod
    def read_frame(s: socket.socket, timeout: float) -> tuple[str, Optional[bytes]]:
        deadline = time.monotonic() + timeout
        buf = bytearray()
        need = 4
        size = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return TIMEOUT, None
            s.settimeout(left)
            try:
                chunk = s.recv(min(need - len(buf), 1 << 20))
            except socket.timeout:
                return TIMEOUT, None
            except OSError:
                return CLOSED, None
            if not chunk:
                return CLOSED, None
            buf += chunk
            if len(buf) < need:
                continue
            if size is None:
                size = _I32.unpack_from(buf)[0]
                if not 0 <= size <= MAX_ANSWER:
                    return CLOSED, None
                need, buf = size, bytearray()
                if size == 0:
                    return ANSWER, b""
                continue
            return ANSWER, bytes(buf)

    def exchange(self, wire: bytes, *, valid: bool, expects_answer: bool = True,
                 timeout: Optional[float] = None, own_connection: bool = False,
                 request: Any = None, strategy: str = "valid") -> Exchange:
        """Send ``wire``; wait for one answer (or, when none is expected, briefly for a
        close). The kept connection is dropped after a close, a timeout or when the
        connection state is no longer known."""
        bound = timeout if timeout is not None else (self.timeout if valid else
                                                      min(self.timeout, 2.0))
        start = time.monotonic()
        s = self.connect() if own_connection or not expects_answer else self.main()
        try:
            s.sendall(wire)
        except OSError:
            outcome, answer = CLOSED, None
        else:
            outcome, answer = self.read_frame(s, bound if expects_answer else 0.3)
            if not expects_answer and outcome == TIMEOUT:
                outcome = NOT_EXPECTED
        if own_connection or not expects_answer:
            self.release(s)
        elif outcome != ANSWER:
            self.drop_main()
        return Exchange(wire, valid, outcome, answer, request, strategy,
                        time.monotonic() - start)

    def send_case(self, case: Case, **kw: Any) -> Exchange:
        if no_answer_expected(case.spec.api_key, case.request):
            kw["expects_answer"] = False
        return self.exchange(case.wire, valid=True, request=case.request, **kw)

    def call(self, request: Any, version: int, **kw: Any) -> tuple[Exchange, Any]:
        """A valid request on the kept connection; the exchange and its decoded answer
        (:func:`answer_of`)."""
        spec = schema.api(request.api_key)
        ex = self.send_case(make_case(spec, version, request, self.next_correlation_id()),
                            **kw)
        return ex, answer_of(ex)

    # --- probes and facts ----------------------------------------------------------

    def alive(self, attempts: int = 3, timeout: float = 3.0) -> tuple[bool, str]:
        """Whether a fresh connection gets an ApiVersions v0 answer (the liveness probe)."""
        detail = ""
        for _ in range(attempts):
            s = None
            try:
                s = socket.create_connection((self.host, self.port), timeout=timeout)
                self.connections_opened += 1
                frame = struct.pack(">hhih", 18, 0, 0x7AFE, -1)
                s.sendall(_I32.pack(len(frame)) + frame)
                outcome, answer = self.read_frame(s, timeout)
                if outcome == ANSWER and answer is not None and answer[:4] == b"\x00\x00\x7a\xfe":
                    return True, "answers"
                detail = outcome
            except OSError as exc:
                detail = str(exc) or type(exc).__name__
            finally:
                if s is not None:
                    s.close()
            time.sleep(0.2)
        return False, detail

    def fetch_api_versions(self) -> dict[int, tuple[int, int]]:
        last: Optional[Exception] = None
        for version in (3, 0):
            try:
                ex, answer = self.call(ApiVersionsRequest(
                    client_software_name="kproto-fuzz", client_software_version="1"), version)
            except (OSError, FuzzTargetError) as exc:
                raise FuzzTargetError("cannot reach {}:{}: {}".format(self.host, self.port,
                                                                   exc)) from None
            if answer is not None and answer.error_code == 0:
                self.api_versions = {a.api_key: (a.min_version, a.max_version)
                                     for a in answer.api_keys}
                return self.api_versions
            last = FuzzTargetError("ApiVersions v{}: {}".format(version, ex.outcome if answer is None
                                                           else answer.error_code))
        raise FuzzTargetError("{}:{} answers no usable ApiVersions ({})".format(
            self.host, self.port, last))

    def version_for(self, key: int, highest: Optional[int] = None) -> Optional[int]:
        """The highest version both the broker and kproto know (capped at ``highest``)."""
        if key not in self.api_versions or key not in schema.apis():
            return None
        lo, hi = self.api_versions[key]
        spec = schema.api(key)
        top = min(hi, spec.max_version, highest if highest is not None else hi)
        return top if top >= max(lo, spec.min_version) else None

    def metadata(self, topics: Optional[list[str]] = None) -> Any:
        version = self.version_for(3, 12)
        if version is None:
            return None
        req = MetadataRequest(topics=None if topics is None else [
            MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
        if version < 1 and topics is None:
            req.topics = []
        if version >= 4:
            req.allow_auto_topic_creation = False
        return self.call(req, version)[1]

    def high_watermark(self, topic: str, partition: int) -> Optional[int]:
        """The partition's high watermark by one Fetch (names: version <= 12) on a fresh
        connection; None when the broker does not answer one cleanly."""
        version = self.version_for(1, 12)
        if version is None:
            return None
        # min_bytes 1 and room for a batch: Tansu leaves out partitions of a Fetch that
        # asks for no bytes (itself a finding; the probe must not depend on it).
        req = FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
                           isolation_level=0, topics=[FetchRequest.FetchTopic(
                               topic=topic, partitions=[FetchRequest.FetchPartition(
                                   partition=partition, fetch_offset=0,
                                   partition_max_bytes=1 << 20)])])
        try:
            ex, answer = self.call(req, version)
        except (OSError, KafkaError, FuzzTargetError):
            return None
        if answer is None:
            return None
        for t in answer.responses:
            for p in t.partitions:
                if p.partition_index == partition and p.error_code == 0:
                    return p.high_watermark
        return None

    def rss_kb(self) -> Optional[int]:
        if self.broker_pid is None:
            return None
        try:
            with open("/proc/{}/status".format(self.broker_pid)) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def process_exists(self) -> Optional[bool]:
        if self.broker_pid is None:
            return None
        try:
            os.kill(self.broker_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def answer_of(ex: Exchange) -> Any:
    """The answer of a valid request's exchange, decoded leniently (trailing bytes allowed:
    the mock appends one to some flexible answers) so that learning and sequences go on;
    None when there is none or it is not the request's. The oracles judge the exchange
    strictly on their own."""
    answer, _ = decode_answer(ex)
    key, version = ex.api_key, ex.api_version
    if answer is None and ex.outcome == ANSWER and ex.response is not None and \
            key in schema.apis() and version is not None:
        spec = schema.api(key)
        try:
            cid, pos = decode_response_header(ex.response, spec.response_header_version(version))
            if cid == ex.correlation_id:
                answer = schema.response_class(spec).decode(
                    memoryview(ex.response)[pos:], version, allow_trailing=True)
        except KafkaError:
            pass
    return answer


def listening_pid(port: int) -> Optional[int]:
    """The process listening on TCP ``port`` on this machine (Linux /proc; one of this
    user's), or None: a broker restarted by --restart-cmd has a new pid."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    if len(cols) > 9 and cols[3] == "0A" and \
                            int(cols[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add("socket:[{}]".format(cols[9]))
        except OSError:
            continue
    if not inodes:
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir("/proc/{}/fd".format(pid))
            for fd in fds:
                if os.readlink("/proc/{}/fd/{}".format(pid, fd)) in inodes:
                    return int(pid)
        except OSError:
            continue
    return None


__all__ = ["Target", "answer_of", "listening_pid"]
