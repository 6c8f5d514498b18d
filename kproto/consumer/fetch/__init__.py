"""The fetch pipeline shared by both engines (Java's consumer ``internals`` fetch classes).

``fetch_session_handler`` (KIP-227 sessions per node), ``abstract_fetch`` (which
partitions to fetch from which node; building requests and handling responses),
``completed_fetch`` (one partition's fetched data and its parse state), ``fetch_buffer``
(the thread-safe queue between fetching and collecting), ``fetch_collector`` (records
for one ``poll()`` under the position rules) and ``fetcher`` (the classic engine's
driver over a ``NetworkClient``). The KIP-848 engine wraps ``AbstractFetch`` in its own
fetch request manager.
"""

from kproto.consumer.fetch.abstract_fetch import AbstractFetch
from kproto.consumer.fetch.completed_fetch import CompletedFetch, RecordDeserializationError
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_collector import Fetch, FetchCollector
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.fetch.fetch_session_handler import (FetchMetadata, FetchRequestData, FetchSessionHandler,
                                                         PartitionData)
from kproto.consumer.fetch.fetcher import Fetcher

__all__ = ["AbstractFetch", "CompletedFetch", "Fetch", "FetchBuffer", "FetchCollector", "FetchConfig",
           "FetchMetadata", "FetchRequestData", "FetchSessionHandler", "Fetcher", "PartitionData",
           "RecordDeserializationError"]
