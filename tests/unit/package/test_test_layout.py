"""The tests' own layering: a test area (``tests/unit/<x>/``, ``tests/integration/<x>/``)
imports from its own package, from ``tests/support`` (fixtures used across areas) and the
shared test ground (``tests.brokers``, ``tests.threads``, ...), never from another area."""

from __future__ import annotations

import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parents[2]


def _area(path: pathlib.Path) -> str:
    rel = path.relative_to(TESTS).parts
    return "{}.{}".format(rel[0], rel[1])


def _borrowed(source: str, area: str) -> set[str]:
    """What a module of ``area`` (e.g. "unit.net") imports from other test areas."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            target = node.module
            if (target.startswith(("tests.unit.", "tests.integration."))
                    and not target.startswith("tests." + area + ".") and target != "tests." + area):
                found.add(target)
    return found


def test_no_test_area_imports_another():
    bad = {}
    for kind in ("unit", "integration"):
        for path in sorted((TESTS / kind).rglob("*.py")):
            if len(path.relative_to(TESTS).parts) < 3:
                continue  # tests/unit/__init__.py
            borrowed = _borrowed(path.read_text(), _area(path))
            if borrowed:
                bad[str(path.relative_to(TESTS))] = sorted(borrowed)
    assert bad == {}, "move what is shared to tests/support: {}".format(bad)


def test_the_checker_finds_a_borrowed_fixture():
    source = ("from tests.unit.fetch.helpers import make\nfrom tests.support.clock import FakeClock\n"
              "from tests.unit.net.polling import wait\nfrom tests.brokers import produce\n")
    assert _borrowed(source, "unit.net") == {"tests.unit.fetch.helpers"}
