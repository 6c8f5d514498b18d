"""MetadataUpdater: when and where the network client sends Metadata requests.

Owns the client's side of the metadata refresh loop (Java's
``NetworkClient.DefaultMetadataUpdater``): at most one Metadata request in flight, sent
to the least-loaded node when :meth:`ClusterMetadata.ttl` says a refresh is due (opening a
connection first if none is ready), its answer or failure handed to the
:class:`~kproto.net.metadata.ClusterMetadata`. When every known broker has failed and is
in reconnect backoff, whoever waits for the refresh gets ``NoBrokersAvailable`` (the
refresh stays due and is tried again once a node may connect), or the brokers'
``AuthenticationError`` when that is why every one of them failed.

A connection the broker (or the network) closed asks for a refresh, since the disconnect
may be the result of stale metadata (Java's ``handleServerDisconnect``); the connection a
due refresh was waiting for (none in flight) counts as a failed attempt when it closes, so
the backoff between Metadata requests still holds: a broker that keeps refusing
connections cannot cause a storm of refreshes. (Java counts any disconnect while a
refresh is due; with a node refusing reconnects every few ms that starves the refresh,
so kproto counts only the one it waited for.) Its waiters are failed then only when no
node is left to try (``NoBrokersAvailable``, as above). That refresh does not reset the
backoff grown by equivalent answers (KIP-580, Java's ``requestUpdate(false)``), and
failed attempts in a row back off exponentially up to ``retry_backoff_max_ms``.

Rebootstrap (KIP-899 and KIP-1102, ``metadata_recovery_strategy="rebootstrap"``, Java's
``NetworkClient`` rules): the client forgets the brokers its metadata named and goes back
to ``bootstrap_servers`` (their names resolved again) when a due refresh finds no broker
it may try (all in reconnect backoff), when refreshes have been failing for longer than
``metadata_recovery_rebootstrap_trigger_ms`` since the first attempt (connections to the
metadata's brokers are closed first), or when a broker answers REBOOTSTRAP_REQUIRED
(Metadata v13's top-level error, or ApiVersions v5's when the cluster or node id the
client gave is not the broker's: KIP-1242). With ``"none"`` the client keeps trying the
brokers it knows.

It is handed the network client's :class:`~kproto.net.client_state.ClientState` (the
node table it reads and sends on, the metadata, the tags of internal requests) and runs
only inside the client's poll loop, under the client's lock.
"""

from __future__ import annotations

import logging
from typing import Any

from kproto import errors
from kproto.messages import MetadataRequest
from kproto.net.broker import ConnectionState
from kproto.net.client_state import ClientState
from kproto.net.client_versions import highest_common_version
from kproto.net.metadata import build_metadata_request

log = logging.getLogger("kproto.net.metadata")

#: The tag of the client's own Metadata requests in its table of internal requests.
METADATA = "metadata"


class MetadataUpdater:
    """Sends Metadata requests for a network client when its cluster needs them."""

    def __init__(self, state: ClientState) -> None:
        self._state = state
        self.in_flight: Any = None  # node id of the Metadata request out, if any
        # Node id whose connection a due refresh waits for (to send its request on), if any.
        self.connecting: Any = None
        self._asked = (0, False)  # (request version, all topics?) of the request out
        strategy: Any = state.config.metadata_recovery_strategy
        trigger: Any = state.config.metadata_recovery_rebootstrap_trigger_ms
        if not isinstance(strategy, str) or strategy.lower() not in ("rebootstrap", "none"):
            raise errors.KafkaConfigurationError(
                "metadata_recovery_strategy must be 'rebootstrap' or 'none', not {!r}".format(strategy))
        if isinstance(trigger, bool) or not isinstance(trigger, (int, float)) or trigger < 0:
            raise errors.KafkaConfigurationError(
                "metadata_recovery_rebootstrap_trigger_ms must be a number >= 0, not {!r}".format(trigger))
        self.rebootstrap_enabled = strategy.lower() == "rebootstrap"
        self._rebootstrap_trigger_ms = trigger
        # Java's metadataAttemptStartMs: when the refreshes failing since the last answer
        # began (None: the last one succeeded); -inf forces a rebootstrap.
        self._attempt_start_ms: float | None = None
        self.rebootstrap_count = 0

    def maybe_update(self, now: float) -> float:
        """Send a Metadata request when one is due; return ms until the next check."""
        state = self._state
        cluster = state.cluster
        self._maybe_rebootstrap_after_trigger(now)
        if self.in_flight is not None:
            return float("inf")
        ttl = cluster.ttl(now)
        if ttl > 0:
            return ttl
        if self._attempt_start_ms is None:
            self._attempt_start_ms = now
        node_id = state.least_loaded_node()
        if node_id is None and self.rebootstrap_enabled and not cluster.on_bootstrap_servers():
            # KIP-899: no broker the metadata named may be tried now.
            self.rebootstrap(now)
            node_id = state.least_loaded_node()
        if node_id is None:
            return self._no_node(now)
        node = state.node(node_id)
        if not node.is_ready():
            state.maybe_connect(node_id)
            self.connecting = node_id
            return float("inf") if node.state is not ConnectionState.DISCONNECTED else \
                node.connection_delay(now)
        assert node.proto is not None  # a ready node has its framing
        if not node.proto.can_send_more():
            return float("inf")
        version = highest_common_version(MetadataRequest, node.api_versions)
        if version is None:
            cluster.failed_update(errors.UnsupportedVersionError("Metadata"), now)
            return cluster.ttl(now)
        try:
            topics = cluster.topics_of_interest()
            request = build_metadata_request(topics, version, state.config.allow_auto_create_topics)
            ifr = node.proto.send(request, version, now_ms=now,
                                  timeout_ms=state.config.request_timeout_ms)
        except errors.KafkaError as exc:  # e.g. a topic name that cannot be encoded
            cluster.failed_update(exc, now)
            return cluster.ttl(now)
        state.track_internal(ifr, METADATA)
        self.in_flight = node_id
        self.connecting = None
        self._asked = (cluster.request_version, topics is None)
        return float("inf")

    def _no_node(self, now: float) -> float:
        # Every candidate failed and is backing off: whoever waits for this refresh learns
        # it now; wake when the first node may connect again.
        state = self._state
        nodes = [state.nodes[b.node_id] for b in state.cluster.brokers()
                 if b.node_id in state.nodes]
        causes = [n.last_error for n in nodes if n.last_error is not None]
        if nodes and len(causes) == len(nodes) and all(
                isinstance(c, errors.AuthenticationError) for c in causes):
            # Every broker refused our credentials: that, not "retry later", is the answer.
            state.cluster.failed_update(causes[-1], now)
            return max(min(n.connection_delay(now) for n in nodes), 1.0)
        exc = errors.NoBrokersAvailable("no broker could be reached for metadata ({} tried){}".format(
            len(nodes), ": {}".format(causes[-1]) if causes else ""))
        if causes:
            exc.__cause__ = causes[-1]
        state.cluster.failed_update(exc, now)
        delay = min((n.connection_delay(now) for n in nodes), default=0.0)
        return max(delay, float(state.config.reconnect_backoff_ms), 1.0)

    def handle_response(self, response: Any, now: float) -> None:
        self.in_flight = None
        code = getattr(response, "error_code", 0)  # Metadata v13+
        if code:
            exc = errors.for_code(code)("Metadata request failed")
            if code == errors.ErrorCode.REBOOTSTRAP_REQUIRED:
                log.info("the broker asked for a rebootstrap (REBOOTSTRAP_REQUIRED)")
                self.request_rebootstrap()
            self._state.cluster.failed_update(exc, now)
            return
        self._attempt_start_ms = None
        version, asked_all = self._asked
        self._state.cluster.update(response, now, request_version=version, asked_all=asked_all)

    # --- rebootstrap (KIP-899, KIP-1102) -------------------------------------------------

    def request_rebootstrap(self) -> None:
        """A broker answered REBOOTSTRAP_REQUIRED: rebootstrap on the next poll (Java's
        ``initiateRebootstrap``); nothing with strategy ``"none"``."""
        self._attempt_start_ms = -float("inf")

    def _maybe_rebootstrap_after_trigger(self, now: float) -> None:
        # KIP-1102: no metadata for longer than the trigger (or a broker asked for it).
        start = self._attempt_start_ms
        if self.rebootstrap_enabled and start is not None and now - start > self._rebootstrap_trigger_ms:
            self.rebootstrap(now)

    def rebootstrap(self, now: float) -> None:
        """Close the connections to the brokers the metadata named, forget them, and
        start again from ``bootstrap_servers`` (resolved again)."""
        state = self._state
        cluster = state.cluster
        for broker in cluster.brokers():
            node = state.nodes.get(broker.node_id)
            if not cluster.is_bootstrap(broker.node_id) and node is not None \
                    and node.state is not ConnectionState.DISCONNECTED:
                log.info("disconnecting from node %s: rebootstrap", broker.node_id)
                state.close_by_client(broker.node_id, now)
        cluster.rebootstrap()
        for broker in cluster.brokers():
            node = state.nodes.get(broker.node_id)
            if node is not None and node.state is ConnectionState.DISCONNECTED:
                node.forget_addresses()
        self._attempt_start_ms = now
        self.rebootstrap_count += 1

    def handle_server_disconnect(self, node_id: Any, now: float) -> None:
        """A connection closed other than by the client's own request (refused, reset,
        timed out, failed authentication): Java's ``DefaultMetadataUpdater.handleServerDisconnect``.
        Called after the connection's requests failed, so a Metadata request it carried has
        already been counted as a failed attempt (the refresh is then not due again yet)."""
        cluster = self._state.cluster
        if self.in_flight is None and node_id == self.connecting and cluster.ttl(now) <= 0:
            # The connection a due refresh was waiting for failed: count it as a failed
            # attempt, for the backoff, without failing anyone who waits. Unlike Java, which
            # counts any disconnect while a refresh is due, another node's disconnect does
            # not: a broker refusing reconnects every few ms would otherwise land one in the
            # poll where the refresh falls due, every time, and starve it (seen on the mock).
            # The last node it could use gone, its waiters learn it now, as maybe_update
            # would tell them (the backoff just set would delay that).
            self.connecting = None
            if self._state.least_loaded_node() is None:
                self._no_node(now)
            else:
                cluster.record_failed_attempt(now)
        log.debug("node %s disconnected: requesting a metadata refresh", node_id)
        # A retry for fresher leaders, not new metadata (Java's requestUpdate(false)).
        cluster.request_update_no_wait(reset_equivalent=False)

    def handle_failure(self, exc: BaseException, now: float) -> None:
        """The connection carrying the Metadata request closed (or the request timed out)."""
        self.in_flight = None
        self._state.cluster.failed_update(exc, now)
