"""The background-thread shell shared by every background-thread engine: KIP-848 consumer
groups today, share groups next.

Owns what runs behind the application's back whatever the group protocol:
``consumer_network_thread`` (Java's ``ConsumerNetworkThread``: drain events, poll the
request managers, one network step, reap expired events), ``events`` (the event roots,
their queues and handlers, the ``CompletableEventReaper``), ``application_event_processor``
(dispatch by an explicit event-type table), ``request_manager`` (the ``RequestManager``
contract, ``PollResult``, ``UnsentRequest``, ``RequestState``), ``network_client_delegate``
(Java's ``NetworkClientDelegate``), ``coordinator_request_manager`` (FindCoordinator),
``timer``, and the group-type-neutral halves of the KIP-848-style group managers:
``abstract_membership_manager`` (with ``member_state``, ``local_assignment``) and
``abstract_heartbeat_request_manager``. An engine brings its events, handlers and request
managers; this package never imports an engine (``tests/unit/package/test_layering.py``).
"""

from kproto.consumer.background.request_manager import PollResult, RequestManager, RequestState, UnsentRequest
from kproto.consumer.background.timer import Timer

__all__ = ["PollResult", "RequestManager", "RequestState", "Timer", "UnsentRequest"]
