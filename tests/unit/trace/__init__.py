"""kproto.tools.trace sans-IO: the timeline model."""
