"""kproto: a pure-Python Apache Kafka consumer client and wire-protocol implementation.

Importing this package loads only the standard library; the consumer, optional codecs and
the embedded test broker are imported lazily where they are used.
"""

from __future__ import annotations

from typing import Any

from kproto import errors  # noqa: F401  (re-exported family of exceptions)
from kproto.structs import (  # noqa: F401
    ConsumerGroupMetadata,
    ConsumerRecord,
    IsolationLevel,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

__version__ = "0.1.0"

# Loaded on first use, so `import kproto` stays cheap.
_LAZY = {
    "KafkaConsumer": "kproto.consumer.kafka_consumer",
    "ConsumerRebalanceListener": "kproto.consumer.rebalance_listener",
    "AsyncConsumerRebalanceListener": "kproto.consumer.rebalance_listener",
    "KafkaShareConsumer": "kproto.consumer.kafka_share_consumer",
    "AcknowledgeType": "kproto.consumer.share.acknowledgements",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'kproto' has no attribute {!r}".format(name))
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["errors", "__version__", "KafkaConsumer", "ConsumerRebalanceListener", "AsyncConsumerRebalanceListener",
           "TopicPartition", "OffsetAndMetadata", "OffsetAndTimestamp", "ConsumerRecord", "ConsumerGroupMetadata",
           "IsolationLevel", "KafkaShareConsumer", "AcknowledgeType"]
