"""kproto.tools.fuzz against real brokers: runs, replay, minimisation."""
