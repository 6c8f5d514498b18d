"""Shrinking a finding while its oracle still fires.

Owns the search, not the sending: ``fires(wire, request)`` says whether bytes (and the
request they encode, when structured) still produce the same (oracle, signature). First
structural passes on the request tree (drop array elements, reset fields to their schema
defaults), re-encoded under the same header; then byte-level delta debugging (ddmin) on the
body, the size prefix kept true. A sequence (or the requests before a crash) is shrunk
step-wise first (:func:`shrink_steps`: fewer steps, the one that fired kept). Bounded by a
number of calls and a time; the result is never larger than the input and always fired.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, TypeVar

from kproto.tools.fuzz.mutators import frame_wire

Fires = Callable[[bytes, Optional[Any]], bool]
S = TypeVar("S")  # a step: a frame, or its index among a finding's steps


@dataclass
class Shrunk:
    wire: bytes
    request: Optional[Any]
    calls: int
    before: int
    after: int


def _paths(obj: Any, prefix: tuple[tuple[str, Optional[int]], ...] = ()
           ) -> Iterator[tuple[tuple[str, Optional[int]], ...]]:
    """Every (container path, field) of the tree, deepest first."""
    for name in getattr(obj, "_fields", ()):
        value = getattr(obj, name)
        if isinstance(value, list):
            for i, item in enumerate(value):
                if hasattr(item, "_fields"):
                    yield from _paths(item, prefix + ((name, i),))
        elif hasattr(value, "_fields"):
            yield from _paths(value, prefix + ((name, None),))
        yield prefix + ((name, None),)


def _get(obj: Any, path: tuple[tuple[str, Optional[int]], ...]) -> Any:
    for name, index in path:
        obj = getattr(obj, name)
        if index is not None:
            obj = obj[index]
    return obj


def _candidates(request: Any) -> Iterator[Any]:
    """Smaller requests: one array element dropped, or one field reset to its default."""
    for path in list(_paths(request)):
        parent_path, (name, _) = path[:-1], path[-1]
        parent = _get(request, parent_path)
        value = getattr(parent, name)
        if isinstance(value, list) and value:
            for i in range(len(value) - 1, -1, -1):
                cand = copy.deepcopy(request)
                del getattr(_get(cand, parent_path), name)[i]
                yield cand
        cls = type(parent)
        default = cls._defaults[name] if name in cls._defaults else (
            cls._factories[name]() if name in cls._factories else None)
        if value != default:
            cand = copy.deepcopy(request)
            setattr(_get(cand, parent_path), name, default)
            yield cand


def minimise(wire: bytes, request: Optional[Any], version: int, header_len: int,
             fires: Fires, *, max_calls: int = 60, max_seconds: float = 15.0,
             byte_level: bool = True) -> Shrunk:
    """Shrink ``wire`` (size prefix + header of ``header_len`` bytes + body) within
    ``max_calls`` calls of ``fires`` and about ``max_seconds``."""
    calls = 0
    deadline = time.monotonic() + max_seconds

    def budget() -> bool:
        return calls < max_calls and time.monotonic() < deadline

    header = wire[4:4 + header_len]
    best_wire, best_req = wire, request

    def attempt(cand_wire: bytes, cand_req: Optional[Any]) -> bool:
        nonlocal calls
        calls += 1
        return fires(cand_wire, cand_req)

    if request is not None:
        progress = True
        while progress and budget():
            progress = False
            for cand in _candidates(best_req):
                if not budget():
                    break
                try:
                    cand_wire = frame_wire(header + cand.encode(version))
                except Exception:
                    continue
                if len(cand_wire) > len(best_wire) or cand_wire == best_wire:
                    continue
                if attempt(cand_wire, cand):
                    best_wire, best_req, progress = cand_wire, cand, True
                    break
    if byte_level and budget():
        body = best_wire[4 + header_len:]
        body = _ddmin(body, lambda b: attempt(frame_wire(header + b), None), budget)
        cand_wire = frame_wire(header + body)
        if len(cand_wire) < len(best_wire):
            best_wire, best_req = cand_wire, None
    return Shrunk(best_wire, best_req, calls, len(wire), len(best_wire))


def shrink_steps(steps: list[S], fires: Callable[[list[S]], bool], *,
                 max_calls: int = 20, max_seconds: float = 30.0) -> tuple[list[S], int]:
    """Fewer steps first: the shortest prefix-preserving subsequence of a sequence's frames
    (the last, which fired, always kept) for which ``fires`` still holds, by ddmin over the
    steps before it; (steps, calls)."""
    if len(steps) < 2:
        return steps, 0
    calls = 0
    deadline = time.monotonic() + max_seconds
    last = steps[-1]

    def budget() -> bool:
        return calls < max_calls and time.monotonic() < deadline

    def test(before: list[S]) -> bool:
        nonlocal calls
        calls += 1
        return fires(before + [last])

    before = steps[:-1]
    if budget() and test([]):
        return [last], calls
    n = 2
    while len(before) >= 2 and budget():
        chunk = max(1, len(before) // n)
        reduced = False
        for start in range(0, len(before), chunk):
            if not budget():
                break
            cand = before[:start] + before[start + chunk:]
            if test(cand):
                before, n, reduced = cand, max(n - 1, 2), True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(before), n * 2)
    return before + [last], calls


def _ddmin(data: bytes, test: Callable[[bytes], bool], budget: Callable[[], bool]) -> bytes:
    """Zeller's ddmin over complements: the smallest ``data`` found for which test holds."""
    n = 2
    while len(data) >= 2 and budget():
        chunk = max(1, len(data) // n)
        reduced = False
        for start in range(0, len(data), chunk):
            if not budget():
                break
            cand = data[:start] + data[start + chunk:]
            if test(cand):
                data, n, reduced = cand, max(n - 1, 2), True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(data), n * 2)
    if len(data) == 1 and budget() and test(b""):
        return b""
    return data


__all__ = ["minimise", "shrink_steps", "Shrunk"]
