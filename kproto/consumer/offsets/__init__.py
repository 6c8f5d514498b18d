"""Offsets for the shared consumer core: positions from ListOffsets, validation, commits.

The sans-IO halves (request building and response judging, usable by both engines) are
``offset_fetcher_utils`` (ListOffsets, resets, offsets_for_times), ``leader_epoch_validation``
(OffsetForLeaderEpoch, truncation), ``committed_offsets`` (OffsetFetch) and ``commit``
(OffsetCommit, ``AutoCommitState``), ``metadata_wait`` (a refresh asked again until a deadline); ``offset_fetcher.OffsetFetcher`` (ListOffsets and
validation) and ``group_offsets.GroupOffsets`` (commits and committed offsets, with retries)
are the classic engine's wrappers over a NetworkClient.
"""

from .commit import (AutoCommitState, CommitResult, build_offset_commit_request, handle_offset_commit_response,
                     max_version_for_topic_ids, topic_ids_or_none)
from .committed_offsets import (OffsetFetchResult, build_offset_fetch_request, handle_offset_fetch_response,
                                refresh_committed_offsets)
from .group_offsets import GroupOffsets
from .offset_fetcher import OffsetFetcher
from .offset_fetcher_utils import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ListOffsetData, ListOffsetResult

__all__ = [
    "AutoCommitState", "CommitResult", "build_offset_commit_request", "handle_offset_commit_response",
    "max_version_for_topic_ids", "topic_ids_or_none",
    "OffsetFetchResult", "build_offset_fetch_request", "handle_offset_fetch_response", "refresh_committed_offsets",
    "GroupOffsets", "OffsetFetcher", "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "ListOffsetData", "ListOffsetResult",
]
