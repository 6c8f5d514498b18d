"""kproto.consumer.fetch sans-IO: AbstractFetch, FetchCollector, fetch sessions, stale answers and replica choice."""
