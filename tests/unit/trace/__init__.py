"""kproto.trace sans-IO: the timeline model."""
