"""The network client's deadlines: when each one fires, and how long ``poll()`` may sleep.

Owns the expiry rules of the network client, kept in one place
because the two functions must agree: every deadline :func:`handle_timeouts` acts on is
one :func:`next_timeout_ms` wakes ``select`` for, else it would fire only when unrelated
I/O happens. Per node, in this order (the first that fires ends the node's turn):

- connect: ``socket_connection_setup_timeout_ms`` while CONNECTING or in the TLS
  handshake; handled like any connection error, so the next DNS address is tried first
  (Java's ``NetworkClient.handleTimedOutConnections``);
- request: a request in flight past its ``request_timeout_ms`` closes the connection,
  whose state is unknown; the expired requests fail with ``RequestTimeoutError``, the rest
  with ``KafkaConnectionError`` (Java's ``handleTimedOutRequests``);
- SASL session renewal (KIP-368): when a session with a lifetime is nearly over and
  nothing is in flight, the connection is closed without a backoff penalty and the
  requests held back for the next session keep waiting for it;
- idle: a ready connection with nothing in flight or queued for
  ``connections_max_idle_ms`` closes without a backoff penalty and asks for a metadata
  refresh, as any server disconnect does (Java's ``Selector``/``IdleExpiryManager``);
- unsent: a request still queued (never written) past its own timeout fails with
  ``KafkaTimeoutError`` (Java's ``ConsumerNetworkClient.failExpiredRequests``).

Both functions are part of the client's poll loop, under its lock: they read and change
the node table and queues of its :class:`~kproto.net.client_state.ClientState` and close
connections through its hooks.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from kproto import errors
from kproto.net.broker import ConnectionState
from kproto.net.client_state import ClientState

log = logging.getLogger("kproto.net")

_CONNECTING = (ConnectionState.CONNECTING, ConnectionState.HANDSHAKE)


def next_timeout_ms(state: ClientState, now: float) -> float:
    """Ms until the nearest deadline of any node or queued request (0 if one passed)."""
    timeout = float("inf")
    idle_ms = state.config.connections_max_idle_ms
    for node_id, node in state.nodes.items():
        if node.state in _CONNECTING:
            timeout = min(timeout, node.connect_deadline_ms - now)
        if node.proto is not None:
            timeout = min(timeout, node.proto.next_deadline_ms() - now)
            if node.is_ready() and node.proto.in_flight_count == 0:
                timeout = min(timeout, node.last_activity_ms + idle_ms - now,
                              node.reauthenticate_at_ms - now)
        for item in state.unsent.get(node_id, ()):
            timeout = min(timeout, item.deadline_ms - now)
    return max(timeout, 0.0)


def handle_timeouts(state: ClientState, now: float,
                    server_disconnect: Callable[[Any, float], None]) -> None:
    """Act on every deadline that has passed (see the module docstring for the order).
    ``server_disconnect(node_id, now)`` hears of an idle connection closed (Java's
    ``MetadataUpdater.handleServerDisconnect``)."""
    for node in list(state.nodes.values()):
        if node.state in _CONNECTING and now >= node.connect_deadline_ms:
            state.connection_error(node, errors.KafkaConnectionError(
                "connecting to node {} ({}:{}) timed out".format(
                    node.node_id, node.host, node.port)), now)
            continue
        if node.proto is not None:
            expired = node.proto.expired(now)
            if expired:
                # The connection is in an unknown state (Java disconnects too).
                state.close_node(node, now, errors.KafkaConnectionError(
                    "connection to node {} closed after a request timeout".format(
                        node.node_id)), failed=True,
                    timed_out={ifr.correlation_id for ifr in expired})
                continue
            if (node.is_ready() and node.proto.in_flight_count == 0
                    and now >= node.reauthenticate_at_ms):
                # KIP-368 without re-authentication on the same socket: the session is
                # about to expire and nothing is in flight (new requests were held
                # back), so a fresh connection authenticates again; held requests
                # keep waiting for it instead of failing with this connection.
                log.info("node %s: SASL session lifetime nearly over; reconnecting", node.node_id)
                held = state.unsent.pop(node.node_id, None)
                state.close_node(node, now, errors.KafkaConnectionError(
                    "SASL session expiring"), failed=False)
                node.backoff_until_ms = now
                if held:
                    state.unsent[node.node_id] = held
                continue
            if (node.is_ready() and node.proto.in_flight_count == 0
                    and not state.unsent.get(node.node_id)
                    and now - node.last_activity_ms >= state.config.connections_max_idle_ms):
                log.debug("node %s: closing idle connection", node.node_id)
                state.close_node(node, now, errors.KafkaConnectionError("idle"), failed=False)
                node.backoff_until_ms = now
                # As Java, whose Selector reports an idle expiry like any disconnect: the
                # metadata may be stale (the refresh is under the KIP-580 backoff).
                server_disconnect(node.node_id, now)
                continue
        queue = state.unsent.get(node.node_id)
        if queue:  # not FIFO by deadline: each request has its own timeout
            for item in [i for i in queue if i.deadline_ms <= now]:
                queue.remove(item)
                state.completed.append((item.future, None, errors.KafkaTimeoutError(
                    "{} for node {} was not sent within {:.0f} ms".format(
                        type(item.request).__name__, node.node_id, item.timeout_ms))))
