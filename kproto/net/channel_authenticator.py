"""ChannelAuthenticator: the network client's side of SASL on its connections.

Owns what happens between a ``SASL_*`` connection's ApiVersions answer and the moment it
is ready (Java's ``KafkaChannel.prepare`` with its ``SaslClientAuthenticator``): starting
:class:`~kproto.net.sasl.SaslClientAuthenticator` on the node (state AUTHENTICATING),
sending its SaslHandshake/SaslAuthenticate requests as the client's internal requests,
marking the node ready when it completes, the renewal time of a session with a lifetime
(KIP-368), and failures: an error during authentication, the broker hanging up included,
becomes the node's ``AuthenticationError``, kept until the next ``poll()`` raises it
(Java's ``authenticationException(node)`` and Metadata's fatal error). A TLS handshake
that fails verification (``SslAuthenticationError`` from
:class:`~kproto.net.broker.BrokerConnection`, on any ``SSL``/``SASL_SSL`` connection)
takes the same way.

It is handed the network client's :class:`~kproto.net.client_state.ClientState` (its
configuration, metadata, the tags of internal requests and the close hook) and is called
from the client's poll loop under its lock.
"""

from __future__ import annotations

import logging
import random
from typing import Any, Optional

from kproto import errors
from kproto.net.broker import BrokerConnection, ConnectionState
from kproto.net.client_state import ClientState
from kproto.net.sasl import SaslClientAuthenticator, check_sasl_config, create_mechanism
from kproto.net.tls import SASL_PROTOCOLS

log = logging.getLogger("kproto.net")

#: The tag of SASL requests in the client's table of internal requests.
SASL = "sasl"


class ChannelAuthenticator:
    """SASL for a network client's connections (a no-op without ``SASL_*``)."""

    def __init__(self, state: ClientState) -> None:
        self._state = state
        self.enabled = str(state.config.security_protocol).upper() in SASL_PROTOCOLS
        if self.enabled:
            check_sasl_config(state.config)  # a bad setting fails at construction
        # An authentication failure poll() has not raised yet.
        self.fatal_error: Optional[errors.KafkaError] = None

    def take_fatal_error(self) -> Optional[errors.KafkaError]:
        error, self.fatal_error = self.fatal_error, None
        return error

    def start(self, node: BrokerConnection, api_versions: dict[Any, Any], now: float) -> bool:
        """ApiVersions done: begin authenticating (True), or nothing to do (False)."""
        if not self.enabled:
            return False
        authenticator = SaslClientAuthenticator(create_mechanism(self._state.config), api_versions,
                                                node.node_id, "{}:{}".format(node.host, node.port))
        node.authenticating(api_versions, authenticator)
        log.debug("node %s: API versions known; authenticating with %s", node.node_id,
                  authenticator.mechanism.name)
        self._send(node, authenticator.start(), now)
        return True

    def _send(self, node: BrokerConnection, request: tuple[Any, int], now: float) -> None:
        message, version = request
        assert node.proto is not None  # authentication starts once the socket connected
        ifr = node.proto.send(message, version, now_ms=now,
                              timeout_ms=self._state.config.request_timeout_ms)
        self._state.track_internal(ifr, SASL)
        node.write(now)

    def on_response(self, node: BrokerConnection, response: Any, now: float) -> None:
        """A SaslHandshake/SaslAuthenticate answer; raises ``AuthenticationError``."""
        authenticator = node.authenticator
        if authenticator is None:  # a late answer on a connection already reset
            return
        following = authenticator.on_response(response)
        if following is not None:
            self._send(node, following, now)
            return
        node.negotiated(node.api_versions)
        lifetime = authenticator.session_lifetime_ms
        if lifetime > 0:
            # KIP-368: renew at 85-95% of the lifetime (jittered so many connections do not
            # reconnect at once).
            node.reauthenticate_at_ms = now + lifetime * random.uniform(0.85, 0.95)
        log.debug("node %s: ready after SASL %s", node.node_id, authenticator.mechanism.name)

    @staticmethod
    def connection_error(node: BrokerConnection, exc: errors.KafkaError) -> errors.KafkaError:
        """The error to report for a connection that failed while authenticating."""
        authenticator = node.authenticator
        if (node.state is not ConnectionState.AUTHENTICATING or authenticator is None
                or isinstance(exc, errors.AuthenticationError)):
            return exc
        if authenticator.error is not None:
            # The broker's verdict arrived with (or just before) its hang-up: keep it.
            return authenticator.error
        if not isinstance(exc, errors.KafkaConnectionError):
            return exc
        # Kafka brokers (and Tansu) close the socket on a failed SASL exchange, e.g. an
        # unknown user or a mechanism they do not enable: not a network blip to retry.
        auth_error = errors.SaslAuthenticationError(
            "node {} ({}:{}) closed the connection during {} authentication (bad credentials, "
            "or a mechanism the broker does not enable?): {}".format(
                node.node_id, node.host, node.port, authenticator.mechanism.name, exc))
        auth_error.__cause__ = exc
        return authenticator.fail(auth_error)

    def failed(self, node: BrokerConnection, exc: errors.KafkaError, now: float) -> None:
        """Java's AUTHENTICATION_FAILED channel state: fatal, reported, backed off."""
        # The next poll() raises it (the message names the node): logged at INFO so it is
        # not reported twice, e.g. by the CLI, which prints it as its one error line.
        log.info("node %s (%s:%s): authentication failed: %s", node.node_id, node.host, node.port, exc)
        self._state.close_node(node, now, exc, failed=True)
        self.fatal_error = exc
        # Whoever waits for metadata (partitions_for_topic, joins) learns it now instead of
        # retrying until its deadline.
        self._state.cluster.failed_update(exc, now)
