"""kproto: a pure-Python Apache Kafka consumer client and wire-protocol implementation.

Importing this package loads only the standard library; optional codecs and the
embedded test broker are imported lazily where they are used.
"""

__version__ = "0.1.0"

from kproto import errors  # noqa: F401  (re-exported family of exceptions)

__all__ = ["errors", "__version__"]
