"""The KIP-848 engine end to end: membership, threading, heartbeat errors, application calls."""
