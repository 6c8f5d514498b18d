"""kproto.net sans-IO: connection framing, cluster metadata (leader discovery, refresh backoff), SASL mechanisms, network metrics."""
