"""The fetch pipeline shared by both engines (Java's consumer ``internals`` fetch classes).

``fetch_session_handler`` (KIP-227 sessions per node), ``abstract_fetch`` (which
partitions to fetch from which node; building requests and handling responses),
``completed_fetch`` (one partition's fetched data and its parse state), ``fetch_buffer``
(the thread-safe queue between fetching and collecting) and ``fetch_collector`` (records
for one ``poll()`` under the position rules); all sans-IO. The engines drive
``AbstractFetch``: the classic one with ``kproto.consumer.classic.fetcher`` over a
``NetworkClient``, the KIP-848 one in its fetch request manager.
"""

from kproto.consumer.fetch.abstract_fetch import AbstractFetch
from kproto.consumer.fetch.completed_fetch import CompletedFetch, RecordDeserializationError
from kproto.consumer.fetch.fetch_buffer import FetchBuffer
from kproto.consumer.fetch.fetch_collector import Fetch, FetchCollector
from kproto.consumer.fetch.fetch_config import FetchConfig
from kproto.consumer.fetch.fetch_session_handler import (FetchMetadata, FetchRequestData, FetchSessionHandler,
                                                         PartitionData)

__all__ = ["AbstractFetch", "CompletedFetch", "Fetch", "FetchBuffer", "FetchCollector", "FetchConfig",
           "FetchMetadata", "FetchRequestData", "FetchSessionHandler", "PartitionData",
           "RecordDeserializationError"]
