"""Offsets for the shared consumer core: positions from ListOffsets, validation, commits.

Sans-IO only (request building and response judging, used by both engines):
``offset_fetcher_utils`` (ListOffsets, resets, offsets_for_times), ``leader_epoch_validation``
(OffsetForLeaderEpoch, truncation), ``committed_offsets`` (OffsetFetch) and ``commit``
(OffsetCommit, ``AutoCommitState``). The classic engine's blocking wrappers over a
NetworkClient are ``kproto.consumer.classic.offset_fetcher`` and ``group_offsets``.
"""

from .commit import (AutoCommitState, CommitResult, build_offset_commit_request, handle_offset_commit_response,
                     max_version_for_topic_ids, topic_ids_or_none)
from .committed_offsets import (OffsetFetchResult, build_offset_fetch_request, handle_offset_fetch_response,
                                refresh_committed_offsets)
from .offset_fetcher_utils import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ListOffsetData, ListOffsetResult

__all__ = [
    "AutoCommitState", "CommitResult", "build_offset_commit_request", "handle_offset_commit_response",
    "max_version_for_topic_ids", "topic_ids_or_none",
    "OffsetFetchResult", "build_offset_fetch_request", "handle_offset_fetch_response", "refresh_committed_offsets",
    "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "ListOffsetData", "ListOffsetResult",
]
