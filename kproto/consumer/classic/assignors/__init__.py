"""Partition assignors of the classic group protocol (range, roundrobin, sticky,
cooperative-sticky) and the interface for custom ones; see ``abstract`` for how to write one
and ``resolve.resolve_assignors`` for turning ``partition_assignment_strategy`` into instances.

Names are loaded lazily so that ``consumer_protocol`` can use ``_java`` without a cycle.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "AbstractPartitionAssignor": "abstract",
    "JavaStyleAssignor": "abstract",
    "RebalanceProtocol": "abstract",
    "ClusterView": "abstract",
    "GroupMember": "abstract",
    "PartitionInfo": "abstract",
    "RangePartitionAssignor": "range",
    "RoundRobinPartitionAssignor": "roundrobin",
    "StickyPartitionAssignor": "sticky",
    "CooperativeStickyAssignor": "sticky",
    "AbstractStickyAssignor": "abstract_sticky",
    "resolve_assignors": "resolve",
    "select_rebalance_protocol": "resolve",
    "BUILTIN_ASSIGNORS": "resolve",
    "group_protocols": "leader",
    "decode_members": "leader",
    "perform_assignment": "leader",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))
    value = getattr(importlib.import_module(__name__ + "." + module), name)
    globals()[name] = value
    return value


__all__ = sorted(_LAZY)
