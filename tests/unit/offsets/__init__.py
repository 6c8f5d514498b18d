"""kproto.consumer.offsets sans-IO: OffsetCommit, OffsetFetch, ListOffsets, OffsetForLeaderEpoch validation."""
