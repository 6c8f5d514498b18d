"""kproto.errors: the error-code table."""
