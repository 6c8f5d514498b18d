"""kproto.messages: the generated classes (round trips, golden bytes, fuzzing, parity with kafka-python's encoders)."""
