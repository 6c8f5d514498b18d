"""The layering in DESIGN.md, enforced: a lower layer never imports a higher one.

Reads every module under kproto/ with ``ast`` (nothing is imported), so a layering slip
fails here even when the offending import sits inside a function.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3] / "kproto"

# What each layer may import from kproto (besides itself). The first matching prefix wins.
ALLOWED: list[tuple[str, set[str]]] = [
    # The tools tier: programs on top of the library (a tool may import any layer and other
    # tools; nothing below imports a tool: see test_nothing_below_imports_a_tool).
    ("kproto.tools", {"clock", "errors", "structs", "protocol", "messages", "codecs", "records", "net",
                      "metrics", "consumer", "transition_log", "fuzz", "tools"}),
    ("kproto.consumer.classic", {"clock", "errors", "structs", "protocol", "messages", "codecs", "records", "net",
                                 "metrics", "consumer", "transition_log"}),
    ("kproto.consumer.kip848", {"clock", "errors", "structs", "protocol", "messages", "codecs", "records", "net",
                                "metrics", "consumer", "transition_log"}),
    ("kproto.consumer.share", {"clock", "errors", "structs", "protocol", "messages", "codecs", "records", "net",
                               "metrics", "consumer", "transition_log"}),
    ("kproto.consumer", {"clock", "errors", "structs", "protocol", "messages", "codecs", "records", "net", "metrics",
                         "consumer", "transition_log"}),
    ("kproto.spark", {"errors", "structs", "consumer", "spark"}),
    # The event-loop shell: the consumer core and the KIP-848 engine's managers, on a loop.
    ("kproto.aio", {"clock", "errors", "structs", "net", "metrics", "consumer", "aio"}),
    ("kproto.net", {"clock", "errors", "structs", "protocol", "messages", "net"}),
    ("kproto.records", {"errors", "structs", "codecs", "records"}),
    ("kproto.codecs", {"errors", "codecs"}),
    ("kproto.metrics", {"errors", "metrics"}),
    ("kproto.messages", {"errors", "protocol", "messages"}),
    ("kproto.protocol", {"errors", "protocol"}),
    ("kproto.structs", set()),
    ("kproto.clock", set()),  # the client's one clock (monotonic ms)
    ("kproto.transition_log", set()),  # the consumer's structured state transitions (kproto.events logger)
    # kproto.errors: the hand-written base imports nothing, the generated per-code classes only
    # the base, the package's face both (checked below).
    ("kproto.errors", {"errors"}),
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


def _public_names() -> set[str]:
    """The names kproto/__init__.py exports (``__all__``): the tools use the public API."""
    tree = ast.parse((ROOT / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return {elt.value for elt in node.value.elts}  # type: ignore[attr-defined]
    return set()


PUBLIC = _public_names()


# kproto/__init__.py and __main__.py sit above every layer (the public names and the
# command line's dispatch), so only the layered packages (the tools among them) are checked.
MODULES = sorted(p for p in ROOT.rglob("*.py")
                 if p.parent != ROOT or p.stem in ("structs", "transition_log", "clock"))


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
        if module.startswith("kproto.tools.") and layer in PUBLIC:
            continue  # `from kproto import KafkaConsumer`: a tool uses the public API
        if layer is None or layer not in rule:
            bad.append(target)
    assert not bad, "{} imports {} (allowed layers: {})".format(module, sorted(bad), sorted(rule))


# The consumer's group-protocol engines (a KIP-932 share engine joins as "share"), the
# background-thread shell any of them may build on, and the shared core under them all.
ENGINES = ("classic", "kip848", "share")
SHELL = "background"
# The façades pick an engine.
CORE = [p for p in (ROOT / "consumer").glob("*.py") if p.stem not in ("kafka_consumer", "kafka_share_consumer")]
CORE += sorted((ROOT / "consumer" / "fetch").rglob("*.py")) + sorted((ROOT / "consumer" / "offsets").rglob("*.py"))


def _package_modules(name: str) -> list[pathlib.Path]:
    return sorted((ROOT / "consumer" / name).rglob("*.py"))


def _imports_package(path: pathlib.Path, name: str) -> bool:
    prefix = "kproto.consumer." + name
    return any(t == prefix or t.startswith(prefix + ".") for t in _kproto_imports(path, _module_name(path)))


def test_engines_never_import_each_other():
    for engine in ENGINES:
        for path in _package_modules(engine):
            others = [other for other in ENGINES if other != engine and _imports_package(path, other)]
            assert not others, "{} imports the {} engine".format(_module_name(path), others)


def test_the_shell_and_the_core_never_import_an_engine():
    assert _package_modules(SHELL), "the background-thread shell moved: update SHELL"
    for path in _package_modules(SHELL) + CORE:
        engines = [engine for engine in ENGINES if _imports_package(path, engine)]
        assert not engines, "{} imports the {} engine".format(_module_name(path), engines)
    for path in CORE:
        assert not _imports_package(path, SHELL), "{} (core) imports the shell".format(_module_name(path))


# Blocking network I/O is a network client's poll (the step that reads sockets and runs
# callbacks); the core builds requests and judges responses, and an engine drives the I/O
# (classic: its own loops; background engines: the network thread). kproto.net modules the
# core may use are the pure ones (ClusterMetadata is state the network thread updates; the
# core reads it and asks for updates, and names it in its signatures).
CORE_NET_MODULES = {"kproto.net.config", "kproto.net.backoff", "kproto.net.client_versions", "kproto.net.metadata"}


def _client_polls(path: pathlib.Path) -> list[str]:
    """``<...client...>.poll``, called or passed on: a receiver whose last name mentions a client."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr == "poll":
            receiver = node.value
            name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
            if "client" in name.lower():
                found.append("{}:{}".format(path.name, node.lineno))
    return sorted(found)


def test_the_shared_core_does_no_blocking_network_io():
    for path in CORE:
        module = _module_name(path)
        net = {t for t in _kproto_imports(path, module) if t.startswith("kproto.net")} - CORE_NET_MODULES
        assert not net, "{} (core) imports {}".format(module, sorted(net))
        assert not _client_polls(path), "{} (core) polls a network client: {}".format(module, _client_polls(path))


def test_the_io_checker_finds_client_polls(tmp_path):
    src = tmp_path / "x.py"
    src.write_text("def f(self, client, buffer):\n    self._client.poll(timeout_ms=1)\n    client.poll()\n"
                   "    buffer.poll()\n    self.poll()\n    step = client.poll\n")
    assert _client_polls(src) == ["x.py:2", "x.py:3", "x.py:6"]


def test_the_checker_resolves_relative_imports(tmp_path):
    # The checker itself must be able to fail: upward imports, absolute and relative, are found.
    src = tmp_path / "x.py"
    src.write_text("from kproto.consumer import subscription_state\n"
                   "def f():\n    from ..records import read_batches\n")
    assert _kproto_imports(src, "kproto.net.x") == {"kproto.consumer", "kproto.records"}


def test_the_errors_package_has_no_import_loop():
    # The generated per-code classes import only the hand-written base; the base imports nothing.
    def imports(name: str) -> set[str]:
        path = ROOT / "errors" / (name + ".py")
        return _kproto_imports(path, _module_name(path))

    assert imports("base") == set()
    assert imports("codes") == {"kproto.errors.base"}
    assert imports("__init__") == {"kproto.errors.base", "kproto.errors.codes"}
    assert sorted(p.stem for p in (ROOT / "errors").glob("*.py")) == ["__init__", "base", "codes"]


def test_nothing_below_imports_a_tool():
    # The tools (kproto.tools) sit on top of everything: only the CLI dispatch reaches them.
    users = [str(p.relative_to(ROOT.parent)) for p in ROOT.rglob("*.py")
             if not _module_name(p).startswith("kproto.tools") and p.name != "__main__.py"
             and "tools" in p.read_text()  # parse only the candidates: the messages are big
             and any(t == "kproto.tools" or t.startswith("kproto.tools.")
                     for t in _kproto_imports(p, _module_name(p)))]
    assert users == []


def test_the_command_line_only_dispatches_to_the_tools():
    main = ROOT / "__main__.py"
    imported = _kproto_imports(main, "kproto.__main__")
    assert imported and all(t.startswith("kproto.tools.") for t in imported), imported


# kproto.net's helpers (api_versions, timeouts, metadata_updater, channel_authenticator)
# are handed a ClientState (kproto/net/client_state.py), never the NetworkClient: no module
# of kproto.net but its __init__ imports client.py (not even for type checking), and none
# reads or writes another object's private attributes (``x._y`` with x other than self/cls).
NET_MODULES = sorted(p.stem for p in (ROOT / "net").glob("*.py") if p.stem != "__init__")


def _foreign_private_attributes(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not (node.attr.startswith("__") and node.attr.endswith("__"))
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            found.append("line {}: {}".format(node.lineno, ast.unparse(node)))
    return found


@pytest.mark.parametrize("name", NET_MODULES)
def test_net_helpers_are_handed_a_narrow_state_not_the_client(name):
    path = ROOT / "net" / (name + ".py")
    module = _module_name(path)
    assert name == "client" or "kproto.net.client" not in _kproto_imports(path, module), \
        "{} imports kproto.net.client: take a ClientState (or callables) instead".format(module)
    bad = _foreign_private_attributes(ast.parse(path.read_text(), filename=str(path)))
    assert not bad, "{} reaches into other objects' privates: {}".format(module, bad)


def test_the_net_helper_checker_finds_what_it_forbids(tmp_path):
    src = tmp_path / "x.py"
    src.write_text("from typing import TYPE_CHECKING\n"
                   "if TYPE_CHECKING:\n    from kproto.net.client import NetworkClient\n"
                   "def f(self, client, node):\n"
                   "    self._state.nodes, node.__class__\n"
                   "    return self._client._nodes, client._close_node(node)\n")
    assert "kproto.net.client" in _kproto_imports(src, "kproto.net.x")
    assert [b.split(": ")[1] for b in _foreign_private_attributes(ast.parse(src.read_text()))] == [
        "self._client._nodes", "client._close_node"]


def test_the_tools_raise_only_kproto_errors():
    # Every exception a tool raises is a kproto.errors class (a type checker sees one family;
    # a CLI catches KafkaError): no module of kproto.tools defines an exception of its own.
    own = []
    for path in sorted((ROOT / "tools").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    getattr(base, "id", getattr(base, "attr", "")).endswith(("Error", "Exception"))
                    for base in node.bases):
                own.append("{}:{}".format(path.relative_to(ROOT.parent), node.name))
    assert own == []
