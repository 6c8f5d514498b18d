"""Batches written by librdkafka to a real broker, fetched raw."""
