"""ConsumerGroupHeartbeat responses for the sans-IO tests of the shell's group managers and
the KIP-848 engine, and the topic ids they name."""

from __future__ import annotations

import uuid
from typing import Any, Optional

from kproto.messages import ConsumerGroupHeartbeatResponse

TOPIC_IDS = {name: uuid.uuid5(uuid.NAMESPACE_DNS, name) for name in ("alpha", "beta", "gamma")}


def heartbeat_response(member_id: Optional[str] = None, epoch: int = 1, interval_ms: int = 3000,
                       assignment: Optional[dict] = None, error_code: int = 0,
                       error_message: Optional[str] = None) -> Any:
    """A ConsumerGroupHeartbeatResponse; ``assignment`` maps topic names to partitions."""
    if assignment is None:
        assigned = None
    else:
        assigned = ConsumerGroupHeartbeatResponse.Assignment(topic_partitions=[
            ConsumerGroupHeartbeatResponse.TopicPartitions(topic_id=TOPIC_IDS[name], partitions=list(parts))
            for name, parts in assignment.items()])
    return ConsumerGroupHeartbeatResponse(
        error_code=error_code, error_message=error_message, member_id=member_id, member_epoch=epoch,
        heartbeat_interval_ms=interval_ms, assignment=assigned)
