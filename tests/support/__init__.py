"""Test support used across areas: one home for fixtures more than one test package needs.

- ``clock``: the one fake clock (integer milliseconds, moved by hand);
- ``fetch_fixtures``: an AbstractFetch over a real SubscriptionState and ClusterMetadata,
  and Fetch responses for it (sans-IO);
- ``heartbeats``: ConsumerGroupHeartbeat responses and the topic ids they name;
- ``reading``: consuming a seeded topic to the end and comparing with what was produced;
- ``polling``: NetworkClients on the mock cluster, driven until a condition holds;
- ``topic_errors``: reading through a topic's authorization error;
- ``members``: kproto group members in threads, ``wait_for`` and the group assertions;
- ``member_views``: the views every group member kind shows (kproto, Java peers);
- ``confluent_member``: a librdkafka (confluent-kafka) group member in its own thread;
- ``certs``: self-signed certificates for the TLS tests (openssl).

A helper used by one area stays in that area's package.
"""
