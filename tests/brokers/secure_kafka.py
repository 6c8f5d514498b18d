"""Kafka 4.4 with a listener for every security mode the suite tests, in one JVM.

Owns :class:`SecureKafka`: a :class:`~tests.brokers.maven_kafka.MavenKafka` (one KRaft combined
node from the test ground) whose PLAINTEXT listener (inter-broker, admin, seeding) is
joined by Kafka's own TLS and SASL listeners:

==============  =================  ========================================================
listener        security protocol  what it is for
==============  =================  ========================================================
SSL             SSL                server authentication only
MTLS            SSL                ``ssl.client.auth=required`` (client certificates)
MTLS12          SSL                the same, TLS 1.2 only (the refusal comes in the
                                   handshake, not after it as under TLS 1.3)
SASL_PLAINTEXT  SASL_PLAINTEXT     PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
SASL_SSL        SASL_SSL           the same mechanisms inside TLS
SHORT_SESSION   SASL_PLAINTEXT     SCRAM-SHA-512 only (another mechanism is refused with
                                   the enabled list), sessions of
                                   :data:`SHORT_SESSION_MS` (KIP-368: the broker closes a
                                   connection whose session expired)
==============  =================  ========================================================

Certificates are files the caller made (PEM: Kafka 4 reads them as ``ssl.keystore.type=PEM``
and ``ssl.truststore.type=PEM``, no keytool step). The TLS listeners advertise
``localhost`` (the name the server certificate carries), the others ``127.0.0.1``.

Users: PLAIN's come from the listener's JAAS config (``user_<name>="<password>"``,
``PlainLoginModule``'s own store); SCRAM's are written into the cluster metadata by
``StorageTool format --add-scram`` (Kafka's own tool) before the first start; OAUTHBEARER
takes unsecured JWS tokens (``alg: none``), checked by Kafka's default server handler for
them (``OAuthBearerUnsecuredValidatorCallbackHandler``: a ``sub`` claim, ``exp`` in the
future). Every mechanism is set per listener
(``listener.name.<listener>.<mechanism>.sasl.jaas.config``).
"""

from __future__ import annotations

import base64
import json
import time

from tests.brokers._net import free_ports
from tests.brokers.maven_kafka import MavenKafka

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SASL_LISTENERS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_LISTENERS = ("SSL", "MTLS", "MTLS12", "SASL_SSL")
#: listener name -> security protocol (the PLAINTEXT and CONTROLLER ones are MavenKafka's).
LISTENERS = {"SSL": "SSL", "MTLS": "SSL", "MTLS12": "SSL",
             "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL",
             "SHORT_SESSION": "SASL_PLAINTEXT"}
#: The session lifetime of the SHORT_SESSION listener (``connections.max.reauth.ms``).
SHORT_SESSION_MS = 2000

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}


def unsecured_jws(subject: str, lifetime_s: float = 3600.0, **claims: object) -> str:
    """An unsecured JWS (RFC 7515 with ``alg: none``, an empty signature) naming
    ``subject``: what Kafka's unsecured OAUTHBEARER validator accepts and librdkafka's
    ``enable.sasl.oauthbearer.unsecure.jwt`` makes."""
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    now = time.time()
    body = {"sub": subject, "iat": int(now), "exp": int(now + lifetime_s), **claims}
    return "{}.{}.".format(part({"alg": "none"}), part(body))


class SecureKafka(MavenKafka):
    """One Kafka 4.4 node with :data:`LISTENERS` beside its PLAINTEXT one.

    ``server_cert``/``server_key``: the broker's PEM certificate and (unencrypted PKCS#8)
    key; ``client_ca``: the PEM certificate(s) MTLS/MTLS12 trust for client certificates.
    ``plain_users`` and ``scram_users`` (``{mechanism: {user: password}}``) are the
    accounts. ``address(listener)`` is the listener's ``host:port``.
    """

    def __init__(self, server_cert: str, server_key: str, client_ca: str,
                 plain_users: dict[str, str], scram_users: dict[str, dict[str, str]],
                 startup_timeout: float = 120.0) -> None:
        self.server_cert, self.server_key, self.client_ca = server_cert, server_key, client_ca
        self.plain_users = dict(plain_users)
        self.scram_users = {m: dict(u) for m, u in scram_users.items()}
        self.ports: dict[str, int] = {}  # chosen with the others' (_more_settings)
        super().__init__(startup_timeout=startup_timeout)

    def address(self, listener: str) -> str:
        """The advertised ``host:port`` of one of :data:`LISTENERS` (or PLAINTEXT)."""
        if listener == "PLAINTEXT":
            return self.bootstrap_servers
        return "{}:{}".format(self._host(listener), self.ports[listener])

    @staticmethod
    def _host(listener: str) -> str:
        return "localhost" if listener in TLS_LISTENERS else "127.0.0.1"

    def _more_settings(self, controller_port: int) -> dict[str, str]:
        # Ports free a moment ago may repeat (Kafka refuses two listeners on one port).
        taken = {self.port, controller_port}
        ports = [p for p in free_ports(len(LISTENERS) + 2) if p not in taken]
        for name, port in zip(LISTENERS, ports):
            self.ports[name] = port
        listeners = {"PLAINTEXT": self.port, "CONTROLLER": controller_port, **self.ports}
        settings = {
            "listeners": ",".join("{}://127.0.0.1:{}".format(n, p) for n, p in listeners.items()),
            "advertised.listeners": ",".join(
                ["PLAINTEXT://127.0.0.1:{}".format(self.port)]
                + ["{}://{}:{}".format(n, self._host(n), p) for n, p in self.ports.items()]),
            "listener.security.protocol.map": ",".join(
                ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
                + ["{}:{}".format(n, proto) for n, proto in LISTENERS.items()]),
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        }
        for name in TLS_LISTENERS:
            prefix = "listener.name.{}.".format(name.lower())
            settings.update({
                prefix + "ssl.keystore.type": "PEM",
                prefix + "ssl.keystore.certificate.chain": _pem_value(self.server_cert),
                prefix + "ssl.keystore.key": _pem_value(self.server_key),
            })
        for name in ("MTLS", "MTLS12"):
            prefix = "listener.name.{}.".format(name.lower())
            settings.update({
                prefix + "ssl.client.auth": "required",
                prefix + "ssl.truststore.type": "PEM",
                prefix + "ssl.truststore.location": self.client_ca,
            })
        settings["listener.name.mtls12.ssl.enabled.protocols"] = "TLSv1.2"
        settings["listener.name.mtls12.ssl.protocol"] = "TLSv1.2"
        for name in SASL_LISTENERS:
            prefix = "listener.name.{}.".format(name.lower())
            settings[prefix + "sasl.enabled.mechanisms"] = ",".join(MECHANISMS)
            for mechanism in MECHANISMS:
                settings["{}{}.sasl.jaas.config".format(prefix, mechanism.lower())] = \
                    self._jaas(mechanism)
        prefix = "listener.name.short_session."
        settings.update({
            prefix + "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            prefix + "scram-sha-512.sasl.jaas.config": self._jaas("SCRAM-SHA-512"),
            prefix + "scram-sha-512.connections.max.reauth.ms": str(SHORT_SESSION_MS),
        })
        return settings

    def _jaas(self, mechanism: str) -> str:
        options = ""
        if mechanism == "PLAIN":
            options = "".join(' user_{}="{}"'.format(u, p) for u, p in self.plain_users.items())
        return "{} required{};".format(_LOGIN_MODULES[mechanism], options)

    def _format_args(self) -> tuple[str, ...]:
        args: list[str] = []
        for mechanism, users in self.scram_users.items():
            for user, password in users.items():
                args += ["--add-scram", "{}=[name={},password={}]".format(mechanism, user, password)]
        return tuple(args)


def _pem_value(path: str) -> str:
    """A PEM file as one server.properties value (newlines escaped as ``\\n``, which the
    properties format reads back as newlines)."""
    with open(path) as f:
        return f.read().strip().replace("\n", "\\n")
