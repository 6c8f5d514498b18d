"""Classic consumer groups: membership, rebalances, mixed groups with librdkafka, FindCoordinator."""
