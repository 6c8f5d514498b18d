"""NetworkClient against a peer that breaks the protocol (a tiny server in this test).

The server answers ApiVersions correctly, then answers other requests in a broken way
chosen by the test. The client must fail the request with a retriable connection error,
close the connection, and stay usable.
"""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from kproto import errors
from kproto.messages import API_KEYS, ApiVersionsResponse, HeartbeatRequest
from kproto.protocol import headers
from tests.brokers._net import recv_exact
from kproto.net.client import NetworkClient


class BadPeer:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.api_versions_seen: list[int] = []
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_exact(conn: socket.socket, n: int) -> bytes:
        data = recv_exact(conn, n)
        if data is None:
            raise OSError("closed")
        return data

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", self._read_exact(conn, 4))
                frame = self._read_exact(conn, size)
                api_key, version, corr = struct.unpack_from(">hhi", frame, 0)
                self.api_versions_seen.append(version) if api_key == 18 else None
                if api_key == 18 and version > 0 and self.mode == "api_versions_v0_only":
                    # UNSUPPORTED_VERSION in v0 format, without saying which versions exist.
                    body = ApiVersionsResponse(error_code=35, api_keys=[]).encode(0)
                    conn.sendall(struct.pack(">ii", 4 + len(body), corr) + body)
                elif api_key == 18:
                    body = ApiVersionsResponse(error_code=0, api_keys=[
                        ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=v)
                        for k, v in ((18, 3), (3, 12), (12, 4))]).encode(min(version, 3))
                    conn.sendall(struct.pack(">ii", 4 + len(body), corr) + body)
                elif self.mode == "wrong_correlation_id":
                    conn.sendall(struct.pack(">iih", 6, corr + 1000, 0))
                elif self.mode == "huge_frame":
                    conn.sendall(struct.pack(">i", 1 << 30) + struct.pack(">i", corr))
                elif self.mode == "garbage":
                    conn.sendall(struct.pack(">ii", 4 + 3, corr) + b"\x00\xff\xff")
                else:  # a well-formed answer with every field at its default
                    body = API_KEYS[api_key][1]().encode(version)
                    header = struct.pack(">i", corr)
                    if headers.response_header_version(api_key, version):
                        header += b"\x00"
                    conn.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        for s in [self.listener, *self._conns]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self._thread.join(5)


@pytest.mark.parametrize("mode,cause", [
    ("wrong_correlation_id", errors.CorrelationIdError),
    ("huge_frame", errors.InvalidReceiveError),
    ("garbage", errors.CorruptMessageError),
])
def test_protocol_violation_fails_the_request_and_closes_the_connection(mode, cause):
    peer = BadPeer(mode)
    client = NetworkClient(bootstrap_servers="127.0.0.1:{}".format(peer.port),
                           receive_message_max_bytes=1 << 20, reconnect_backoff_ms=10,
                           reconnect_backoff_max_ms=20, metadata_max_age_ms=600_000)
    try:
        futures = []
        for _ in range(2):
            future = client.send("bootstrap-0", HeartbeatRequest(group_id="g", member_id="m"))
            client.poll(20_000, future=future)
            assert future.failed()
            assert isinstance(future.exception, errors.KafkaConnectionError)
            assert future.exception.retriable
            assert isinstance(future.exception.__cause__, cause)
            futures.append(future)
            client.poll(50)  # let the backoff pass
        # Each failure closed the connection: the second request needed a new one.
        assert peer.connections >= 2
    finally:
        client.close()
        peer.close()


def test_api_versions_falls_back_to_v0_when_the_broker_names_no_version():
    peer = BadPeer("api_versions_v0_only")
    client = NetworkClient(bootstrap_servers="127.0.0.1:{}".format(peer.port),
                           metadata_max_age_ms=600_000)
    try:
        future = client.send("bootstrap-0", HeartbeatRequest(group_id="g", member_id="m"))
        client.poll(20_000, future=future)
        assert future.succeeded(), future.exception
        assert peer.api_versions_seen[-1] == 0 and peer.api_versions_seen[0] > 0
        assert client.api_version(12, "bootstrap-0") == 4
    finally:
        client.close()
        peer.close()
