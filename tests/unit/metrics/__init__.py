"""kproto.metrics: Java's metrics model on a fake clock."""
