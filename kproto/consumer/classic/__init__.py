"""The classic consumer-group engine (JoinGroup/SyncGroup/Heartbeat, ``group_protocol="classic"``).

Holds the coordinator, the heartbeat thread, the ConsumerProtocol metadata format
(``consumer_protocol``) and the partition assignors (``assignors``). Never imports the
KIP-848 engine.
"""
