"""The classic consumer-group engine (JoinGroup/SyncGroup/Heartbeat, ``group_protocol="classic"``).

Holds the coordinator, the heartbeat thread, the ConsumerProtocol metadata format
(``consumer_protocol``), the partition assignors (``assignors``) and the blocking loops
over the shared sans-IO core that only this engine runs (``fetcher``, ``offset_fetcher``,
``group_offsets``, ``metadata_wait``). Never imports the KIP-848 engine.
"""
