"""kproto.records: record batches (decoding, builders, CRC-32C, corruption, golden batches, kafka-python as independent writer)."""
