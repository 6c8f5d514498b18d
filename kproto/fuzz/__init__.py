"""Protocol fuzzer for Kafka brokers (``python -m kproto fuzz``); see docs/fuzzing.md."""
