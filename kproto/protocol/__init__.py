"""Hand-written Kafka wire primitives (``primitives``), headers (``headers``) and the base class
of the generated messages (``base``). The bottom layer: imports only ``kproto.errors``."""
