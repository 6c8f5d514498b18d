"""kproto.consumer.classic.assignors: range, roundrobin, sticky, cooperative-sticky, Java's collection behaviour, properties."""
