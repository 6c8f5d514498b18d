"""NetworkClient against real brokers and a misbehaving peer."""
