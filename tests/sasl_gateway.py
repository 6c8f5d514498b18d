"""A SASL-terminating gateway in front of a plaintext broker (test-only).

SCRAM-SHA-256/512 are served by scramp; PLAIN (RFC 4616) and OAUTHBEARER (RFC 7628 as
Kafka's KIP-255/342 use it: unsecured JWTs accepted by their ``sub``, or fixed tokens) are
parsed here, and librdkafka logs in with them too before kproto does.

Why it exists: Tansu 0.6.0 with ``--authentication`` checks SCRAM against users in its
storage, but with the memory storage the tests use no user can ever be created (``tansu
user create`` sends AlterUserScramCredentials, which an authenticating broker refuses
before authentication, and its PLAIN is not enabled). So the successful-login tests put
this gateway in front of a plain Tansu: it answers SaslHandshake/SaslAuthenticate itself
with an independent SCRAM server implementation (``scramp``), as a Kafka broker would
(UNSUPPORTED_SASL_MECHANISM listing its mechanisms; SASL_AUTHENTICATION_FAILED then a
close; any other request before authentication closes the connection), and forwards every
other frame untouched to the broker (which must advertise the gateway's port:
``TansuBroker(advertised_port=gateway.port)``). confluent-kafka logs in through it too,
so the gateway itself is checked against librdkafka's SCRAM client.

The request/response framing here is written by hand from the Kafka protocol guide
(SaslHandshake v0-1, SaslAuthenticate v0-2) and does not use kproto's codecs.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import time

from tests.brokers._net import recv_exact

try:
    import scramp  # test extra; only the SCRAM logins need it
except ImportError:  # pragma: no cover - depends on the environment
    scramp = None
_SCRAM_ERRORS: tuple = (scramp.ScramException,) if scramp is not None else ()

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _write_uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def _shutdown(*sockets: socket.socket) -> None:
    # shutdown() (not just close()) wakes threads blocked in accept()/recv() on them.
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class SaslGateway:
    """Listens on 127.0.0.1; ``users`` maps a SCRAM mechanism -> {name: password};
    ``plain`` {name: password} enables PLAIN; ``oauth_tokens`` (exact tokens) and
    ``oauth_principals`` (``sub`` of unsecured JWTs) enable OAUTHBEARER."""

    def __init__(self, users: dict[str, dict[str, str]], session_lifetime_ms: int = 0, *,
                 plain: dict[str, str] | None = None, oauth_tokens: set[str] = frozenset(),
                 oauth_principals: set[str] = frozenset()) -> None:
        self.upstream: tuple[str, int] | None = None
        self.session_lifetime_ms = session_lifetime_ms
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.logins: list[tuple[str, str]] = []        # (mechanism, user) of each success
        self.failures: list[tuple[str, str]] = []      # (mechanism, reason)
        self.expired_closes = 0
        self.plain = dict(plain or {})
        self.oauth_tokens = set(oauth_tokens)
        self.oauth_principals = set(oauth_principals)
        self.oauth_extensions: list[dict[str, str]] = []  # extensions of each OAUTHBEARER login
        self.mechanisms = sorted([*users, *(["PLAIN"] if self.plain else []),
                                  *(["OAUTHBEARER"] if self.oauth_tokens or self.oauth_principals else [])])
        self._auth: dict[str, dict[str, tuple]] = {}
        if users and scramp is None:
            raise RuntimeError("SCRAM users need the scramp package (pip install scramp)")
        for mechanism, by_user in users.items():
            scram = scramp.ScramMechanism(mechanism)
            self._auth[mechanism] = {name: scram.make_auth_info(password, iteration_count=4096)
                                     for name, password in by_user.items()}
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap_servers(self) -> str:
        return "127.0.0.1:{}".format(self.port)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        assert self.upstream is not None
        up = socket.create_connection(self.upstream)
        with self._lock:
            self._sockets.append(up)
        threading.Thread(target=self._pump, args=(up, client), daemon=True).start()
        session = _Session(self)
        try:
            while True:
                head = recv_exact(client, 4)
                if head is None:
                    break
                frame = recv_exact(client, struct.unpack(">i", head)[0])
                if frame is None:
                    break
                api_key, = struct.unpack_from(">h", frame)
                if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                    reply, close = session.handle(frame)
                    client.sendall(struct.pack(">i", len(reply)) + reply)
                    if close:
                        break
                    continue
                if not session.authenticated and api_key != API_VERSIONS:
                    break  # Kafka closes a connection that skips authentication
                if session.expires_at and time.monotonic() >= session.expires_at:
                    with self._lock:
                        self.expired_closes += 1
                    break  # KIP-368: the broker closes a connection whose session expired
                up.sendall(head + frame)
        except OSError:
            pass
        _shutdown(client, up)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        _shutdown(src, dst)

    def close(self) -> None:
        with self._lock:
            sockets = [self.listener, *self._sockets]
        _shutdown(*sockets)
        for s in sockets:
            s.close()


class _Refused(Exception):
    """The login failed (the reason is recorded in ``SaslGateway.failures``)."""


class _Session:
    """One client connection's SASL state on the gateway."""

    def __init__(self, gateway: SaslGateway) -> None:
        self.gateway = gateway
        self.mechanism: str | None = None
        self.server = None
        self.step = 0
        self.authenticated = False
        self.expires_at = 0.0
        self.user = ""

    def handle(self, frame: bytes) -> tuple[bytes, bool]:
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
        (n,) = struct.unpack_from(">h", frame, 8)
        pos = 10 + max(n, 0)  # request header v1: client_id
        flexible = api_key == SASL_AUTHENTICATE and version >= 2
        if flexible:
            pos = _skip_tags(frame, pos)
        if api_key == SASL_HANDSHAKE:
            (size,) = struct.unpack_from(">h", frame, pos)
            return self._handshake(correlation_id, frame[pos + 2:pos + 2 + size].decode()), False
        if flexible:
            size, pos = _uvarint(frame, pos)
            size -= 1
        else:
            (size,) = struct.unpack_from(">i", frame, pos)
            pos += 4
        return self._authenticate(correlation_id, version, frame[pos:pos + size])

    def _handshake(self, correlation_id: int, mechanism: str) -> bytes:
        offered = self.gateway.mechanisms
        body = struct.pack(">i", correlation_id)
        if mechanism in offered:
            self.mechanism = mechanism
            auth = self.gateway._auth.get(mechanism)
            if auth is not None:
                def auth_fn(user: str) -> tuple:
                    self.user = user
                    if user not in auth:
                        raise scramp.ScramException("unknown-user")
                    return auth[user]

                self.server = scramp.ScramMechanism(mechanism).make_server(auth_fn)
            error = 0
        else:
            error = 33  # UNSUPPORTED_SASL_MECHANISM
        body += struct.pack(">hi", error, len(offered))
        for name in offered:
            body += struct.pack(">h", len(name)) + name.encode()
        return body

    def _authenticate(self, correlation_id: int, version: int, data: bytes) -> tuple[bytes, bool]:
        error, message, reply = 0, None, b""
        try:
            reply = self._exchange(data)
            self.step += 1
        except (_Refused, *_SCRAM_ERRORS, UnicodeDecodeError, ValueError) as exc:
            error, message, reply = 58, "Authentication failed during authentication due to invalid " \
                "credentials with SASL mechanism {}".format(self.mechanism), b""
            with self.gateway._lock:
                self.gateway.failures.append((self.mechanism or "", str(exc)))
        lifetime = self.gateway.session_lifetime_ms if self.authenticated else 0
        return _authenticate_response(correlation_id, version, error, message, reply, lifetime), error != 0

    def _exchange(self, data: bytes) -> bytes:
        if self.mechanism is None:
            raise _Refused("SaslAuthenticate before SaslHandshake")
        if self.mechanism == "PLAIN":
            return self._plain(data)
        if self.mechanism == "OAUTHBEARER":
            return self._oauthbearer(data)
        if self.step == 0:
            self.server.set_client_first(data.decode())
            return self.server.get_server_first().encode()
        self.server.set_client_final(data.decode())
        reply = self.server.get_server_final().encode()
        self._success()
        return reply

    def _success(self) -> None:
        self.authenticated = True
        lifetime = self.gateway.session_lifetime_ms
        self.expires_at = time.monotonic() + lifetime / 1000.0 if lifetime else 0.0
        with self.gateway._lock:
            self.gateway.logins.append((self.mechanism or "", self.user))

    def _plain(self, data: bytes) -> bytes:
        parts = data.decode().split("\x00")
        if len(parts) != 3:
            raise _Refused("malformed PLAIN message")
        authzid, self.user, password = parts
        if authzid not in ("", self.user) or self.gateway.plain.get(self.user) != password:
            raise _Refused("invalid PLAIN credentials")
        self._success()
        return b""

    def _oauthbearer(self, data: bytes) -> bytes:
        if self.step > 0:
            raise _Refused("token rejected")  # the client's %x01 after our error challenge
        text = data.decode()
        header, sep, rest = text.partition("\x01")
        if not header.startswith("n,") or not sep or not rest.endswith("\x01\x01"):
            raise _Refused("malformed OAUTHBEARER message")
        pairs = dict(kv.split("=", 1) for kv in rest[:-2].split("\x01") if "=" in kv)
        auth = pairs.pop("auth", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        principal = self._token_principal(token)
        if principal is None:
            return json.dumps({"status": "invalid_token"}).encode()  # RFC 7628 error challenge
        self.user = principal
        with self.gateway._lock:
            self.gateway.oauth_extensions.append(pairs)
        self._success()
        return b""

    def _token_principal(self, token: str) -> str | None:
        if token in self.gateway.oauth_tokens:
            return token
        parts = token.split(".")
        if len(parts) == 3:  # an unsecured JWT (librdkafka's built-in token)
            try:
                claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
            except ValueError:
                return None
            if isinstance(claims, dict) and claims.get("sub") in self.gateway.oauth_principals:
                return claims["sub"]
        return None


def _authenticate_response(correlation_id: int, version: int, error: int, message: str | None,
                           reply: bytes, lifetime: int) -> bytes:
    """A SaslAuthenticate response (v0-v2) with its response header."""
    if version >= 2:
        body = struct.pack(">i", correlation_id) + b"\x00" + struct.pack(">h", error)
        body += _write_uvarint(0 if message is None else len(message.encode()) + 1)
        body += (message or "").encode()
        body += _write_uvarint(len(reply) + 1) + reply + struct.pack(">q", lifetime) + b"\x00"
    else:
        body = struct.pack(">ih", correlation_id, error)
        body += struct.pack(">h", -1) if message is None else \
            struct.pack(">h", len(message.encode())) + message.encode()
        body += struct.pack(">i", len(reply)) + reply
        if version >= 1:
            body += struct.pack(">q", lifetime)
    return body
