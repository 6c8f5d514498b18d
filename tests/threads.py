"""Helper threads for tests that re-raise what they caught.

Owns :class:`TestThread`: a daemon thread that records the exception its target (or
:meth:`TestThread.work` in a subclass) raised and re-raises it in the thread that joins
it, or that asks :meth:`TestThread.raise_if_failed` (a test waiting on a thread's state
should ask, so a thread that died at once fails the test at once instead of after the
wait's limit).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional


class TestThread(threading.Thread):
    """A thread whose exception is kept in ``error`` and re-raised by :meth:`join`.

    Use ``TestThread(target=f, args=...)`` like :class:`threading.Thread`, or subclass and
    override :meth:`work` (not ``run``).
    """

    __test__ = False  # not a test class, despite the name

    def __init__(self, target: Optional[Callable[..., Any]] = None, name: Optional[str] = None,
                 args: tuple = (), kwargs: Optional[dict] = None, daemon: bool = True) -> None:
        super().__init__(target=target, name=name, args=args, kwargs=kwargs, daemon=daemon)
        self.error: Optional[BaseException] = None

    def work(self) -> None:
        """The thread's body: the target by default."""
        super().run()

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the joining thread
            self.error = exc

    def raise_if_failed(self) -> None:
        """Re-raise the thread's exception, if it ended with one."""
        if self.error is not None:
            raise self.error

    def join(self, timeout: Optional[float] = None) -> None:
        """Wait like :meth:`threading.Thread.join`, then re-raise the thread's exception."""
        super().join(timeout)
        self.raise_if_failed()
