"""Shrinking a sequence's steps, sans-IO: fewer steps first, the one that fired kept."""

from kproto.tools.fuzz.minimise import shrink_steps


def test_only_the_steps_the_finding_needs_are_kept():
    steps = [b"a", b"b", b"join", b"c", b"d", b"e", b"boom"]

    def fires(candidate):  # the last step fires only after "join"
        assert candidate[-1] == b"boom"
        return b"join" in candidate

    shrunk, calls = shrink_steps(steps, fires)
    assert shrunk == [b"join", b"boom"] and calls > 0


def test_a_last_step_that_fires_alone_is_all_that_is_left():
    shrunk, calls = shrink_steps([b"x", b"y", b"boom"], lambda c: True)
    assert shrunk == [b"boom"] and calls == 1


def test_the_budget_bounds_the_search_and_the_result_still_fired():
    steps = [bytes([i]) for i in range(40)] + [b"boom"]
    seen = []

    def fires(candidate):
        seen.append(candidate)
        return bytes([7]) in candidate and bytes([30]) in candidate

    shrunk, calls = shrink_steps(steps, fires, max_calls=5)
    assert calls <= 5 and len(seen) == calls
    assert fires(shrunk) and len(shrunk) <= len(steps)
