"""JaCoCo's execution-data protocol, sans-IO: blocks built here byte by byte as the
agent writes them (``ExecutionDataWriter``: big-endian, Java's writeUTF, probes as a
varint count and bits least significant first), parsed back; the map's arithmetic.
The agent itself is read in tests/integration/fuzz/test_kafka.py.
"""

import struct

import pytest

from kproto.errors import CoverageError
from kproto.tools.fuzz.coverage import HEADER, ClassProbes, CoverageMap, Dump, handles_requests, package_of, parse


def _utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def _varint(n: int) -> bytes:
    out = b""
    while True:
        if n < 0x80:
            return out + bytes([n])
        out += bytes([0x80 | (n & 0x7F)])
        n >>= 7


def _probes(bits: list[bool]) -> bytes:
    packed = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            packed[i // 8] |= 1 << (i % 8)
    return _varint(len(bits)) + bytes(packed)


def _class(cid: int, name: str, bits: list[bool]) -> bytes:
    return b"\x11" + struct.pack(">q", cid) + _utf(name) + _probes(bits)


SESSION = b"\x10" + _utf("host-1234") + struct.pack(">qq", 1, 2)


def test_a_dump_is_parsed_to_its_command_ok():
    bits = [i % 3 == 0 for i in range(200)]  # 200 probes: a two-byte varint count
    data = (HEADER + SESSION + _class(-7, "kafka/server/KafkaApis", bits)
            + _class(9, "org/apache/kafka/coordinator/group/GroupMetadataManager",
                     [False, True]) + b"\x20" + b"leftover")
    dump, used = parse(data)
    assert dump.complete and data[used:] == b"leftover"
    assert dump.sessions == ["host-1234"]
    apis, group = dump.classes
    assert (apis.class_id, apis.name, apis.count) == (-7, "kafka/server/KafkaApis", 200)
    assert [bool(apis.hits >> i & 1) for i in range(200)] == bits
    assert group.hits == 0b10 and group.count == 2


def test_a_dump_cut_short_waits_for_the_rest():
    data = HEADER + SESSION + _class(1, "kafka/server/A", [True] * 9) + b"\x20"
    for cut in range(len(data)):
        dump, used = parse(data[:cut])
        assert not dump.complete and used <= cut
    dump, _ = parse(data)
    assert dump.complete and dump.classes[0].hits == 0x1FF


def test_what_is_not_jacoco_data_is_refused():
    with pytest.raises(CoverageError, match="magic"):
        parse(b"\x01\x12\x34\x10\x07")
    with pytest.raises(CoverageError, match="version"):
        parse(b"\x01\xc0\xc0\x10\x06")
    with pytest.raises(CoverageError, match="unknown JaCoCo block"):
        parse(HEADER + b"\x33")


def test_the_map_counts_only_new_probes_and_sums_per_package():
    cmap = CoverageMap()
    first = Dump([ClassProbes(1, "kafka/server/KafkaApis", 8, 0b0000_0011),
                  ClassProbes(2, "kafka/server/ReplicaManager", 4, 0b0001)])
    assert cmap.update(first) == 3
    assert cmap.update(first) == 0
    later = Dump([ClassProbes(1, "kafka/server/KafkaApis", 8, 0b1000_0011),
                  ClassProbes(3, "org/apache/kafka/common/message/FetchRequestData", 5, 0b1)])
    assert cmap.update(later) == 2
    assert (cmap.covered, cmap.probes) == (5, 17)
    assert cmap.per_package() == {"kafka.server": (4, 12),
                                  "org.apache.kafka.common.message": (1, 5)}
    assert cmap.request_handling() == 4  # generated message classes are not handlers
    assert package_of("kafka/server/KafkaApis$") == "kafka.server"
    more = Dump([ClassProbes(1, "kafka/server/KafkaApis", 8, 0b1100_0011),
                 ClassProbes(4, "org/apache/kafka/raft/KafkaRaftClient", 3, 0b11)])
    assert cmap.update_by_package(more) == {"kafka.server": 1, "org.apache.kafka.raft": 2}
    assert handles_requests("kafka.server") and handles_requests(
        "org.apache.kafka.coordinator.group") and not handles_requests("org.apache.kafka.raft")
