"""ThreadConfinement: one owning thread at a time, re-entrant, an intruder fails at once."""

from __future__ import annotations

import threading

import pytest

from kproto.consumer.thread_confinement import ThreadConfinement
from kproto.errors import ConcurrentModificationError
from tests.threads import TestThread


def _try_enter(confinement: ThreadConfinement, out: list) -> None:
    try:
        with confinement:
            out.append("entered")
    except ConcurrentModificationError as exc:
        out.append(exc)


def test_reentrant_on_the_owner_and_refused_to_another_thread_until_released():
    confinement = ThreadConfinement("KafkaConsumer")
    seen: list = []
    with confinement:
        with confinement:  # a call making another call
            thread = TestThread(target=_try_enter, args=(confinement, seen))
            thread.start()
            thread.join()
        thread = TestThread(target=_try_enter, args=(confinement, seen))
        thread.start()
        thread.join()
    assert len(seen) == 2 and all(isinstance(e, ConcurrentModificationError) for e in seen)
    assert "KafkaConsumer is not safe for multi-threaded access" in str(seen[0])
    thread = TestThread(target=_try_enter, args=(confinement, seen))
    thread.start()
    thread.join()
    assert seen[-1] == "entered"
    with confinement:  # and back on this thread
        assert confinement._owner == threading.get_ident()
    assert confinement._owner is None


def test_an_error_inside_releases_the_confinement():
    confinement = ThreadConfinement(object())
    with pytest.raises(ValueError):
        with confinement:
            raise ValueError("boom")
    seen: list = []
    thread = TestThread(target=_try_enter, args=(confinement, seen))
    thread.start()
    thread.join()
    assert seen == ["entered"]
