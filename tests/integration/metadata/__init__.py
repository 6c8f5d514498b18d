"""Cluster metadata from the consumer's side: leader discovery (KIP-951), refresh backoff (KIP-580), metadata errors."""
