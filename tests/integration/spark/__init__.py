"""kproto.spark's reader and resolver on brokers, and the PySpark data source in local Spark."""
