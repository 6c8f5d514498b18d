"""ApiVersions: which API versions the network client may use with each node.

Owns the ApiVersions negotiation of every new connection and the version choice that
follows from it (Java's ``ApiVersions``/``NodeApiVersions`` with ``NetworkClient``'s
``handleApiVersionsResponse``): the first request asks with kproto's highest ApiVersions
version (v5 names the cluster and broker id the client expects once a broker of the
cluster has advertised v5, KIP-1242: a REBOOTSTRAP_REQUIRED answer fails the connection
and asks for a rebootstrap); an UNSUPPORTED_VERSION answer is retried with the broker's advertised ApiVersions
maximum (KIP-511), else with v0, and a broker refusing v0 too fails the connection. The
answer's (min, max) per API key is stored on the node's
:class:`~kproto.net.broker.BrokerConnection` (``api_versions``), where the SASL
authenticator, the metadata updater and the send path read it; on a ``SASL_*`` connection
the node is handed to the :class:`~kproto.net.channel_authenticator.ChannelAuthenticator`
instead of being marked ready.

It is handed the network client's :class:`~kproto.net.client_state.ClientState` (the
node table, the tags of internal requests), the SASL start hook and the metadata updater's
rebootstrap request, and is called from the
client's poll loop (or public methods) under the client's lock.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from kproto import errors
from kproto.messages import API_KEYS, ApiVersionsRequest
from kproto.net.broker import BrokerConnection
from kproto.net.client_state import ClientState
from kproto.net.client_versions import client_max_version, highest_common_version
from kproto.net.connection import InFlightRequest

log = logging.getLogger("kproto.net")

#: The tag of ApiVersions requests in the client's table of internal requests.
API_VERSIONS = "api_versions"

#: Versions known on a ``SASL_*`` connection: start authenticating it (True), or there is
#: nothing to do (False). :meth:`ChannelAuthenticator.start`.
StartAuthentication = Callable[[BrokerConnection, dict[int, tuple[int, int]], float], bool]

_API_VERSIONS_KEY = ApiVersionsRequest.api_key


class ApiVersions:
    """ApiVersions negotiation and version choice for a network client's nodes."""

    def __init__(self, state: ClientState, start_authentication: StartAuthentication,
                 request_rebootstrap: Callable[[], None] = lambda: None) -> None:
        self._state = state
        self._start_authentication = start_authentication
        # MetadataUpdater.request_rebootstrap: a broker answered REBOOTSTRAP_REQUIRED.
        self._request_rebootstrap = request_rebootstrap
        # Has a broker of this cluster advertised ApiVersions v5? Only then do requests
        # carry the cluster and node ids: a broker without v5 that parses the body anyway
        # (Tansu reads it with its v4 layout) takes the ids for garbage and hangs up.
        self._peers_check_cluster = False

    # --- negotiation (Java's NetworkClient.handleApiVersionsResponse) -----------------

    def start(self, node: BrokerConnection, now: float) -> None:
        """A connection is up: ask the node for its versions, highest ApiVersions first."""
        self._send(node, client_max_version(ApiVersionsRequest), now)

    def _send(self, node: BrokerConnection, version: int, now: float) -> None:
        config = self._state.config
        request = ApiVersionsRequest(client_software_name=config.client_software_name,
                                     client_software_version=config.client_software_version)
        cluster = self._state.cluster
        broker_id = cluster.broker_id_of(node.node_id)
        if version >= 5 and self._peers_check_cluster and cluster.cluster_id is not None \
                and broker_id is not None and str(config.metadata_recovery_strategy).lower() == "rebootstrap":
            # KIP-1242: a broker that is not this node of this cluster (the address now
            # belongs to another one) answers REBOOTSTRAP_REQUIRED instead of serving us.
            request.cluster_id, request.node_id = cluster.cluster_id, broker_id
        assert node.proto is not None  # ApiVersions is the first request on a connected socket
        ifr = node.proto.send(request, version, now_ms=now, timeout_ms=config.request_timeout_ms)
        self._state.track_internal(ifr, API_VERSIONS)
        node.write(now)

    def handle_response(self, node: BrokerConnection, ifr: InFlightRequest, response: Any,
                        now: float) -> None:
        """The node's ApiVersions answer; raises its error when negotiation cannot go on."""
        versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        if versions.get(_API_VERSIONS_KEY, (0, 0))[1] >= 5:
            self._peers_check_cluster = True
        if response.error_code == errors.ErrorCode.UNSUPPORTED_VERSION:
            # KIP-511: the broker said which ApiVersions versions it has; else fall back to v0.
            broker = versions.get(_API_VERSIONS_KEY)
            retry = min(broker[1], client_max_version(ApiVersionsRequest)) if broker else 0
            if retry >= ifr.api_version:
                retry = 0 if ifr.api_version > 0 else -1
            if retry >= 0:
                log.debug("node %s: ApiVersions v%d unsupported; retrying with v%d",
                          node.node_id, ifr.api_version, retry)
                self._send(node, retry, now)
                return
        if response.error_code == errors.ErrorCode.REBOOTSTRAP_REQUIRED:
            log.info("node %s is not the broker the metadata named: rebootstrapping", node.node_id)
            self._request_rebootstrap()
        if response.error_code:
            raise errors.for_code(response.error_code)(
                "ApiVersions v{} to node {}".format(ifr.api_version, node.node_id))
        if self._start_authentication(node, versions, now):
            return  # ready once SASL completes
        node.negotiated(versions)
        log.debug("node %s: ready (%d APIs)", node.node_id, len(versions))

    # --- version choice (Java's NodeApiVersions / ApiVersions) ------------------------

    @staticmethod
    def latest_usable_version(node: BrokerConnection, request_class: Any) -> int:
        """The version to send ``request_class`` in to a negotiated node, or
        ``UnsupportedVersionError`` when the two sides share none."""
        version = highest_common_version(request_class, node.api_versions)
        if version is None:
            raise errors.UnsupportedVersionError(
                "node {} supports no version of {} that kproto has".format(
                    node.node_id, request_class.__name__))
        return version

    def usable_version(self, api_key: int, node_id: Any = None) -> int | None:
        """The highest version of an API usable with the node (or with every ready node);
        None when a node's versions are unknown or it has no version kproto has."""
        request_class = API_KEYS[api_key][0]
        nodes = self._state.nodes
        targets = ([nodes.get(node_id)] if node_id is not None
                   else [n for n in nodes.values() if n.is_ready()])
        best = None
        for node in targets:
            if node is None or not node.api_versions:
                return None
            version = highest_common_version(request_class, node.api_versions)
            if version is None:
                return None
            best = version if best is None else min(best, version)
        return best

    def node_api_versions(self, node_id: Any) -> dict[int, tuple[int, int]]:
        """A copy of the (min, max) versions the node advertised, by API key ({} if none)."""
        node = self._state.nodes.get(node_id)
        return dict(node.api_versions) if node is not None else {}
