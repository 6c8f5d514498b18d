"""kproto.aio: native asyncio consumers: aiokafka's API (``AIOKafkaConsumer``) and a
share-group member (``AIOKafkaShareConsumer``).

The application side (``consumer``), aiokafka's constructor arguments (``config``), the
rebalance listener with coroutine callbacks (``rebalance``) and the event-loop shell that
iterates the KIP-848 engine's request managers and network client on the loop
(``loop_driver``), the share-group member (``share_consumer``), awaiting an engine
event (``futures``). No thread is started. See DESIGN.md "Threads" and README.
"""

from kproto.aio.consumer import AIOKafkaConsumer
from kproto.aio.rebalance import ConsumerRebalanceListener
from kproto.aio.share_consumer import AIOKafkaShareConsumer
from kproto.consumer.share.acknowledgements import AcknowledgeType
from kproto.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["AIOKafkaConsumer", "AIOKafkaShareConsumer", "AcknowledgeType", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndMetadata",
           "TopicPartition"]
