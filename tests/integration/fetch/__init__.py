"""The fetch pipeline against real brokers: Fetcher, CompletedFetch, callbacks on a second thread, replica and node choice."""
