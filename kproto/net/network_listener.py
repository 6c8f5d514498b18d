"""NetworkListener: the network layer's observation hook (what Java's Selector metrics see).

``NetworkClient(network_listener=...)`` hands one listener to every broker connection;
without one (the default, None) the hook sites are a single ``is not None`` test each.
The listener is told about connections, bytes and frames, never about their content, so
``kproto.net`` imports nothing to feed it: the recorder of Java's network metrics,
:class:`kproto.metrics.selector_metrics.SelectorMetrics`, implements these methods
without importing ``kproto.net`` (layers stay as DESIGN.md draws them).

Calls arrive on the thread running ``NetworkClient.poll()`` with the client's lock held
(the classic engine's application or heartbeat thread, the KIP-848 background thread),
so a listener must be quick, thread-safe and must never call back into the client.
Counting rules (Java's ``Selector``):

* ``connection_created``: TCP (and TLS) established; ``connection_closed``: such a
  connection closed, for whatever reason. Attempts that never connected count in neither,
  so created minus closed is the number of open connections.
* ``bytes_sent``/``bytes_received``: per socket write/read event, the bytes moved in it
  (an event that moved nothing is not reported).
* ``request_sent``: a request frame fully written (``nbytes`` includes the 4-byte size
  prefix); ``response_received``: a response frame decoded and matched to its request,
  with its size, the latency from the request's queuing to now (client clock, ms) and its
  ``throttle_time_ms`` (0 for responses without one).
* ``poll_done``: after each select round, the nanoseconds spent blocked in ``select`` and
  then doing I/O (Java's select and io times).
"""

from __future__ import annotations

from typing import Any, Protocol


class NetworkListener(Protocol):
    """The hook's interface; every method is a no-op here (subclass what you need). A
    Protocol, so a listener that implements every method (SelectorMetrics) needs no
    import of this module."""

    def connection_created(self, node_id: Any) -> None:
        pass

    def connection_closed(self, node_id: Any) -> None:
        pass

    def bytes_sent(self, node_id: Any, nbytes: int) -> None:
        pass

    def bytes_received(self, node_id: Any, nbytes: int) -> None:
        pass

    def request_sent(self, node_id: Any, api_key: int, nbytes: int) -> None:
        pass

    def response_received(self, node_id: Any, api_key: int, nbytes: int, latency_ms: float,
                          throttle_time_ms: int) -> None:
        pass

    def poll_done(self, select_ns: int, io_ns: int) -> None:
        pass
