"""kproto.consumer.background: the engine-neutral group managers."""
