"""The KIP-848 consumer engine (``group_protocol="consumer"``).

Owns the async engine of the seed chapter: the application thread and the background
thread (``consumer_background_thread``) talk only through events; the background thread
owns the request managers (coordinator, heartbeat, membership, ...) which are sans-IO:
``poll(now_ms)`` returns the requests to send, responses come back through futures.

This package never imports ``kproto.consumer.classic`` (and vice versa).
"""

from kproto.consumer.kip848.member_state import MemberState
from kproto.consumer.kip848.request_manager import PollResult, RequestManager, RequestState, UnsentRequest
from kproto.consumer.kip848.timer import Timer

__all__ = ["MemberState", "PollResult", "RequestManager", "RequestState", "Timer", "UnsentRequest"]
