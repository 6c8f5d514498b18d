"""What the kproto.aio integration tests share: ``proto``, the group protocol's settings."""

from __future__ import annotations

import pytest


# Classic (the default, no group_protocol): the session timeout is the shortest every broker
# accepts (librdkafka's mock holds a new member's JoinGroup for the departed members'
# session timeout).
@pytest.fixture(params=[pytest.param({"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}, id="classic",
                                     marks=pytest.mark.needs("classic_groups")),
                        pytest.param({"group_protocol": "consumer"}, id="consumer",
                                     marks=pytest.mark.needs("kip848"))])
def proto(request: pytest.FixtureRequest) -> dict:
    """Settings of a classic (the default) or KIP-848 group member."""
    return dict(request.param)
