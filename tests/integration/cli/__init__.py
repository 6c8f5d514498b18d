"""`python -m kproto consume` as a user runs it."""
