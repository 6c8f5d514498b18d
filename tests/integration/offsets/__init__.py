"""Offset lookups and group offsets against real brokers."""
