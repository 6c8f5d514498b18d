"""kproto trace: the proxy with real clients and brokers, framing and rewriting, the command and its page."""
