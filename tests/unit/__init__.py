"""Tests without a broker: sans-IO state machines on fake clocks, codecs, wire formats, offline parity with independent encoders. One folder per kproto package."""
