"""Turning ``partition_assignment_strategy`` into assignor instances.

Accepts what kafka-python and aiokafka accept (assignor classes or instances, alone or in a
list; their own assignors become kproto's of the same name, see ``python_clients``) plus
the names ``"range"``, ``"roundrobin"``, ``"sticky"``, ``"cooperative-sticky"`` and Java's
class names (``"org.apache.kafka.clients.consumer.RangeAssignor"``, ...), so a Java or
librdkafka configuration string can be reused.
"""

from __future__ import annotations

import inspect
from typing import Any, Dict, Iterable, List, Type

from kproto.consumer.classic.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
from kproto.consumer.classic.assignors.python_clients import AiokafkaAssignor, builtin_name, is_aiokafka_assignor
from kproto.consumer.classic.assignors.range import RangePartitionAssignor
from kproto.consumer.classic.assignors.roundrobin import RoundRobinPartitionAssignor
from kproto.consumer.classic.assignors.sticky import CooperativeStickyAssignor, StickyPartitionAssignor
from kproto.consumer.config import ASSIGNOR_NAMES, builtin_assignor_name
from kproto.errors import KafkaConfigurationError

BUILTIN_ASSIGNORS: Dict[str, Type[AbstractPartitionAssignor]] = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
if tuple(BUILTIN_ASSIGNORS) != ASSIGNOR_NAMES:  # the config's table and this one must agree
    raise ImportError("BUILTIN_ASSIGNORS does not match kproto.consumer.config.ASSIGNOR_NAMES")


def _one(value: Any) -> Any:
    if isinstance(value, str):
        # One table of names for config validation and this resolver (kproto.consumer.config).
        key = builtin_assignor_name(value)
        cls = BUILTIN_ASSIGNORS.get(key) if key is not None else None
        if cls is None:
            raise KafkaConfigurationError(
                "unknown partition assignment strategy {!r} (known: {})".format(value, ", ".join(BUILTIN_ASSIGNORS)))
        return cls()
    library_name = builtin_name(value)
    if library_name is not None:
        return BUILTIN_ASSIGNORS[library_name]()
    if is_aiokafka_assignor(value):
        return AiokafkaAssignor(value)
    if inspect.isclass(value):
        try:
            value = value()
        except TypeError as e:
            raise KafkaConfigurationError("cannot instantiate assignor {!r}: {}".format(value, e)) from e
    if not callable(getattr(value, "assign", None)) or not getattr(value, "name", None):
        raise KafkaConfigurationError("{!r} is not a partition assignor (needs name and assign())".format(value))
    return value


def resolve_assignors(strategy: Any) -> List[Any]:
    """Assignor instances, in preference order, for a ``partition_assignment_strategy`` value.

    A comma-separated string is split (``"cooperative-sticky,range"``). Raises
    ``KafkaConfigurationError`` for an empty list, an unknown name, a duplicate name or
    assignors without a common rebalance protocol.
    """
    if isinstance(strategy, str):
        items: Iterable[Any] = [s for s in strategy.split(",") if s.strip()]
    elif isinstance(strategy, (list, tuple)):
        items = strategy
    else:
        items = [strategy]
    assignors = [_one(v) for v in items]
    if not assignors:
        raise KafkaConfigurationError("partition_assignment_strategy is empty")
    seen = set()
    for a in assignors:
        if a.name in seen:
            raise KafkaConfigurationError("assignor name {!r} is used by more than one assignor".format(a.name))
        seen.add(a.name)
    select_rebalance_protocol(assignors)
    return assignors


def select_rebalance_protocol(assignors: Iterable[Any]) -> RebalanceProtocol:
    """Java's rule: the highest protocol every configured assignor supports."""
    common = None
    for a in assignors:
        supported = getattr(a, "supported_protocols", None)
        protocols = {RebalanceProtocol(int(p)) for p in (supported() if supported else [RebalanceProtocol.EAGER])}
        common = protocols if common is None else common & protocols
    if not common:
        raise KafkaConfigurationError("the configured assignors support no common rebalance protocol")
    return max(common)
