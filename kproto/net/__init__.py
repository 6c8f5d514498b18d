"""The network layer: a selector-driven client for many brokers over a sans-IO core.

- :class:`~kproto.net.connection.Connection`: the sans-IO protocol state of one connection
  (framing, correlation ids, requests in flight); no sockets.
- :class:`~kproto.net.client.NetworkClient`: sockets, ``selectors``, reconnect backoff, TLS,
  metadata refresh; thread-safe ``send``. Its helpers (:mod:`kproto.net.api_versions`,
  :mod:`kproto.net.timeouts`, :mod:`kproto.net.metadata_updater`,
  :mod:`kproto.net.channel_authenticator`) are handed its
  :class:`~kproto.net.client_state.ClientState` (node table, queues, close hooks).
- :class:`~kproto.net.metadata.ClusterMetadata`: brokers, leaders, epochs, topic ids.
- :class:`~kproto.net.future.Future`: the result of a request, with callbacks.
- :mod:`kproto.net.sasl`: SASL mechanisms (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) and the
  sans-IO per-connection authenticator for ``SASL_PLAINTEXT``/``SASL_SSL``.
- ``kproto.wire`` logger (:mod:`kproto.net.wire`): every request/response as a field tree.
"""

from kproto.net.broker import ConnectionState
from kproto.net.client import NetworkClient
from kproto.net.connection import Connection, InFlightRequest
from kproto.net.future import Future
from kproto.net.metadata import ClusterMetadata

__all__ = ["NetworkClient", "ClusterMetadata", "Future", "Connection", "InFlightRequest",
           "ConnectionState"]
