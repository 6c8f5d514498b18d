"""codegen/: the message generator and the spec merge."""
