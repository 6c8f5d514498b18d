"""kproto.protocol: wire primitives and request/response headers."""
