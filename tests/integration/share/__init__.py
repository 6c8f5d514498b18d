"""KafkaShareConsumer (KIP-932) against real brokers."""
