"""Verified on Apache Kafka 4.4 (issue 25 item 3): what kproto sends and what Kafka answers."""
