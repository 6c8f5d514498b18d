"""kproto.fuzz without a broker: request generator, mutators, safety rules."""
