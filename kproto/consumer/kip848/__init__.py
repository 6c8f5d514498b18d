"""The KIP-848 consumer engine (``group_protocol="consumer"``).

Owns what is KIP-848's on top of the background-thread shell (``kproto.consumer.background``):
the application side (``AsyncKafkaConsumer``), the consumer's events and their handlers,
and the request managers (commit, heartbeat, membership, offsets, fetch), which are
sans-IO: ``poll(now_ms)`` returns the requests to send, responses come back through futures.

This package never imports ``kproto.consumer.classic`` (and vice versa).
"""

from kproto.consumer.background.member_state import MemberState

__all__ = ["MemberState"]
