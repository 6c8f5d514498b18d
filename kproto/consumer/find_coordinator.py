"""FindCoordinator for a consumer group: the request, and the group's entry in the answer.

Both engines look their group coordinator up the same way (the classic engine's
``CoordinatorDiscovery``, the KIP-848 engine's ``CoordinatorRequestManager``); what differs
is when they ask and how they back off, which stays with them. This module owns what the
two must agree on: how a group key is put in each FindCoordinator version, and which entry
of an answer is the group's (Java's ``FindCoordinatorRequest.Builder`` and
``FindCoordinatorResponse``'s per-key coordinators).
"""

from __future__ import annotations

from typing import Any, Optional

from kproto.errors import IllegalStateError, error_for
from kproto.messages import FindCoordinatorRequest

COORDINATOR_KEY_TYPE_GROUP = 0
# FindCoordinator v4 (KIP-699) replaced the single ``key`` with the batched ``coordinator_keys``.
BATCHED_KEYS_MIN_VERSION = 4


def build_find_coordinator_request(group_id: str, version: int) -> FindCoordinatorRequest:
    """FindCoordinator for ``group_id``, in the shape ``version`` carries."""
    if version >= BATCHED_KEYS_MIN_VERSION:
        return FindCoordinatorRequest(key_type=COORDINATOR_KEY_TYPE_GROUP, coordinator_keys=[group_id])
    return FindCoordinatorRequest(key=group_id, key_type=COORDINATOR_KEY_TYPE_GROUP)


def group_coordinator(response: Any, group_id: str) -> tuple[Any, Optional[BaseException]]:
    """The answer's entry for ``group_id`` (node_id, host, port) and its error, if any.

    From v4 the answer is a list of coordinators, one per key asked for; before, it is the
    top-level fields. An answer without the group's entry is an ``IllegalStateError``.
    """
    entry = response
    if response.coordinators:
        entry = next((c for c in response.coordinators if c.key == group_id), None)
        if entry is None:
            return None, IllegalStateError(
                "FindCoordinator answer has no coordinator for group {!r}".format(group_id))
    return entry, error_for(entry.error_code, entry.error_message or None)
