"""kproto.consumer.classic sans-IO: the group member's state and the ConsumerCoordinator's protocol logic, ConsumerProtocol bytes."""
