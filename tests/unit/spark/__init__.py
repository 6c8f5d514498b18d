"""kproto.spark without Spark or a broker: options and planning."""
