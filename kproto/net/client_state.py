"""ClientState: the part of the network client its helpers may see and change.

Owns the node table (one :class:`~kproto.net.broker.BrokerConnection` per node id:
Java's ``ClusterConnectionStates``, each node's ``InFlightRequests`` being its sans-IO
:class:`~kproto.net.connection.Connection`), the requests queued for nodes that are not
ready yet (``unsent``: ``ConsumerNetworkClient``'s ``UnsentRequests``), the outcomes
waiting to be delivered with no lock held (``completed``), the tags of the client's own
requests (``internal``: ApiVersions, SASL, Metadata), and two hooks the client hands in,
as Java's ``NetworkClient`` hands its ``DefaultMetadataUpdater`` the client:
``close_node`` (close a connection and settle the fate of its requests) and
``connection_error`` (a connection failed: try the next address, or close it).

:class:`~kproto.net.client.NetworkClient` builds one and gives it to its helpers
(:mod:`~kproto.net.api_versions`, :mod:`~kproto.net.timeouts`,
:mod:`~kproto.net.metadata_updater`, :mod:`~kproto.net.channel_authenticator`), which
touch nothing else of the client. Every method runs under the client's lock.
"""

from __future__ import annotations

import collections
import random
import ssl
from typing import Any, Callable, Optional, Protocol

from kproto import errors
from kproto.net.broker import BrokerConnection, ConnectionState
from kproto.net.config import NetworkClientConfig
from kproto.net.connection import InFlightRequest
from kproto.net.future import Future
from kproto.net.metadata import ClusterMetadata
from kproto.net.network_listener import NetworkListener

#: (future, value, error): an outcome to deliver once the client's lock is released.
Outcome = tuple[Future, Any, Optional[BaseException]]


class CloseNodeHook(Protocol):
    def __call__(self, node: BrokerConnection, now: float, exc: BaseException, *,
                 failed: bool, timed_out: set[int] | None = None) -> None: ...


ConnectionErrorHook = Callable[[BrokerConnection, errors.KafkaError, float], None]


class Unsent:
    """A request queued for a node and not written yet, with its own deadline."""

    __slots__ = ("request", "version", "future", "deadline_ms", "timeout_ms")

    def __init__(self, request: Any, version: int | None, future: Future, deadline_ms: float,
                 timeout_ms: float) -> None:
        self.request = request
        self.version = version
        self.future = future
        self.deadline_ms = deadline_ms
        self.timeout_ms = timeout_ms


class ClientState:
    """The node table, queues and close/error hooks shared by the client and its helpers."""

    def __init__(self, config: NetworkClientConfig, cluster: ClusterMetadata, *,
                 ssl_context: ssl.SSLContext | None, listener: NetworkListener | None,
                 clock: Callable[[], float], close_node: CloseNodeHook,
                 connection_error: ConnectionErrorHook) -> None:
        self.config = config
        self.cluster = cluster
        self.nodes: dict[Any, BrokerConnection] = {}
        self.unsent: dict[Any, collections.deque[Unsent]] = collections.defaultdict(collections.deque)
        self.completed: list[Outcome] = []
        # id(InFlightRequest.future) -> API_VERSIONS/SASL/METADATA: the client's own requests.
        self.internal: dict[int, str] = {}
        self._ssl_context = ssl_context
        self._listener = listener
        self._clock = clock
        #: Close ``node``'s connection: fail what it carried and what was queued for it
        #: (``timed_out``: the correlation ids that fail with ``RequestTimeoutError``);
        #: ``failed`` backs off and asks for a metadata refresh.
        self.close_node = close_node
        #: ``node`` failed with ``exc``: try its next address, or close it (fatal for an
        #: authentication failure).
        self.connection_error = connection_error

    def track_internal(self, ifr: InFlightRequest, kind: str) -> None:
        """Mark ``ifr`` as the client's own request of ``kind`` (its answer is not returned)."""
        self.internal[id(ifr.future)] = kind

    def node(self, node_id: Any) -> BrokerConnection:
        """The node's connection state, created from the metadata on first use."""
        node = self.nodes.get(node_id)
        broker = self.cluster.broker_metadata(node_id)
        if node is None:
            if broker is None:
                raise errors.UnknownBrokerIdError("node {} is not in the cluster metadata".format(node_id))
            node = BrokerConnection(node_id, broker.host, broker.port, self.config, self._ssl_context)
            node.listener = self._listener
            self.nodes[node_id] = node
        elif (broker is not None and node.state is ConnectionState.DISCONNECTED
              and (broker.host, broker.port) != (node.host, node.port)):
            node.host, node.port = broker.host, broker.port  # the broker moved
            node.forget_addresses()  # (the addresses resolved for the old ones)
        return node

    def close_by_client(self, node_id: Any, now: float) -> None:
        """Close the node's connection on the client's own decision (not counted as a
        failure, no metadata refresh); its requests fail with ``KafkaConnectionError``."""
        node = self.nodes.get(node_id)
        if node is not None:
            self.close_node(node, now, errors.KafkaConnectionError(
                "connection to node {} closed by the client".format(node_id)), failed=False)

    def maybe_connect(self, node_id: Any) -> None:
        """Start connecting to the node unless it is connected or backing off; a node the
        metadata does not know fails what was queued for it."""
        try:
            node = self.node(node_id)
        except errors.KafkaError as exc:
            for item in self.unsent.pop(node_id, ()):
                self.completed.append((item.future, None, exc))
            return
        now = self._clock()
        if not node.can_connect(now):
            return
        try:
            node.connect(now)
        except errors.KafkaError as exc:
            self.connection_error(node, exc, now)

    def least_loaded_node(self) -> Any:
        """A node to send to when any will do: fewest in flight among ready ones, else one
        that is connecting, else one that may connect now; None if all are backing off."""
        now = self._clock()
        candidates = [b.node_id for b in self.cluster.brokers()]
        random.shuffle(candidates)
        best, best_load = None, None
        connecting = connectable = None
        for node_id in candidates:
            node = self.nodes.get(node_id)
            if node is None or node.state is ConnectionState.DISCONNECTED:
                if connectable is None and (node is None or node.can_connect(now)):
                    connectable = node_id
                continue
            if node.is_ready():
                assert node.proto is not None  # a ready node has its framing
                load = node.proto.in_flight_count + len(self.unsent.get(node_id, ()))
                if best_load is None or load < best_load:
                    best, best_load = node_id, load
            elif connecting is None:
                connecting = node_id
        for choice in (best, connecting, connectable):
            if choice is not None:
                return choice
        return None
