"""The layering in DESIGN.md, enforced: a lower layer never imports a higher one.

Reads every module under kproto/ with ``ast`` (nothing is imported), so a layering slip
fails here even when the offending import sits inside a function.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "kproto"

# What each layer may import from kproto (besides itself). The first matching prefix wins.
ALLOWED: list[tuple[str, set[str]]] = [
    ("kproto.consumer.classic", {"errors", "structs", "protocol", "messages", "codecs", "records", "net", "metrics",
                                 "consumer"}),
    ("kproto.consumer.kip848", {"errors", "structs", "protocol", "messages", "codecs", "records", "net", "metrics",
                                "consumer"}),
    ("kproto.consumer.share", {"errors", "structs", "protocol", "messages", "codecs", "records", "net", "metrics",
                               "consumer"}),
    ("kproto.consumer", {"errors", "structs", "protocol", "messages", "codecs", "records", "net", "metrics",
                         "consumer"}),
    ("kproto.spark", {"errors", "structs", "consumer", "spark"}),
    ("kproto.net", {"errors", "structs", "protocol", "messages", "net"}),
    ("kproto.records", {"errors", "structs", "codecs", "records"}),
    ("kproto.codecs", {"errors", "codecs"}),
    ("kproto.metrics", {"errors", "metrics"}),
    ("kproto.messages", {"errors", "protocol", "messages"}),
    ("kproto.protocol", {"errors", "protocol"}),
    ("kproto.structs", set()),
    ("kproto.errors", set()),
]


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _kproto_imports(path: pathlib.Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target]
            if target == "kproto":  # `from kproto import errors`
                names = ["kproto." + alias.name for alias in node.names]
        else:
            continue
        found.update(n for n in names if n == "kproto" or n.startswith("kproto."))
    return found


# kproto/__init__.py, __main__.py and embedded.py sit above every layer (the public names,
# the CLI and its demo broker), so only the layered packages are checked.
MODULES = sorted(p for p in ROOT.rglob("*.py") if p.parent != ROOT or p.stem in ("errors", "structs"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_module_imports_only_lower_layers(path):
    module = _module_name(path)
    rule = next((allowed for prefix, allowed in ALLOWED
                 if module == prefix or module.startswith(prefix + ".")), None)
    assert rule is not None, "{} belongs to no layer in DESIGN.md".format(module)
    bad = []
    for target in _kproto_imports(path, module):
        layer = target.split(".")[1] if "." in target else None
        if layer is not None and layer.startswith("__"):
            continue  # `from kproto import __version__` is a constant, not a layer
        if layer is None or layer not in rule:
            bad.append(target)
    assert not bad, "{} imports {} (allowed layers: {})".format(module, sorted(bad), sorted(rule))


def test_engines_never_import_each_other():
    engines = ("classic", "kip848", "share")
    for engine in engines:
        others = [e for e in engines if e != engine]
        for path in (ROOT / "consumer" / engine).rglob("*.py") if (ROOT / "consumer" / engine).exists() else []:
            module = _module_name(path)
            imports = _kproto_imports(path, module)
            assert not any(t.startswith("kproto.consumer." + other) for other in others for t in imports), module


def test_the_checker_resolves_relative_imports(tmp_path):
    # The checker itself must be able to fail: upward imports, absolute and relative, are found.
    src = tmp_path / "x.py"
    src.write_text("from kproto.consumer import subscription_state\n"
                   "def f():\n    from ..records import read_batches\n")
    assert _kproto_imports(src, "kproto.net.x") == {"kproto.consumer", "kproto.records"}
