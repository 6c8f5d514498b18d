"""How ``SubscriptionState``'s methods hold its lock (Java: every method ``synchronized``).

Owns the decorators that give ``SubscriptionState`` (and ``SubscriptionFetchPath``, the
base class it inherits the fetch pipeline's methods from) Java's locking, and the rule
they implement: every public method that writes, or reads more than one field, holds the
instance's one ``RLock`` (``self._lock``), because the KIP-848 engine's background thread
updates assignments and watermarks while the application thread seeks, pauses and reads
positions.

The exceptions, each marked where it is defined:

- ``@lock_free``: a read of a single field of one partition (``position``, ``is_paused``,
  ``high_watermark``, ...) takes no lock. It looks the partition up in ``_states``, a dict
  that is never changed in place (a new one is published whole when the assignment
  changes), and reads one attribute, each an atomic step, so it sees the value before or
  after any concurrent change, as with the lock. ``assigned_partitions`` and
  ``paused_partitions`` are lock-free too: they return a frozenset published whole when the
  assignment (or the paused set) changes, shared by every caller and immutable, so no
  caller can change the state through it and none pays a copy per call.
- ``@locks_inside``: a hot method that takes the lock itself, in its body, so a call per
  partition of every Fetch pays no wrapper's call frame.

Separate from the classes because the state is split over two modules (the subscription
and its state machine, the fetch pipeline's side) that must lock the same way.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["lock_free", "locks_inside", "synchronize_public_methods"]

_F = TypeVar("_F", bound=Callable[..., Any])
_C = TypeVar("_C", bound=type)


def _synchronized(method: _F) -> _F:
    @functools.wraps(method)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)
    return locked  # type: ignore[return-value]


def lock_free(method: _F) -> _F:
    """Mark a one-field read of one partition that needs no lock (see the module docstring)."""
    method.__lock_free__ = True  # type: ignore[attr-defined]
    return method


def locks_inside(method: _F) -> _F:
    """Mark a hot method that takes the lock itself (no wrapper: one call frame less)."""
    method.__lock_free__ = True  # type: ignore[attr-defined]
    return method


def synchronize_public_methods(cls: _C) -> _C:
    """Make every public method defined in ``cls`` (not inherited: each class is decorated
    itself) hold the instance's RLock ``_lock``, but the ``@lock_free`` and ``@locks_inside``
    ones."""
    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(value) and not getattr(value, "__lock_free__", False):
            setattr(cls, name, _synchronized(value))
    return cls
