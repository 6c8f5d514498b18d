"""SASL authentication of a broker connection, sans-IO (Java's ``SaslClientAuthenticator``).

Owns the SASL mechanisms (bytes in, bytes out; no sockets, no clock) and the per-connection
authentication state machine that turns them into SaslHandshake/SaslAuthenticate requests.
The network client drives it: after ApiVersions it asks ``start()`` for the first request,
hands every response to ``on_response()`` and marks the node ready once ``complete``.

Mechanisms (``sasl_mechanism``):

- ``PLAIN`` (RFC 4616): ``authzid NUL authcid NUL password`` with an empty authzid.
- ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (RFC 5802, RFC 7677): client-first, server-first
  (the server nonce must extend ours; salt and iteration count checked), client-final with
  the proof, server-final whose signature is verified. The username's ``=`` and ``,`` are
  escaped as ``=3D``/``=2C``; like Kafka's ``ScramFormatter``, names and passwords are used
  as UTF-8 without SASLprep normalisation (a broker built on Kafka stores them that way).
- ``OAUTHBEARER`` (RFC 7628, KIP-255, KIP-342): ``n,,\\x01auth=Bearer <token>[\\x01k=v...]
  \\x01\\x01``; the token comes from ``sasl_oauth_token_provider.token()`` and the optional
  extensions from its ``extensions()`` (kafka-python's interface).
- ``GSSAPI``: refused at construction (the standard library has no Kerberos).

States (Java's names): SEND_APIVERSIONS_REQUEST and RECEIVE_APIVERSIONS_RESPONSE are the
network client's own ApiVersions negotiation; then SEND_HANDSHAKE_REQUEST ->
RECEIVE_HANDSHAKE_RESPONSE -> INITIAL (first SaslAuthenticate) -> INTERMEDIATE (further
rounds) -> COMPLETE, or FAILED. Every failure is a ``kproto.errors.AuthenticationError``:
``UnsupportedSaslMechanismError`` naming the broker's enabled mechanisms, or a
``SaslAuthenticationError`` (the broker's SASL_AUTHENTICATION_FAILED is one too).
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import logging
import re
import secrets
from typing import Any, Mapping, Optional

from kproto import errors
from kproto.messages import SaslAuthenticateRequest, SaslHandshakeRequest
from kproto.net.client_versions import highest_common_version
from kproto.net.config import NetworkClientConfig

log = logging.getLogger("kproto.net.sasl")

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")

# Kafka's ScramMechanism.minIterations: a broker asking for fewer is not one to trust.
SCRAM_MIN_ITERATIONS = 4096
# Kafka's own maximum is 16384; this cap only stops a hostile server from making the
# client hash for minutes (PBKDF2 cost is linear in the count).
SCRAM_MAX_ITERATIONS = 100_000
# A server message longer than this is not SCRAM (nonce + salt + count are ~100 bytes).
_SCRAM_MAX_MESSAGE = 4096


def _fail(message: str) -> errors.SaslAuthenticationError:
    return errors.SaslAuthenticationError(message)


# --- mechanisms ------------------------------------------------------------------------


class SaslMechanism:
    """Java's ``SaslClient``: ``initial_response()`` then ``evaluate_challenge()`` per
    server message until ``complete``. ``evaluate_challenge`` returns the bytes to send,
    or None when there is nothing more to send."""

    name = ""
    complete = False

    def initial_response(self) -> bytes:
        raise NotImplementedError

    def evaluate_challenge(self, challenge: bytes) -> Optional[bytes]:
        raise NotImplementedError


class PlainMechanism(SaslMechanism):
    """RFC 4616 PLAIN: one message, the server's empty answer completes it."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        if "\x00" in username or "\x00" in password:
            raise errors.KafkaConfigurationError("sasl_plain_username/password must not contain NUL")
        self._message = b"\x00" + username.encode("utf-8") + b"\x00" + password.encode("utf-8")

    def initial_response(self) -> bytes:
        return self._message

    def evaluate_challenge(self, challenge: bytes) -> Optional[bytes]:
        # Whatever the server sends after our one message ends the exchange; a failure
        # arrives as the response's error code, not here.
        self.complete = True
        return None


def scram_escape_username(username: str) -> str:
    """RFC 5802 saslname: ``=`` -> ``=3D`` and ``,`` -> ``=2C`` (``=`` first)."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _parse_scram_attributes(data: bytes, what: str) -> dict[str, str]:
    """``a=v,b=w`` -> {"a": "v", "b": "w"}; a malformed message is a SaslAuthenticationError."""
    if len(data) > _SCRAM_MAX_MESSAGE:
        raise _fail("SCRAM {} is {} bytes long".format(what, len(data)))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail("SCRAM {} is not UTF-8".format(what)) from None
    attrs: dict[str, str] = {}
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise _fail("malformed SCRAM {}: {!r}".format(what, text[:200]))
        if part[0] in attrs:
            raise _fail("SCRAM {} repeats attribute {!r}".format(what, part[0]))
        attrs[part[0]] = part[2:]
    return attrs


def _b64decode(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise _fail("SCRAM {} is not valid base64".format(what)) from None


class ScramMechanism(SaslMechanism):
    """RFC 5802 SCRAM with SHA-256 or SHA-512 (RFC 7677), no channel binding (``n,,``)."""

    _HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
    _GS2_HEADER = b"n,,"

    def __init__(self, mechanism: str, username: str, password: str, nonce: Optional[str] = None) -> None:
        if mechanism not in self._HASHES:
            raise errors.KafkaConfigurationError("unknown SCRAM mechanism {!r}".format(mechanism))
        self.name = mechanism
        self._hash = self._HASHES[mechanism]
        self._password = password.encode("utf-8")
        # 32 random bytes as printable base64 (no ','): the RFC's "printable" nonce.
        self._client_nonce = nonce if nonce is not None else base64.b64encode(
            secrets.token_bytes(32)).decode("ascii")
        self._client_first_bare = "n={},r={}".format(scram_escape_username(username), self._client_nonce)
        self._state = "initial"
        self._server_signature = b""

    def initial_response(self) -> bytes:
        self._state = "client_first_sent"
        return self._GS2_HEADER + self._client_first_bare.encode("utf-8")

    def evaluate_challenge(self, challenge: bytes) -> Optional[bytes]:
        if self._state == "client_first_sent":
            return self._client_final(bytes(challenge))
        if self._state == "client_final_sent":
            self._verify_server_final(bytes(challenge))
            return None
        raise _fail("unexpected SCRAM message in state {}".format(self._state))

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self._hash).digest()

    def _client_final(self, server_first: bytes) -> bytes:
        attrs = _parse_scram_attributes(server_first, "server-first message")
        if "m" in attrs:
            raise _fail("the server requires a SCRAM extension kproto does not know (m=)")
        if "e" in attrs:
            raise _fail("SCRAM server error: {}".format(attrs["e"]))
        for key in ("r", "s", "i"):
            if key not in attrs:
                raise _fail("SCRAM server-first message lacks {}=".format(key))
        nonce = attrs["r"]
        if not nonce.startswith(self._client_nonce) or len(nonce) <= len(self._client_nonce):
            raise _fail("SCRAM server nonce does not extend the client nonce")
        salt = _b64decode(attrs["s"], "salt")
        if not salt:
            raise _fail("SCRAM salt is empty")
        if not re.fullmatch(r"[0-9]{1,10}", attrs["i"]):
            raise _fail("SCRAM iteration count {!r} is not a number".format(attrs["i"][:20]))
        iterations = int(attrs["i"])
        if not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
            raise _fail("SCRAM iteration count {} outside [{}, {}]".format(
                iterations, SCRAM_MIN_ITERATIONS, SCRAM_MAX_ITERATIONS))
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = "c={},r={}".format(base64.b64encode(self._GS2_HEADER).decode("ascii"), nonce)
        auth_message = ",".join((self._client_first_bare, server_first.decode("utf-8"),
                                 without_proof)).encode("utf-8")
        client_signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        self._state = "client_final_sent"
        return "{},p={}".format(without_proof, base64.b64encode(proof).decode("ascii")).encode("utf-8")

    def _verify_server_final(self, server_final: bytes) -> None:
        attrs = _parse_scram_attributes(server_final, "server-final message")
        if "e" in attrs:
            raise _fail("SCRAM authentication failed: {}".format(attrs["e"]))
        if "v" not in attrs:
            raise _fail("SCRAM server-final message lacks v=")
        if not hmac.compare_digest(_b64decode(attrs["v"], "server signature"), self._server_signature):
            raise _fail("SCRAM server signature does not verify: the broker does not know the password")
        self._state = "complete"
        self.complete = True


_OAUTH_KEY = re.compile(r"[A-Za-z]+")
_OAUTH_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


class OAuthBearerMechanism(SaslMechanism):
    """RFC 7628 OAUTHBEARER as Kafka uses it (KIP-255; extensions KIP-342)."""

    name = "OAUTHBEARER"

    def __init__(self, token_provider: Any) -> None:
        if token_provider is None or not callable(getattr(token_provider, "token", None)):
            raise errors.KafkaConfigurationError(
                "sasl_mechanism='OAUTHBEARER' needs sasl_oauth_token_provider (an object with token())")
        self._provider = token_provider
        self.error_challenge: Optional[str] = None

    def initial_response(self) -> bytes:
        try:
            token = self._provider.token()
        except Exception as exc:
            raise _fail("sasl_oauth_token_provider.token() failed: {}".format(exc)) from exc
        if not isinstance(token, str) or not token:
            raise _fail("sasl_oauth_token_provider.token() must return a non-empty str")
        extensions = self._extensions()
        ext = "".join("\x01{}={}".format(k, v) for k, v in sorted(extensions.items()))
        return "n,,\x01auth=Bearer {}{}\x01\x01".format(token, ext).encode("utf-8")

    def _extensions(self) -> Mapping[str, str]:
        get = getattr(self._provider, "extensions", None)
        extensions = get() if callable(get) else None
        if not extensions:
            return {}
        for key, value in extensions.items():
            if not isinstance(key, str) or not _OAUTH_KEY.fullmatch(key) or key == "auth":
                raise _fail("invalid OAUTHBEARER extension name {!r}".format(key))
            if not isinstance(value, str) or not _OAUTH_VALUE.fullmatch(value):
                raise _fail("invalid OAUTHBEARER extension value for {!r}".format(key))
        return extensions

    def evaluate_challenge(self, challenge: bytes) -> Optional[bytes]:
        if challenge:
            # RFC 7628 3.2.2: the server's JSON error; answer with a single %x01 and the
            # server then fails the authentication (its error code carries the verdict).
            self.error_challenge = bytes(challenge).decode("utf-8", "replace")
            log.warning("OAUTHBEARER: the broker rejected the token: %s", self.error_challenge)
            return b"\x01"
        self.complete = True
        return None


def create_mechanism(config: NetworkClientConfig) -> SaslMechanism:
    """The mechanism ``sasl_mechanism`` names, checked now (``KafkaConfigurationError``)."""
    name = config.sasl_mechanism
    if name is None:
        raise errors.KafkaConfigurationError(
            "security_protocol={} needs sasl_mechanism (one of {})".format(
                config.security_protocol, ", ".join(MECHANISMS)))
    name = str(name).upper()
    if name == "PLAIN" or name.startswith("SCRAM-"):
        username, password = config.sasl_plain_username, config.sasl_plain_password
        if username is None or password is None:
            raise errors.KafkaConfigurationError(
                "sasl_mechanism={!r} needs sasl_plain_username and sasl_plain_password".format(name))
        if name == "PLAIN":
            return PlainMechanism(username, password)
        return ScramMechanism(name, username, password)
    if name == "OAUTHBEARER":
        return OAuthBearerMechanism(config.sasl_oauth_token_provider)
    if name == "GSSAPI":
        raise errors.KafkaConfigurationError(
            "sasl_mechanism='GSSAPI' (Kerberos) is not supported: kproto uses the standard library "
            "only, which has no Kerberos/GSS-API binding; use SCRAM-SHA-256/512, PLAIN or OAUTHBEARER")
    raise errors.KafkaConfigurationError("sasl_mechanism {!r} is not supported (one of {})".format(
        name, ", ".join(MECHANISMS)))


def check_sasl_config(config: NetworkClientConfig) -> None:
    """Fail at construction, not at the first connection, on an unusable SASL setting."""
    if str(config.security_protocol).upper().startswith("SASL_"):
        create_mechanism(config)


# --- the per-connection state machine ---------------------------------------------------


class SaslState(enum.Enum):
    SEND_APIVERSIONS_REQUEST = "send_apiversions_request"
    RECEIVE_APIVERSIONS_RESPONSE = "receive_apiversions_response"
    SEND_HANDSHAKE_REQUEST = "send_handshake_request"
    RECEIVE_HANDSHAKE_RESPONSE = "receive_handshake_response"
    INITIAL = "initial"
    INTERMEDIATE = "intermediate"
    COMPLETE = "complete"
    FAILED = "failed"


class SaslClientAuthenticator:
    """Authenticates one connection: ``start()`` gives the SaslHandshake request, each
    ``on_response(response)`` the next request (or None once ``complete``).

    ``api_versions`` is what the broker advertised in ApiVersions (the client did that
    exchange: the SEND/RECEIVE_APIVERSIONS states). Requests are ``(message, version)``.
    Any failure moves to FAILED and raises an ``AuthenticationError``.
    """

    def __init__(self, mechanism: SaslMechanism, api_versions: Mapping[int, tuple[int, int]],
                 node_id: Any = None, address: str = "") -> None:
        self.mechanism = mechanism
        self.node_id = node_id
        self.address = address  # host:port, for the one line a refused login is reported in
        self.state = SaslState.SEND_HANDSHAKE_REQUEST
        self.session_lifetime_ms = 0
        self.error: Optional[errors.KafkaError] = None
        self._handshake_version = highest_common_version(SaslHandshakeRequest, api_versions)
        self._authenticate_version = highest_common_version(SaslAuthenticateRequest, api_versions)

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    def start(self) -> tuple[Any, int]:
        if self.state is not SaslState.SEND_HANDSHAKE_REQUEST:
            raise errors.IllegalStateError("SASL authentication already started")
        if self._handshake_version is None or self._handshake_version < 1 or self._authenticate_version is None:
            # v0 handshakes are followed by raw SASL tokens (Kafka < 1.0), not implemented.
            raise self._failed(errors.SaslAuthenticationError(
                "node {} does not offer SaslHandshake v1 and SaslAuthenticate (Kafka >= 1.0); "
                "kproto does not speak the older raw SASL framing".format(self.node_id)))
        self.state = SaslState.RECEIVE_HANDSHAKE_RESPONSE
        return SaslHandshakeRequest(mechanism=self.mechanism.name), self._handshake_version

    def on_response(self, response: Any) -> Optional[tuple[Any, int]]:
        try:
            if self.state is SaslState.RECEIVE_HANDSHAKE_RESPONSE:
                return self._on_handshake(response)
            if self.state in (SaslState.INITIAL, SaslState.INTERMEDIATE):
                return self._on_authenticate(response)
            raise errors.IllegalSaslStateError("SASL response for node {} in state {}".format(
                self.node_id, self.state.name))
        except errors.KafkaError as exc:
            raise self._failed(exc)

    def fail(self, exc: errors.KafkaError) -> errors.KafkaError:
        """Record a failure seen outside the exchange (e.g. the broker hung up)."""
        return self._failed(exc)

    def _failed(self, exc: errors.KafkaError) -> errors.KafkaError:
        self.state = SaslState.FAILED
        self.error = exc
        return exc

    def _on_handshake(self, response: Any) -> tuple[Any, int]:
        if response.error_code == errors.ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise errors.UnsupportedSaslMechanismError(
                "node {} does not enable SASL mechanism {}; it offers: {}".format(
                    self.node_id, self.mechanism.name, ", ".join(response.mechanisms) or "(none)"))
        if response.error_code == errors.ErrorCode.ILLEGAL_SASL_STATE:
            # What a listener without SASL answers (Kafka enables no mechanism there): Java's
            # SaslClientAuthenticator names the mechanism and the (empty) enabled list.
            raise errors.IllegalSaslStateError(
                "node {}: unexpected handshake request with client mechanism {}, enabled "
                "mechanisms are [{}] (a listener without SASL answers so: check "
                "security_protocol)".format(self.node_id, self.mechanism.name,
                                            ", ".join(response.mechanisms)))
        if response.error_code:
            # Java raises IllegalSaslStateException for any other code too.
            raise errors.IllegalSaslStateError(
                "node {}: unknown error code {} in SaslHandshake, client mechanism is {}, "
                "enabled mechanisms are [{}]".format(self.node_id, response.error_code,
                                                      self.mechanism.name,
                                                      ", ".join(response.mechanisms)))
        self.state = SaslState.INITIAL
        return self._authenticate(self.mechanism.initial_response())

    def _authenticate(self, data: bytes) -> tuple[Any, int]:
        assert self._authenticate_version is not None
        return SaslAuthenticateRequest(auth_bytes=bytes(data)), self._authenticate_version

    def _on_authenticate(self, response: Any) -> Optional[tuple[Any, int]]:
        if response.error_code:
            where = "node {} ({})".format(self.node_id, self.address) if self.address else "node {}".format(self.node_id)
            detail = response.error_message or "refused"
            raise errors.exception_for(response.error_code, "{} refused the {} login: {}".format(
                where, self.mechanism.name, detail))
        self.session_lifetime_ms = max(int(response.session_lifetime_ms or 0), 0)
        reply = self.mechanism.evaluate_challenge(bytes(response.auth_bytes or b""))
        if reply is not None:
            self.state = SaslState.INTERMEDIATE
            return self._authenticate(reply)
        if not self.mechanism.complete:
            raise _fail("{} ended before the exchange was complete".format(self.mechanism.name))
        self.state = SaslState.COMPLETE
        log.debug("node %s: authenticated with %s (session lifetime %s ms)", self.node_id,
                  self.mechanism.name, self.session_lifetime_ms or "unlimited")
        return None
