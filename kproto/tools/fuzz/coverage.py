"""The broker's code coverage as feedback: JaCoCo's agent in TCP-server mode, read here.

Owns the JaCoCo execution-data protocol, sans-IO (:func:`parse`: the header, session-info,
execution-data and command-ok blocks of ``org.jacoco.core.data.ExecutionDataWriter`` and
``org.jacoco.core.runtime.RemoteControlWriter``; probes as a compact boolean array:
a varint count, then bits, least significant first), the socket shell
(:class:`JacocoClient`: one connection, a dump command per read, never a reset) and
:class:`CoverageMap` (the probes seen so far per class, what a dump adds, and coverage per
Java package). Which requests become seeds is the runner's business.

The agent is started with the broker's JVM, e.g.
``-javaagent:org.jacoco.agent-runtime.jar=output=tcpserver,address=127.0.0.1,port=6300,
includes=kafka.*:org.apache.kafka.*`` (:func:`agent_option`). A class shows up once it has
been run at all; its probe count is then known, so "covered of probes" is over the
classes the broker has run.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from typing import Optional
from kproto.errors import CoverageError

BLOCK_HEADER = 0x01
BLOCK_SESSIONINFO = 0x10
BLOCK_EXECUTIONDATA = 0x11
BLOCK_CMDOK = 0x20
BLOCK_CMDDUMP = 0x40
MAGIC = 0xC0C0
FORMAT_VERSION = 0x1007  # JaCoCo 0.7.5 and later
HEADER = struct.pack(">BHH", BLOCK_HEADER, MAGIC, FORMAT_VERSION)

#: Packages whose code handles requests (the bench's measure of what feedback gains).
REQUEST_PACKAGES = ("kafka.server", "kafka.network", "kafka.coordinator",
                    "org.apache.kafka.coordinator", "org.apache.kafka.server",
                    "org.apache.kafka.common.requests", "org.apache.kafka.network",
                    "org.apache.kafka.storage", "org.apache.kafka.metadata")


@dataclass
class ClassProbes:
    class_id: int
    name: str          # JVM form: kafka/server/KafkaApis
    count: int         # probes in the class
    hits: int          # bit i set: probe i was run


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def need(self, n: int) -> None:
        if self.pos + n > len(self.data):
            raise IndexError

    def u8(self) -> int:
        self.need(1)
        self.pos += 1
        return self.data[self.pos - 1]

    def u16(self) -> int:
        self.need(2)
        self.pos += 2
        return int(struct.unpack_from(">H", self.data, self.pos - 2)[0])

    def i64(self) -> int:
        self.need(8)
        self.pos += 8
        return int(struct.unpack_from(">q", self.data, self.pos - 8)[0])

    def utf(self) -> str:
        n = self.u16()
        self.need(n)
        self.pos += n
        # Java's modified UTF-8; class names are plain here
        return self.data[self.pos - n:self.pos].decode("utf-8", "replace")

    def varint(self) -> int:
        value, shift = 0, 0
        while True:
            b = self.u8()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise CoverageError("varint too long")

    def booleans(self) -> tuple[int, int]:
        count = self.varint()
        nbytes = (count + 7) // 8
        self.need(nbytes)
        raw = self.data[self.pos:self.pos + nbytes]
        self.pos += nbytes
        # bit i of the array is bit (i % 8) of byte i // 8: little-endian bit order
        return count, int.from_bytes(raw, "little") & ((1 << count) - 1)


@dataclass
class Dump:
    classes: list[ClassProbes] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    complete: bool = False  # ended by the command-ok block


def parse(data: bytes) -> tuple[Dump, int]:
    """The blocks in ``data`` and how many bytes they used (a dump cut short is parsed up
    to its last whole block; ``complete`` once the command-ok block is read)."""
    r = _Reader(data)
    dump = Dump()
    used = 0
    try:
        while r.pos < len(data):
            block = r.u8()
            if block == BLOCK_HEADER:
                magic, version = r.u16(), r.u16()
                if magic != MAGIC:
                    raise CoverageError("not JaCoCo execution data (magic {:#x})".format(magic))
                if version != FORMAT_VERSION:
                    raise CoverageError("JaCoCo execution data version {:#x}, want {:#x}"
                                        .format(version, FORMAT_VERSION))
            elif block == BLOCK_SESSIONINFO:
                sid = r.utf()
                r.i64(), r.i64()
                dump.sessions.append(sid)
            elif block == BLOCK_EXECUTIONDATA:
                cid = r.i64()
                name = r.utf()
                count, hits = r.booleans()
                dump.classes.append(ClassProbes(cid, name, count, hits))
            elif block == BLOCK_CMDOK:
                used = r.pos
                dump.complete = True
                return dump, used
            else:
                raise CoverageError("unknown JaCoCo block type {:#x} at byte {}".format(
                    block, r.pos - 1))
            used = r.pos
    except IndexError:
        pass  # a block cut short: the rest comes later
    return dump, used


def agent_option(jar: str, port: int, includes: str = "kafka.*:org.apache.kafka.*") -> str:
    """The JVM option that starts JaCoCo's agent as a TCP server on 127.0.0.1:``port``."""
    return "-javaagent:{}=output=tcpserver,address=127.0.0.1,port={},includes={}".format(
        jar, port, includes)


class JacocoClient:
    """One connection to the agent; :meth:`dump` asks for everything run so far."""

    def __init__(self, host: str, port: int, timeout: float = 30.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._sock: Optional[socket.socket] = None
        self._buf = b""

    def _connect(self) -> socket.socket:
        s = socket.create_connection((self.host, self.port), timeout=self.timeout)
        s.sendall(HEADER)
        self._sock, self._buf = s, b""
        return s

    def dump(self, reset: bool = False) -> Dump:
        """Execution data of every class run so far, or (``reset``) since the last reset:
        the agent then clears its probes, and as it writes only classes with a probe hit,
        a dump holds only the classes run since the last one (smaller and quicker to read:
        the map merges either way). One reader per agent when resetting."""
        s = self._sock or self._connect()
        try:
            s.sendall(struct.pack(">B??", BLOCK_CMDDUMP, True, reset))
            merged = Dump()
            while True:
                dump, used = parse(self._buf)
                if dump.complete:
                    self._buf = self._buf[used:]
                    merged.classes += dump.classes
                    merged.sessions += dump.sessions
                    merged.complete = True
                    return merged
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise CoverageError("the JaCoCo agent closed the connection")
                self._buf += chunk
        except (OSError, CoverageError):
            self.close()
            raise

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None


def package_of(class_name: str) -> str:
    return class_name.rpartition("/")[0].replace("/", ".")


class CoverageMap:
    """Probes seen so far, per class (keyed by JaCoCo's class id and name: a class loaded
    again after a restart keeps its id when its bytes are the same)."""

    def __init__(self) -> None:
        self.classes: dict[tuple[int, str], ClassProbes] = {}

    def update(self, dump: Dump) -> int:
        """Merge a dump; how many probes it adds."""
        return sum(self.update_by_package(dump).values())

    def update_by_package(self, dump: Dump) -> dict[str, int]:
        """Merge a dump; the probes it adds, per package."""
        added: dict[str, int] = {}
        for name, n in self.update_by_class(dump).items():
            package = package_of(name)
            added[package] = added.get(package, 0) + n
        return added

    def update_by_class(self, dump: Dump) -> dict[str, int]:
        """Merge a dump; the probes it adds, per class (JVM name)."""
        added: dict[str, int] = {}
        for c in dump.classes:
            key = (c.class_id, c.name)
            known = self.classes.get(key)
            if known is None:
                self.classes[key] = ClassProbes(c.class_id, c.name, c.count, c.hits)
                new = c.hits
            else:
                new = c.hits & ~known.hits
                known.hits |= new
            if new:
                added[c.name] = added.get(c.name, 0) + new.bit_count()
        return added

    @property
    def covered(self) -> int:
        return sum(c.hits.bit_count() for c in self.classes.values())

    @property
    def probes(self) -> int:
        return sum(c.count for c in self.classes.values())

    def per_package(self) -> dict[str, tuple[int, int]]:
        """package -> (covered probes, probes of its classes that ran)."""
        out: dict[str, list[int]] = {}
        for c in self.classes.values():
            row = out.setdefault(package_of(c.name), [0, 0])
            row[0] += c.hits.bit_count()
            row[1] += c.count
        return {k: (v[0], v[1]) for k, v in sorted(out.items())}

    def request_handling(self) -> int:
        """Covered probes of :data:`REQUEST_PACKAGES` (and their subpackages)."""
        return sum(c.hits.bit_count() for c in self.classes.values()
                   if handles_requests(package_of(c.name)))


def handles_requests(package: str) -> bool:
    return any(package == p or package.startswith(p + ".") for p in REQUEST_PACKAGES)


__all__ = ["parse", "Dump", "ClassProbes", "JacocoClient", "CoverageMap", "CoverageError",
           "agent_option", "package_of", "handles_requests", "REQUEST_PACKAGES", "HEADER"]
