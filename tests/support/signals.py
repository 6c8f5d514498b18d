"""Children a test stops with Ctrl-C (SIGINT).

A shell runs a background job with SIGINT ignored, and a child inherits that: a Python
child then installs no KeyboardInterrupt handler and tcpdump never stops on SIGINT. So a
test that means to interrupt its child gives it SIGINT's default first, whatever started
pytest (a terminal, CI, ``nohup ... &``).
"""

from __future__ import annotations

import signal


def interruptible() -> None:
    """A ``preexec_fn``: SIGINT with its default action in the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
