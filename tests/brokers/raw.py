"""Plain-socket requests to a test broker with kproto's generated messages.

Owns :func:`exchange` (send one size-prefixed frame, read one back),
:func:`response_body` / :func:`roundtrip` (encode a ``kproto.messages`` request with its
header; return the response body, or decode it), :class:`RawConnection` (several
requests over one socket), :func:`api_versions` /
:func:`negotiated_version` (what a broker advertises, the version both sides speak) and the
golden-data helpers :func:`fetch_partition` / :func:`fetch_partition_bytes` (one Fetch of
a partition from its leader, found through confluent-kafka's metadata so that these
helpers do not depend on kproto's own metadata code), :func:`fetch_log` (Fetches until
the log end) and :func:`settled_log_end` (the log end once no transaction is open). No
kproto.net: the smoke tests and golden-data scripts must work before (and independently
of) the network client.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any, NamedTuple

from tests.brokers._net import recv_exact

#: Responses bigger than this are refused (a test never fetches that much).
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class RawProtocolError(RuntimeError):
    """The broker closed the connection or sent a frame we cannot accept."""


def exchange(address: tuple[str, int], frame: bytes, timeout: float = 10.0) -> bytes:
    """Send ``frame`` (header + body, without the size prefix); return the response
    frame (without its size prefix)."""
    with socket.create_connection(address, timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        head = recv_exact(s, 4)
        if head is None:
            raise RawProtocolError("{}:{} closed the connection without answering".format(
                *address))
        (size,) = struct.unpack(">i", head)
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            raise RawProtocolError("response size {} out of range".format(size))
        data = recv_exact(s, size)
        if data is None:
            raise RawProtocolError("{}:{} closed the connection mid-response".format(*address))
        return data


def encode_frame(request: Any, version: int, correlation_id: int = 1,
                 client_id: str = "kproto-tests") -> bytes:
    """Request header (the version the API and version call for) + encoded body."""
    from kproto.protocol import headers

    hv = headers.request_header_version(request.api_key, version)
    return headers.encode_request_header(request.api_key, version, correlation_id,
                                         client_id, hv) + request.encode(version)


def response_body(address: tuple[str, int], request: Any, version: int, *,
                  correlation_id: int = 1, timeout: float = 10.0) -> memoryview:
    """Send ``request`` at ``version`` and return the response body (after the response
    header, whose correlation id is checked), undecoded."""
    from kproto.protocol import headers

    frame = exchange(address, encode_frame(request, version, correlation_id), timeout)
    hv = headers.response_header_version(request.api_key, version)
    got_id, pos = headers.decode_response_header(frame, hv)
    if got_id != correlation_id:
        raise RawProtocolError("correlation id {} != {}".format(got_id, correlation_id))
    return memoryview(frame)[pos:]


def roundtrip(address: tuple[str, int], request: Any, version: int, *,
              correlation_id: int = 1, timeout: float = 10.0,
              allow_trailing: bool = False) -> Any:
    """Send ``request`` at ``version`` and decode the response at the same version
    (strictly unless ``allow_trailing``: the mock appends a byte to some flexible
    responses)."""
    body = response_body(address, request, version, correlation_id=correlation_id,
                         timeout=timeout)
    return request.response_class.decode(body, version, allow_trailing=allow_trailing)


class RawConnection:
    """One plain socket for several requests in turn (a fetch session's requests come
    over one connection from real clients): ``request(message, version)`` returns the
    decoded response."""

    def __init__(self, address: tuple[str, int], timeout: float = 10.0) -> None:
        self.socket = socket.create_connection(address, timeout=timeout)
        self._correlation_id = 0

    def request(self, request: Any, version: int) -> Any:
        from kproto.protocol import headers

        self._correlation_id += 1
        frame = encode_frame(request, version, self._correlation_id)
        self.socket.sendall(struct.pack(">i", len(frame)) + frame)
        head = recv_exact(self.socket, 4)
        size = struct.unpack(">i", head)[0] if head is not None else -1
        data = recv_exact(self.socket, size) if 0 <= size <= MAX_RESPONSE_BYTES else None
        if data is None:
            raise RawProtocolError("the connection closed or sent size {}".format(size))
        got_id, pos = headers.decode_response_header(
            data, headers.response_header_version(request.api_key, version))
        if got_id != self._correlation_id:
            raise RawProtocolError("correlation id {} != {}".format(got_id, self._correlation_id))
        return request.response_class.decode(memoryview(data)[pos:], version)

    def close(self) -> None:
        self.socket.close()

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
def api_versions(address: tuple[str, int], timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """api_key -> (min_version, max_version) the broker at ``address`` advertises
    (ApiVersions v0: every broker answers it, in the v0 format even when it speaks more)."""
    from kproto.messages import ApiVersionsRequest

    response = roundtrip(address, ApiVersionsRequest(), 0, timeout=timeout)
    if response.error_code:
        raise RawProtocolError("ApiVersions error {}".format(response.error_code))
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def negotiated_version(address: tuple[str, int], request_class: Any, minimum: int = 0) -> int:
    """The highest version of ``request_class`` that both kproto and the broker speak and
    that is at least ``minimum``; :class:`RawProtocolError` if there is none."""
    advertised = api_versions(address).get(request_class.api_key)
    if advertised is None:
        raise RawProtocolError("{}:{} does not advertise {} (api key {})".format(
            *address, request_class.__name__, request_class.api_key))
    low = max(advertised[0], request_class.min_version, minimum)
    high = min(advertised[1], request_class.max_version)
    if low > high:
        raise RawProtocolError(
            "{}:{} speaks {} v{}-v{}, kproto v{}-v{}; at least v{} is needed".format(
                *address, request_class.__name__, advertised[0], advertised[1],
                request_class.min_version, request_class.max_version, minimum))
    return high


def partition_leader(bootstrap_servers: str, topic: str, partition: int,
                     timeout: float = 30.0) -> tuple[str, int]:
    """(host, port) of the partition's leader, from confluent-kafka's metadata; asked again
    (for up to ``timeout`` seconds) while the answer names no leader: between a leader's
    death and the election of the next (the three-node cluster), Kafka's Metadata says
    LEADER_NOT_AVAILABLE with leader -1."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "broker.address.family": "v4"})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None or partition not in t.partitions:
            raise RawProtocolError("no metadata for {}-{}: {}".format(
                topic, partition, t.error if t else "unknown topic"))
        leader = md.brokers.get(t.partitions[partition].leader)
        if leader is not None:
            return leader.host, leader.port
        if time.monotonic() > deadline:
            raise RawProtocolError("no leader for {}-{} after {:.0f}s: {}".format(
                topic, partition, timeout, t.partitions[partition].error))
        time.sleep(0.1)


def fetch_partition(bootstrap_servers: str, topic: str, partition: int, offset: int = 0, *,
                    version: int = 12, max_bytes: int = 8 * 1024 * 1024,
                    isolation_level: int = 0, max_wait_ms: int = 500) -> Any:
    """One Fetch (topic by name, so version <= 12) of a partition from its leader;
    returns the decoded partition entry of the response (error_code, high_watermark,
    last_stable_offset, aborted_transactions, records, ...)."""
    from kproto.messages import FetchRequest

    if version > 12:
        raise ValueError("Fetch v13+ names topics by id; use version <= 12")
    req = FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=partition, current_leader_epoch=-1,
                                        fetch_offset=offset, log_start_offset=-1,
                                        partition_max_bytes=max_bytes)])],
        forgotten_topics_data=[], rack_id="")
    resp = roundtrip(partition_leader(bootstrap_servers, topic, partition), req, version)
    if resp.error_code:
        raise RawProtocolError("Fetch error {}".format(resp.error_code))
    for t in resp.responses:
        for p in t.partitions:
            if p.partition_index == partition:
                return p
    raise RawProtocolError("Fetch response has no entry for {}-{}".format(topic, partition))


def fetch_partition_bytes(bootstrap_servers: str, topic: str, partition: int,
                          offset: int = 0, **kwargs) -> bytes:
    """The ``records`` bytes of :func:`fetch_partition` (b"" when there are none);
    raises if the partition entry carries an error."""
    p = fetch_partition(bootstrap_servers, topic, partition, offset, **kwargs)
    if p.error_code:
        raise RawProtocolError("Fetch {}-{} error {}".format(topic, partition, p.error_code))
    return bytes(p.records) if p.records is not None else b""


def settled_log_end(bootstrap_servers: str, topic: str, partition: int, timeout_s: float = 60.0) -> int:
    """The partition's log end once no transaction is open on it (the high watermark of the
    first read_committed Fetch whose last stable offset reached it).

    Kafka answers EndTxn before its transaction coordinator has written the commit or abort
    marker: until the marker lands the last stable offset stays at the transaction's first
    record, and records another producer writes meanwhile go before the marker. A test that
    expects the log as a finished transaction leaves it waits here first. Raises
    AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        # The default max wait: Tansu leaves the partition out of a Fetch with max_wait_ms=0
        # (the log holds records from offset 0 here, so the answer comes at once).
        p = fetch_partition(bootstrap_servers, topic, partition, isolation_level=1)
        if p.error_code:
            raise RawProtocolError("Fetch {}-{} error {}".format(topic, partition, p.error_code))
        if p.last_stable_offset == p.high_watermark:
            return p.high_watermark
        if time.monotonic() > deadline:
            raise AssertionError("{}-{}: a transaction is still open after {} s (last stable offset {}, "
                                 "high watermark {})".format(topic, partition, timeout_s, p.last_stable_offset,
                                                             p.high_watermark))
        time.sleep(0.05)


class FetchedLog(NamedTuple):
    """What :func:`fetch_log` read: the whole batches in order, every aborted transaction
    listed on the way (producer_id, first_offset), and the last Fetch's marks."""

    records: bytes
    aborted_transactions: list[tuple[int, int]]
    high_watermark: int
    last_stable_offset: int


def fetch_log(bootstrap_servers: str, topic: str, partition: int, offset: int = 0, *,
              end: int | None = None, isolation_level: int = 0, max_fetches: int = 1000,
              **kwargs: Any) -> FetchedLog:
    """Fetch from ``offset`` until ``end`` (default: the high watermark, or the last stable
    offset under read_committed, of the first answer), each Fetch going on after the last
    whole batch of the previous one: one Fetch may hold one batch (the mock) or stop at a
    segment end (Kafka). Raises if a Fetch before the end returns no batch, or after
    ``max_fetches``."""
    data, aborted = bytearray(), []
    for _ in range(max_fetches):
        p = fetch_partition(bootstrap_servers, topic, partition, offset,
                            isolation_level=isolation_level, **kwargs)
        if p.error_code:
            raise RawProtocolError("Fetch {}-{} error {}".format(topic, partition, p.error_code))
        if end is None:
            end = p.last_stable_offset if isolation_level else p.high_watermark
        aborted += [(a.producer_id, a.first_offset) for a in p.aborted_transactions or []
                    if (a.producer_id, a.first_offset) not in aborted]
        records = bytes(p.records) if p.records is not None else b""
        found = batch_headers(records)
        if offset < end and not found:
            raise RawProtocolError("no batch at {}-{} offset {} (end {})".format(
                topic, partition, offset, end))
        data += records[:sum(h.size for h in found)]
        if found:
            offset = found[-1].base_offset + found[-1].last_offset_delta + 1
        if offset >= end:
            return FetchedLog(bytes(data), aborted, p.high_watermark, p.last_stable_offset)
    raise RawProtocolError("{}-{} not read to offset {} in {} Fetches".format(
        topic, partition, end, max_fetches))


class BatchHeader(NamedTuple):
    """The fixed header fields of one v2 record batch, read without kproto.records."""

    base_offset: int
    last_offset_delta: int
    attributes: int
    crc: int
    crc_covered: bytes  # the bytes the CRC-32C covers (attributes to the batch end)

    @property
    def size(self) -> int:
        """The whole batch's length in bytes (base offset and length field included)."""
        return 21 + len(self.crc_covered)

    @property
    def codec(self) -> int:
        return self.attributes & 7

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)


def batch_headers(data: bytes) -> list[BatchHeader]:
    """Headers of the whole v2 batches in ``data`` (a trailing partial batch is ignored,
    as a Fetch may cut the last one). An independent check on what brokers return."""
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if length < 49 or end > len(data):
            break
        crc, attributes, last_delta = struct.unpack_from(">Ihi", data, pos + 17)
        out.append(BatchHeader(base, last_delta, attributes, crc, bytes(data[pos + 21:end])))
        pos = end
    return out
