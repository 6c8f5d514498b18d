"""One broker connection's socket side: connect, TLS handshake, reads and writes.

Owns the socket lifecycle of one node (Java's ``ClusterConnectionStates`` entry plus the
socket of its ``KafkaChannel``): the addresses DNS gave for the host, tried in turn; a
non-blocking connect with a deadline; the TLS handshake, whose verdicts (a certificate
that does not verify, an alert; TLS 1.3 delivers a refused client certificate at the
first read) become ``SslAuthenticationError`` while EOF and resets stay retriable; moving
bytes between the socket and the sans-IO :class:`~kproto.net.connection.Connection`; the
SASL authenticator of a
``SASL_*`` connection (:mod:`kproto.net.sasl`, driven by the client); and the reconnect backoff
(exponential, jittered, between ``reconnect_backoff_ms`` and ``reconnect_backoff_max_ms``).
It never touches the selector or a lock: the network client calls it from its poll loop
and reads ``interest()`` to know what to wait for. Its ``listener`` (a
:class:`~kproto.net.network_listener.NetworkListener`, None when unused) hears about
connections opened and closed, bytes moved and request/response frames, as they happen.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import random
import re
import selectors
import socket
import ssl
from typing import Any, TypeGuard

from kproto import errors
from kproto.net.backoff import RETRY_BACKOFF_EXP_BASE, RETRY_BACKOFF_JITTER, ExponentialBackoff
from kproto.net.config import NetworkClientConfig
from kproto.net.connection import Connection

log = logging.getLogger("kproto.net")

_RECV_CHUNK = 256 * 1024
# Bounds one readiness event's work (1 MiB): a broker streaming data cannot starve the
# others, and an event loop driving the client (kproto.aio) is not held for a whole large
# response (the rest is read on the next step: the socket stays readable).
_MAX_READS_PER_EVENT = 4
_IN_PROGRESS = {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, errno.EAGAIN}


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    HANDSHAKE = "tls-handshake"
    API_VERSIONS = "api-versions"   # connected; negotiating versions
    AUTHENTICATING = "authenticating"  # SASL handshake and authenticate rounds
    READY = "ready"


class BrokerConnection:
    """Socket state of one node. All methods are called with the client's lock held."""

    def __init__(self, node_id: Any, host: str, port: int, config: NetworkClientConfig,
                 ssl_context: ssl.SSLContext | None) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.config = config
        self.ssl_context = ssl_context
        self.state = ConnectionState.DISCONNECTED
        self.sock: socket.socket | None = None
        self.proto: Connection | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.failures = 0
        self.backoff_until_ms = 0.0
        self.connect_deadline_ms = float("inf")
        self.last_activity_ms = 0.0
        self.last_error: BaseException | None = None
        self.authenticator: Any = None  # kproto.net.sasl.SaslClientAuthenticator while authenticating
        # When a SASL session with a lifetime (KIP-368) should be replaced: the client
        # closes the idle connection then and a new one authenticates afresh.
        self.reauthenticate_at_ms = float("inf")
        self._addresses: list[tuple[Any, ...]] = []
        self._address_index = 0
        self._tls_wants = selectors.EVENT_WRITE
        # TLS is up but no byte has come back yet (see finish_connect).
        self._tls_unconfirmed = False
        self.listener: Any = None  # NetworkListener, set by the client

    def __repr__(self) -> str:
        return "<BrokerConnection node={} {}:{} {}>".format(
            self.node_id, self.host, self.port, self.state.value)

    # --- state ------------------------------------------------------------------------

    def is_connected(self) -> bool:
        return self.state in (ConnectionState.API_VERSIONS, ConnectionState.AUTHENTICATING,
                              ConnectionState.READY)

    def is_ready(self) -> bool:
        return self.state is ConnectionState.READY

    def forget_addresses(self) -> None:
        """Resolve the host name again on the next connect (a rebootstrap: the name may
        point elsewhere now)."""
        self._addresses = []
        self._address_index = 0

    def can_connect(self, now_ms: float) -> bool:
        return self.state is ConnectionState.DISCONNECTED and now_ms >= self.backoff_until_ms

    def connection_delay(self, now_ms: float) -> float:
        """Ms until a connection attempt is allowed; inf if connecting or connected."""
        if self.state is ConnectionState.DISCONNECTED:
            return max(self.backoff_until_ms - now_ms, 0.0)
        return float("inf")

    def interest(self) -> int:
        """The selector events this connection waits for now (0: not registered)."""
        if self.sock is None:
            return 0
        if self.state is ConnectionState.CONNECTING:
            return selectors.EVENT_WRITE
        if self.state is ConnectionState.HANDSHAKE:
            return self._tls_wants
        events = selectors.EVENT_READ
        if self.proto is not None and self.proto.has_pending_output():
            events |= selectors.EVENT_WRITE
        return events

    # --- connecting -------------------------------------------------------------------

    def connect(self, now_ms: float) -> None:
        """Start a non-blocking connect to the next address (resolving DNS first if needed)."""
        if not self._addresses or self._address_index >= len(self._addresses):
            try:
                infos = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
            except OSError as exc:
                raise errors.KafkaConnectionError("cannot resolve {}:{}: {}".format(
                    self.host, self.port, exc)) from exc
            # Deduplicate while keeping the resolver's order (IPv4/IPv6 preference).
            seen, self._addresses = set(), []
            for family, _, proto, _, sockaddr in infos:
                if (family, sockaddr) not in seen:
                    seen.add((family, sockaddr))
                    self._addresses.append((family, proto, sockaddr))
            self._address_index = 0
            if not self._addresses:
                raise errors.KafkaConnectionError("no address for {}:{}".format(self.host, self.port))
        family, proto, sockaddr = self._addresses[self._address_index]
        self._address_index += 1
        sock = socket.socket(family, socket.SOCK_STREAM, proto)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.config.receive_buffer_bytes:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.config.receive_buffer_bytes)
        if self.config.send_buffer_bytes:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.send_buffer_bytes)
        rc = sock.connect_ex(sockaddr)
        if rc not in (0, *_IN_PROGRESS):
            sock.close()
            raise errors.KafkaConnectionError("connect to {}:{} failed: {}".format(
                self.host, self.port, _errno_text(rc)))
        self.sock = sock
        self.state = ConnectionState.CONNECTING
        self.connect_deadline_ms = now_ms + self.config.socket_connection_setup_timeout_ms
        self.last_activity_ms = now_ms
        log.debug("node %s: connecting to %s", self.node_id, sockaddr)

    def has_more_addresses(self) -> bool:
        return self._address_index < len(self._addresses)

    def finish_connect(self, now_ms: float) -> bool:
        """The socket became writable while connecting: True once TCP (and TLS) are up."""
        assert self.sock is not None
        if self.state is ConnectionState.CONNECTING:
            err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise errors.KafkaConnectionError("connect to {}:{} failed: {}".format(
                    self.host, self.port, _errno_text(err)))
            if self.ssl_context is None:
                return True
            self.sock = self.ssl_context.wrap_socket(
                self.sock, server_hostname=self.host, do_handshake_on_connect=False)
            self.state = ConnectionState.HANDSHAKE
        try:
            self.sock.do_handshake()  # type: ignore[attr-defined]
        except ssl.SSLWantReadError:
            self._tls_wants = selectors.EVENT_READ
            return False
        except ssl.SSLWantWriteError:
            self._tls_wants = selectors.EVENT_WRITE
            return False
        except OSError as exc:  # ssl.SSLError included
            if is_tls_failure(exc):
                raise self._tls_failure("TLS handshake failed", exc) from exc
            # Reset, or closed before the handshake got anywhere: retriable, as in Java (a
            # plaintext listener closes so too, but so may a network blip), with Java's hint.
            raise errors.KafkaConnectionError(
                "TLS handshake with {}:{} failed: {} (the connection ended during the TLS "
                "handshake: a listener without TLS, or a network that blocks TLS, does "
                "this)".format(self.host, self.port, exc)) from exc
        # TLS 1.3 ends the client's handshake before the broker has checked our certificate:
        # its refusal arrives as an alert at the first read (Java's POST_HANDSHAKE state).
        self._tls_unconfirmed = True
        log.debug("node %s: TLS established (%s)", self.node_id, self.sock.version())  # type: ignore[attr-defined]
        return True

    def _tls_failure(self, what: str, exc: ssl.SSLError) -> errors.SslAuthenticationError:
        self._tls_unconfirmed = False
        return errors.SslAuthenticationError("{} with node {} ({}:{}): {}".format(
            what, self.node_id, self.host, self.port, tls_failure_reason(exc)))

    def _io_error(self, what: str, exc: OSError) -> errors.KafkaError:
        """A failed read or write: the broker's late TLS verdict (see finish_connect), or
        a retriable connection error."""
        if self._tls_unconfirmed:
            # A write fails on the broker's hang-up while its verdict, the alert it sent
            # before hanging up, may still wait unread: look for it.
            verdict = exc if is_tls_failure(exc) else self._unread_tls_verdict()
            if verdict is not None:
                return self._tls_failure("TLS handshake refused", verdict)
        return errors.KafkaConnectionError("{} node {} failed: {}".format(what, self.node_id, exc))

    def _unread_tls_verdict(self) -> ssl.SSLError | None:
        assert self.sock is not None
        try:
            self.sock.recv(1)  # the connection is failing: a byte of data is no loss
        except OSError as exc:
            if is_tls_failure(exc):
                return exc
        return None

    def connected(self, proto: Connection, now_ms: float) -> None:
        self.proto = proto
        self.state = ConnectionState.API_VERSIONS
        self.last_activity_ms = now_ms
        if self.listener is not None:
            self.listener.connection_created(self.node_id)

    def authenticating(self, api_versions: dict[int, tuple[int, int]], authenticator: Any) -> None:
        """ApiVersions done on a SASL connection: authenticate before anything else."""
        self.api_versions = api_versions
        self.authenticator = authenticator
        self.state = ConnectionState.AUTHENTICATING

    def negotiated(self, api_versions: dict[int, tuple[int, int]]) -> None:
        self.api_versions = api_versions
        self.authenticator = None
        self.state = ConnectionState.READY
        self.failures = 0
        self._address_index = 0

    # --- I/O --------------------------------------------------------------------------

    def write(self, now_ms: float) -> None:
        """Write as much queued output as the socket takes."""
        assert self.sock is not None and self.proto is not None
        listener = self.listener
        written = 0
        try:
            while self.proto.has_pending_output():
                try:
                    sent = self.sock.send(self.proto.pending_output())
                except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                    return
                except OSError as exc:
                    raise self._io_error("write to", exc) from exc
                if sent == 0:
                    return
                completed = self.proto.advance_output(sent)
                written += sent
                self.last_activity_ms = now_ms
                if listener is not None:
                    for ifr in completed:
                        listener.request_sent(self.node_id, ifr.api_key, ifr.size)
        finally:
            if written and listener is not None:
                listener.bytes_sent(self.node_id, written)

    def read(self, now_ms: float) -> tuple[list[Any], errors.KafkaError | None]:
        """Read what is available: the completed (InFlightRequest, response) pairs, and
        the error that ended the connection if one did (pairs completed before it kept)."""
        assert self.sock is not None and self.proto is not None
        done: list[Any] = []
        error: errors.KafkaError | None = None
        nbytes = 0
        try:
            for _ in range(_MAX_READS_PER_EVENT):
                data = self._recv(_RECV_CHUNK)
                if data is None:
                    break
                nbytes += len(data)
                done.extend(self.proto.receive(data))
                self.last_activity_ms = now_ms
            else:
                # Read cap reached. A TLS socket may hold decrypted bytes select() cannot
                # see (at most one TLS record): take them now or they wait for new data.
                pending = self.sock.pending() if isinstance(self.sock, ssl.SSLSocket) else 0
                while pending:
                    data = self._recv(pending)
                    if data is None:
                        break
                    nbytes += len(data)
                    done.extend(self.proto.receive(data))
                    pending = self.sock.pending()  # type: ignore[attr-defined]
        except errors.KafkaError as exc:
            done.extend(getattr(exc, "completed", ()))
            error = exc
            if isinstance(exc, errors.SslAuthenticationError) and self.ssl_context is None:
                # A TLS record at a plaintext connection (Connection): name the address too.
                error = errors.SslAuthenticationError("plaintext connection to node {} ({}:{}): {}".format(
                    self.node_id, self.host, self.port, exc.args[0] if exc.args else exc))
        if self.listener is not None:
            self._report_read(nbytes, done, now_ms)
        return done, error

    def _report_read(self, nbytes: int, done: list[Any], now_ms: float) -> None:
        listener, node_id = self.listener, self.node_id
        if nbytes:
            listener.bytes_received(node_id, nbytes)
        for ifr, response in done:
            listener.response_received(node_id, ifr.api_key, ifr.response_size, now_ms - ifr.send_time_ms,
                                       getattr(response, "throttle_time_ms", 0) or 0)

    def _recv(self, size: int) -> bytes | None:
        """Bytes from the socket; None if none are available now."""
        assert self.sock is not None
        try:
            data = self.sock.recv(size)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return None
        except OSError as exc:
            raise self._io_error("read from", exc) from exc
        if not data:
            raise errors.KafkaConnectionError("node {} closed the connection".format(self.node_id))
        self._tls_unconfirmed = False
        return data

    # --- closing ----------------------------------------------------------------------

    def close(self, now_ms: float, *, failed: bool) -> list[Any]:
        """Close the socket; return the requests that were in flight. ``failed`` backs off."""
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        if self.proto is not None and self.listener is not None:
            self.listener.connection_closed(self.node_id)
        pending = self.proto.close() if self.proto is not None else []
        self.proto = None
        self.state = ConnectionState.DISCONNECTED
        self._tls_unconfirmed = False
        self.api_versions = {}
        self.authenticator = None
        self.reauthenticate_at_ms = float("inf")
        self.connect_deadline_ms = float("inf")
        if failed:
            self.failures += 1
            self._address_index = 0
            self.backoff_until_ms = now_ms + reconnect_backoff_ms(
                self.failures, self.config.reconnect_backoff_ms,
                self.config.reconnect_backoff_max_ms)
        else:
            self.backoff_until_ms = now_ms + self.config.reconnect_backoff_ms
        return pending


def _errno_text(code: int) -> str:
    """``connection refused (ECONNREFUSED)``: what a person reads, then the name to search."""
    return "{} ({})".format(os.strerror(code).lower(), errno.errorcode.get(code, code))


def is_tls_failure(exc: OSError) -> TypeGuard[ssl.SSLError]:
    """Is this a TLS verdict (a certificate that does not verify, an alert, a peer that
    does not speak TLS) rather than the connection dropping? Java turns the former into
    ``SslAuthenticationException``; EOF and socket errors stay retriable there too."""
    return isinstance(exc, ssl.SSLError) and not isinstance(exc, (
        ssl.SSLEOFError, ssl.SSLSyscallError, ssl.SSLZeroReturnError, ssl.SSLWantReadError,
        ssl.SSLWantWriteError))


def tls_failure_reason(exc: ssl.SSLError) -> str:
    """What went wrong, without OpenSSL's ``[SSL: CODE]`` prefix and ``(_ssl.c:N)`` suffix."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "certificate verify failed: {}".format(exc.verify_message)
    text = re.sub(r"^\[SSL: [A-Z0-9_]+\] |\s*\(_ssl\.c:\d+\)$", "", str(exc.args[-1] if exc.args else exc))
    reason = exc.reason or ""
    if "ALERT" not in reason:
        return text
    if any(word in reason for word in ("CERTIFICATE", "UNKNOWN_CA", "ACCESS_DENIED")):
        return "the broker refused our certificate ({}): it wants a client certificate " \
               "(ssl_certfile) signed by a CA it trusts".format(text)
    if "HANDSHAKE_FAILURE" in reason:  # TLS 1.2's answer to a missing client certificate too
        return "the broker refused the handshake ({}): does it want a client certificate " \
               "(ssl_certfile), or share no TLS version or cipher with us?".format(text)
    return "the broker refused the handshake ({})".format(text)


def reconnect_backoff_ms(failures: int, base_ms: float, max_ms: float,
                         rng: random.Random | None = None) -> float:
    """Exponential backoff after ``failures`` consecutive failures, +-20% jitter, clamped.

    Jitter spreads the reconnects of many clients after a broker restart; the clamp keeps
    the result inside [base, max] as the settings promise.
    """
    backoff = ExponentialBackoff(int(base_ms), RETRY_BACKOFF_EXP_BASE, int(max_ms), RETRY_BACKOFF_JITTER, rng)
    return min(max(backoff.backoff(max(failures - 1, 0)), base_ms), max(max_ms, base_ms))
