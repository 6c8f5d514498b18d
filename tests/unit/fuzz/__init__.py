"""kproto.tools.fuzz without a broker: request generator, mutators, safety rules."""
