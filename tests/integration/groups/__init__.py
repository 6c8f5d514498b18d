"""Classic consumer groups: membership, rebalances, mixed groups with librdkafka, FindCoordinator;
mixed classic, KIP-848 and share groups with Kafka 4.4's Java consumer (the ``java_peer``)."""
