"""Sans-IO tests of kproto.net.sasl: the mechanisms' bytes and the authenticator's states.

SCRAM is checked against RFC 7677's published exchange and against an independent server
implementation (``scramp``, test-only) paired in memory; every malformed or hostile
server message must end in a ``kproto.errors`` exception, never a raw ValueError/KeyError.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings, strategies as st

from kproto import errors
from kproto.messages import SaslAuthenticateResponse, SaslHandshakeResponse
from kproto.net import sasl
from kproto.net.config import NetworkClientConfig
from kproto.net.sasl import (OAuthBearerMechanism, PlainMechanism, SaslClientAuthenticator, SaslState,
                             ScramMechanism, create_mechanism)

# RFC 7677 section 3: user "user", password "pencil".
RFC7677_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC7677_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

ALL_VERSIONS = {17: (0, 1), 36: (0, 2)}


def rfc_client() -> ScramMechanism:
    return ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)


def test_scram_sha256_rfc7677_exchange() -> None:
    mech = rfc_client()
    assert mech.initial_response() == b"n,,n=user,r=" + RFC7677_NONCE.encode()
    assert mech.evaluate_challenge(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert not mech.complete
    assert mech.evaluate_challenge(RFC7677_SERVER_FINAL) is None
    assert mech.complete


def test_scram_tampered_server_signature_fails() -> None:
    mech = rfc_client()
    mech.initial_response()
    mech.evaluate_challenge(RFC7677_SERVER_FIRST)
    signature = bytearray(base64.b64decode(RFC7677_SERVER_FINAL[2:]))
    signature[0] ^= 1
    with pytest.raises(errors.SaslAuthenticationError, match="signature"):
        mech.evaluate_challenge(b"v=" + base64.b64encode(bytes(signature)))
    assert not mech.complete


def test_scram_server_error_in_final_message() -> None:
    mech = rfc_client()
    mech.initial_response()
    mech.evaluate_challenge(RFC7677_SERVER_FIRST)
    with pytest.raises(errors.SaslAuthenticationError, match="invalid-proof"):
        mech.evaluate_challenge(b"e=invalid-proof")


@pytest.mark.parametrize("server_first", [
    b"r=someoneelse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",           # does not extend ours
    b"r=" + RFC7677_NONCE.encode() + b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # not extended at all
    b"r=xx" + RFC7677_NONCE.encode() + b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # ours, not as prefix
])
def test_scram_server_nonce_must_extend_client_nonce(server_first: bytes) -> None:
    mech = rfc_client()
    mech.initial_response()
    with pytest.raises(errors.SaslAuthenticationError, match="nonce"):
        mech.evaluate_challenge(server_first)


@pytest.mark.parametrize("count", [b"0", b"1", b"4095", b"100001", b"2147483648", b"99999999999", b"-4096",
                                   b"4096.0", b"", b"four"])
def test_scram_absurd_iteration_counts_are_refused(count: bytes) -> None:
    mech = rfc_client()
    mech.initial_response()
    with pytest.raises(errors.SaslAuthenticationError, match="iteration"):
        mech.evaluate_challenge(RFC7677_SERVER_FIRST.replace(b"i=4096", b"i=" + count))


@pytest.mark.parametrize("server_first", [
    b"",
    b"garbage",
    b"r=" + RFC7677_NONCE.encode() + b"x,i=4096",                         # no salt
    b"r=" + RFC7677_NONCE.encode() + b"x,s=W22ZaJ0SNY7soEsUEjb6gQ==",     # no count
    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",                                  # no nonce
    b"r=" + RFC7677_NONCE.encode() + b"x,s=not*base64!,i=4096",
    b"r=" + RFC7677_NONCE.encode() + b"x,s=,i=4096",                       # empty salt
    b"r=" + RFC7677_NONCE.encode() + b"x,r=again,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    b"m=ext,r=" + RFC7677_NONCE.encode() + b"x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    b"e=unknown-user",
    b"\xff\xfe\x00r=abc",
    b",,,",
    b"r=" + b"A" * 10_000,
])
def test_scram_malformed_server_first_is_a_kproto_error(server_first: bytes) -> None:
    mech = rfc_client()
    mech.initial_response()
    with pytest.raises(errors.SaslAuthenticationError):
        mech.evaluate_challenge(server_first)


@pytest.mark.parametrize("server_final", [b"", b"v=", b"v=***", b"x=1", b"\xff", b"v=AAAA,v=AAAA"])
def test_scram_malformed_server_final_is_a_kproto_error(server_final: bytes) -> None:
    mech = rfc_client()
    mech.initial_response()
    mech.evaluate_challenge(RFC7677_SERVER_FIRST)
    with pytest.raises(errors.SaslAuthenticationError):
        mech.evaluate_challenge(server_final)
    assert not mech.complete


@settings(max_examples=200, deadline=None)
@given(first=st.binary(max_size=300), final=st.binary(max_size=100))
def test_scram_arbitrary_server_bytes_only_raise_kproto_errors(first: bytes, final: bytes) -> None:
    mech = rfc_client()
    mech.initial_response()
    try:
        mech.evaluate_challenge(first)
        mech.evaluate_challenge(final)
    except errors.SaslAuthenticationError:
        return
    # Random bytes cannot carry a valid server signature.
    raise AssertionError("accepted {!r} / {!r}".format(first, final))


def scramp_server(mechanism: str, username: str, password: str, seen: list | None = None):
    """An independent SCRAM server (scramp) knowing one user; names asked for go to ``seen``."""
    scramp = pytest.importorskip("scramp")
    server_mech = scramp.ScramMechanism(mechanism)
    salt, stored_key, server_key, iterations = server_mech.make_auth_info(password, iteration_count=4096)

    def auth_fn(name: str):
        if seen is not None:
            seen.append(name)
        if name != username:
            raise scramp.ScramException("unknown-user")
        return salt, stored_key, server_key, iterations

    return server_mech.make_server(auth_fn)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("username", ["alice", "name=with,both", "ünïcode"])
def test_scram_against_an_independent_server(mechanism: str, username: str) -> None:
    seen: list = []
    server = scramp_server(mechanism, username, "s3cret", seen)
    mech = ScramMechanism(mechanism, username, "s3cret")
    server.set_client_first(mech.initial_response().decode())
    assert seen == [username]  # the server undid the escaping to the same name
    server.set_client_final(mech.evaluate_challenge(server.get_server_first().encode()).decode())
    assert mech.evaluate_challenge(server.get_server_final().encode()) is None
    assert mech.complete


def test_scram_wrong_password_is_refused_by_the_independent_server() -> None:
    server = scramp_server("SCRAM-SHA-512", "alice", "right")
    mech = ScramMechanism("SCRAM-SHA-512", "alice", "wrong")
    server.set_client_first(mech.initial_response().decode())
    with pytest.raises(pytest.importorskip("scramp").ScramException):
        server.set_client_final(mech.evaluate_challenge(server.get_server_first().encode()).decode())
    with pytest.raises(errors.SaslAuthenticationError):
        mech.evaluate_challenge(server.get_server_final().encode())


def test_scram_username_escaping() -> None:
    assert sasl.scram_escape_username("a=b,c") == "a=3Db=2Cc"
    mech = ScramMechanism("SCRAM-SHA-256", "a=b,c", "p", nonce="N")
    assert mech.initial_response() == b"n,,n=a=3Db=2Cc,r=N"


def test_plain_message() -> None:
    mech = PlainMechanism("alice", "pässword")
    assert mech.initial_response() == b"\x00alice\x00p\xc3\xa4ssword"
    assert mech.evaluate_challenge(b"") is None and mech.complete


class TokenProvider:
    def __init__(self, token: object = "tok.en.value", extensions: object = None) -> None:
        self._token = token
        self._extensions = extensions

    def token(self) -> object:
        if isinstance(self._token, Exception):
            raise self._token
        return self._token

    def extensions(self) -> object:
        return self._extensions


def test_oauthbearer_message_with_extensions() -> None:
    mech = OAuthBearerMechanism(TokenProvider("abc", {"traceId": "123", "logicalCluster": "lkc-1"}))
    assert mech.initial_response() == (b"n,,\x01auth=Bearer abc\x01logicalCluster=lkc-1"
                                       b"\x01traceId=123\x01\x01")
    assert mech.evaluate_challenge(b"") is None and mech.complete


def test_oauthbearer_without_extensions_method() -> None:
    class Bare:
        def token(self) -> str:
            return "t"
    assert OAuthBearerMechanism(Bare()).initial_response() == b"n,,\x01auth=Bearer t\x01\x01"


@pytest.mark.parametrize("provider", [
    TokenProvider(extensions={"auth": "x"}),       # reserved (KIP-342)
    TokenProvider(extensions={"bad key": "x"}),
    TokenProvider(extensions={"k": "\x01"}),
    TokenProvider(token=""),
    TokenProvider(token=None),
    TokenProvider(token=RuntimeError("identity provider down")),
])
def test_oauthbearer_bad_tokens_and_extensions(provider: TokenProvider) -> None:
    with pytest.raises(errors.SaslAuthenticationError):
        OAuthBearerMechanism(provider).initial_response()


def test_oauthbearer_error_challenge_is_answered_with_kvsep() -> None:
    mech = OAuthBearerMechanism(TokenProvider())
    mech.initial_response()
    assert mech.evaluate_challenge(b'{"status":"invalid_token"}') == b"\x01"
    assert not mech.complete and "invalid_token" in mech.error_challenge


def config(**kw: object) -> NetworkClientConfig:
    base: dict[str, object] = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
                               "sasl_plain_username": "u", "sasl_plain_password": "p"}
    base.update(kw)
    return NetworkClientConfig.from_config(base)


@pytest.mark.parametrize("kw, match", [
    ({"sasl_mechanism": "GSSAPI"}, "Kerberos"),
    ({"sasl_mechanism": "NTLM"}, "not supported"),
    ({"sasl_mechanism": None}, "needs sasl_mechanism"),
    ({"sasl_plain_password": None}, "sasl_plain_password"),
    ({"sasl_mechanism": "OAUTHBEARER"}, "sasl_oauth_token_provider"),
])
def test_configuration_errors(kw: dict, match: str) -> None:
    with pytest.raises(errors.KafkaConfigurationError, match=match):
        create_mechanism(config(**kw))


@pytest.mark.parametrize("engine", ["classic", "consumer"])
@pytest.mark.parametrize("kw, match", [
    ({"sasl_mechanism": "GSSAPI"}, "Kerberos"),
    ({"sasl_mechanism": "SCRAM-SHA-256"}, "sasl_plain_username"),
])
def test_unusable_sasl_settings_fail_at_consumer_construction(engine: str, kw: dict, match: str) -> None:
    from kproto import KafkaConsumer
    with pytest.raises(errors.KafkaConfigurationError, match=match):
        KafkaConsumer(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_PLAINTEXT",
                      group_protocol=engine, **kw)


# --- the authenticator's state machine ------------------------------------------------


def run_exchange(server, authenticator: SaslClientAuthenticator, lifetime_ms: int = 0) -> None:
    """Answer the authenticator's requests as a broker fronting ``server`` would."""
    request, version = authenticator.start()
    assert (type(request).__name__, version, request.mechanism) == ("SaslHandshakeRequest", 1, "SCRAM-SHA-512")
    assert authenticator.state is SaslState.RECEIVE_HANDSHAKE_RESPONSE
    step = authenticator.on_response(SaslHandshakeResponse(error_code=0, mechanisms=["SCRAM-SHA-512"]))
    assert authenticator.state is SaslState.INITIAL
    request, version = step
    assert version == 2
    server.set_client_first(request.auth_bytes.decode())
    step = authenticator.on_response(SaslAuthenticateResponse(auth_bytes=server.get_server_first().encode()))
    assert authenticator.state is SaslState.INTERMEDIATE
    server.set_client_final(step[0].auth_bytes.decode())
    done = authenticator.on_response(SaslAuthenticateResponse(auth_bytes=server.get_server_final().encode(),
                                                              session_lifetime_ms=lifetime_ms))
    assert done is None


def test_authenticator_full_exchange_and_session_lifetime() -> None:
    auth = SaslClientAuthenticator(ScramMechanism("SCRAM-SHA-512", "bob", "pw"), ALL_VERSIONS, node_id=1)
    run_exchange(scramp_server("SCRAM-SHA-512", "bob", "pw"), auth, lifetime_ms=60_000)
    assert auth.complete and auth.state is SaslState.COMPLETE
    assert auth.session_lifetime_ms == 60_000


def test_authenticator_uses_v0_authenticate_when_that_is_all() -> None:
    auth = SaslClientAuthenticator(PlainMechanism("u", "p"), {17: (0, 1), 36: (0, 0)})
    auth.start()
    request, version = auth.on_response(SaslHandshakeResponse(mechanisms=["PLAIN"]))
    assert version == 0 and request.auth_bytes == b"\x00u\x00p"
    assert auth.on_response(SaslAuthenticateResponse()) is None and auth.complete


def test_unsupported_mechanism_names_the_brokers_mechanisms() -> None:
    auth = SaslClientAuthenticator(PlainMechanism("u", "p"), ALL_VERSIONS, node_id=3)
    auth.start()
    with pytest.raises(errors.UnsupportedSaslMechanismError, match="SCRAM-SHA-256, SCRAM-SHA-512") as info:
        auth.on_response(SaslHandshakeResponse(error_code=33, mechanisms=["SCRAM-SHA-256", "SCRAM-SHA-512"]))
    assert isinstance(info.value, errors.AuthenticationError) and not info.value.retriable
    assert auth.state is SaslState.FAILED


@pytest.mark.parametrize("code, match", [
    # A listener without SASL (Kafka 4.4's PLAINTEXT listener answers so, measured).
    (34, r"node 3: unexpected handshake request with client mechanism PLAIN, enabled mechanisms are \[\]"),
    (2, r"node 3: unknown error code 2 in SaslHandshake, client mechanism is PLAIN"),
])
def test_other_handshake_errors_are_illegal_sasl_state_naming_the_mechanism(code, match) -> None:
    """Java's SaslClientAuthenticator.handleSaslHandshakeResponse: IllegalSaslStateException
    for ILLEGAL_SASL_STATE and any other code, naming both sides' mechanisms."""
    auth = SaslClientAuthenticator(PlainMechanism("u", "p"), ALL_VERSIONS, node_id=3)
    auth.start()
    with pytest.raises(errors.IllegalSaslStateError, match=match) as info:
        auth.on_response(SaslHandshakeResponse(error_code=code, mechanisms=[]))
    assert isinstance(info.value, errors.AuthenticationError) and not info.value.retriable
    assert auth.state is SaslState.FAILED


def test_authentication_failed_code_is_a_sasl_authentication_error() -> None:
    auth = SaslClientAuthenticator(PlainMechanism("u", "p"), ALL_VERSIONS)
    auth.start()
    auth.on_response(SaslHandshakeResponse(mechanisms=["PLAIN"]))
    with pytest.raises(errors.SaslAuthenticationError, match="Invalid username or password") as info:
        auth.on_response(SaslAuthenticateResponse(error_code=58, error_message="Invalid username or password"))
    assert isinstance(info.value, errors.SaslAuthenticationFailedError)
    assert auth.state is SaslState.FAILED and auth.error is info.value


def test_broker_without_sasl_authenticate_is_refused() -> None:
    auth = SaslClientAuthenticator(PlainMechanism("u", "p"), {17: (0, 0)})
    with pytest.raises(errors.SaslAuthenticationError, match="SaslAuthenticate"):
        auth.start()


def test_response_in_wrong_state_is_illegal_sasl_state() -> None:
    auth = SaslClientAuthenticator(PlainMechanism("u", "p"), ALL_VERSIONS)
    with pytest.raises(errors.IllegalSaslStateError):
        auth.on_response(SaslAuthenticateResponse())


def test_wire_trace_redacts_sasl_tokens() -> None:
    from kproto.messages import SaslAuthenticateRequest
    from kproto.net.wire import field_tree
    tree = field_tree(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00hunter2"))
    assert "hunter2".encode().hex() not in tree and "hunter2" not in tree
    assert "14 bytes, redacted" in tree
