"""kproto.fuzz against real brokers: runs, replay, minimisation."""
