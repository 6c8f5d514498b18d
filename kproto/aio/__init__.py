"""kproto.aio: a native asyncio consumer with aiokafka's API (``AIOKafkaConsumer``).

The application side (``consumer``), aiokafka's constructor arguments (``config``), the
rebalance listener with coroutine callbacks (``rebalance``) and the event-loop shell that
iterates the KIP-848 engine's request managers and network client on the loop
(``loop_driver``). No thread is started. See DESIGN.md "Threads" and README.
"""

from kproto.aio.consumer import AIOKafkaConsumer
from kproto.aio.rebalance import ConsumerRebalanceListener
from kproto.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["AIOKafkaConsumer", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndMetadata",
           "TopicPartition"]
