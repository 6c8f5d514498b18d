"""The consumer core both group engines share.

``config`` (validated settings), ``subscription_state`` (what is consumed and where) and
``fetch/`` (fetch sessions, buffering, decoding and collection of records). The classic
engine (``classic/``) and the KIP-848 engine (``kip848/``) build on these and never import
each other. Importing this package loads nothing beyond the standard library.
"""

from kproto.consumer.config import ConsumerConfig, DEFAULT_CONFIG

__all__ = ["ConsumerConfig", "DEFAULT_CONFIG"]
