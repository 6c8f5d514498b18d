"""The share-group engine (KIP-932): ``KafkaShareConsumer``'s internals.

Built on the background-thread shell (``kproto.consumer.background``) and the shared core,
never on another engine (``tests/unit/package/test_layering.py``). Modules, by Java's names:
``share_consumer_impl`` (the application side), ``share_request_managers`` (wiring and
event handlers), ``share_membership_manager`` and ``share_heartbeat_request_manager``
(ShareGroupHeartbeat), ``share_consume_request_manager`` (ShareFetch / ShareAcknowledge),
``share_session_handler`` (a node's share session), ``share_fetch_buffer`` and
``share_completed_fetch`` (acquired records between the threads),
``share_fetch_metrics_manager``, ``acknowledgements``, ``events`` and ``share_consumer_config``.
"""
