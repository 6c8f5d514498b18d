"""kproto.consumer.kip848 sans-IO: events, request managers (heartbeat, commit), membership and reconciliation, the network thread."""
