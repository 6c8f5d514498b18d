"""KafkaConsumer end to end: assign, commits, faults, fetch sessions, lag, read_committed, corrupt data, unreachable clusters."""
