"""Structural mutation of seed requests: new requests from a request tree that reached new
code, each still a request the schema can encode.

Owns the operations coverage feedback applies to a seed (a decoded request tree, the
generated message classes of :mod:`kproto.messages`): a field at any depth given the value
a freshly generated request has at the same place (``regen``), or another seed of the same
API has there (``splice``); an integer nudged to a neighbour, its negation or an edge
(``int``); an array with an element duplicated, dropped or all gone (``array``); a field
given a value the broker issued under its name in an earlier answer, or every field a
harvested context names at once (``answer``: the member id and epoch of a heartbeat answer,
the producer id and epoch of an InitProducerId answer). One to three of them are stacked (AFL's "havoc" on a tree rather than on bytes). A byte-level
mutant of the result is the mutators' business (:mod:`kproto.tools.fuzz.mutators`); a
value a field's type cannot hold makes the encoder refuse the tree, and the caller then
sends the seed as it is.
"""

from __future__ import annotations

import copy
import random
import uuid
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator, Optional

from kproto.tools.fuzz import schema
from kproto.tools.fuzz.values import MAX_WAIT_MS, is_wait

if TYPE_CHECKING:
    from kproto.tools.fuzz.dictionary import Dictionary

Path = tuple[Any, ...]  # attribute names and list indexes from the root

LONGEST_WAIT_MS = 1000  # the longest wait a mutated request keeps
_INT_EDGES = (-(1 << 31), -(1 << 15), -1, 0, 1, (1 << 15) - 1, (1 << 31) - 1)


def _is_struct(value: Any) -> bool:
    return hasattr(value, "_fields")


def clone(tree: Any) -> Any:
    """A deep copy of a request tree; a memoryview (a decoded request's bytes point into
    its frame, and ``copy.deepcopy`` cannot copy one) becomes bytes."""
    if _is_struct(tree):
        out = copy.copy(tree)
        for name in tree._fields:
            setattr(out, name, clone(getattr(tree, name)))
        return out
    if isinstance(tree, list):
        return [clone(v) for v in tree]
    if isinstance(tree, memoryview):
        return bytes(tree)
    return tree  # ints, strings, bytes, uuids, None: immutable


def walk(tree: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every (path, value) below ``tree``, depth first (structs' fields and list elements;
    bytes, strings and numbers are leaves)."""
    if _is_struct(tree):
        for name in tree._fields:
            value = getattr(tree, name)
            yield path + (name,), value
            yield from walk(value, path + (name,))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield path + (i,), value
            yield from walk(value, path + (i,))


def get(tree: Any, path: Path) -> tuple[bool, Any]:
    """(found, value) at ``path`` (a list index out of range: not found)."""
    node = tree
    for key in path:
        if isinstance(key, int):
            if not isinstance(node, list) or key >= len(node):
                return False, None
            node = node[key]
        else:
            if not _is_struct(node) or key not in node._fields:
                return False, None
            node = getattr(node, key)
    return True, node


def put(tree: Any, path: Path, value: Any) -> None:
    parent = get(tree, path[:-1])[1]
    key = path[-1]
    if isinstance(key, int):
        parent[key] = value
    else:
        setattr(parent, key, value)


def _regen(out: Any, donor: Any, rng: random.Random) -> Optional[str]:
    """A field of ``out`` given the value ``donor`` has at the same place."""
    paths = [p for p, _ in walk(out) if get(donor, p)[0]]
    if not paths:
        return None
    path = rng.choice(paths)
    put(out, path, clone(get(donor, path)[1]))
    return ".".join(map(str, path))


def _nudge(out: Any, rng: random.Random) -> Optional[str]:
    ints = [(p, v) for p, v in walk(out) if isinstance(v, int) and not isinstance(v, bool)]
    if not ints:
        return None
    path, v = rng.choice(ints)
    new = rng.choice((v + 1, v - 1, -v, v * 2, v // 2, rng.choice(_INT_EDGES)))
    put(out, path, new)
    return "{}={}".format(".".join(map(str, path)), new)


def _array(out: Any, rng: random.Random) -> Optional[str]:
    lists = [(p, v) for p, v in walk(out) if isinstance(v, list)]
    if not lists:
        return None
    path, items = rng.choice(lists)
    op = rng.choice(("dup", "drop", "empty") if items else ("empty",))
    if op == "dup":
        i = rng.randrange(len(items))
        items.insert(rng.randrange(len(items) + 1), clone(items[i]))
    elif op == "drop":
        del items[rng.randrange(len(items))]
    else:
        items.clear()
    return "{} {}".format(".".join(map(str, path)), op)


@lru_cache(maxsize=None)
def _field_type(struct: str, attr: str) -> Optional[str]:
    """A struct's field's schema type (an array's element type), None when unknown."""
    try:
        fields = schema.fields_of(struct)
    except KeyError:
        return None
    return next((f.base_type for f in fields if f.attr == attr), None)


def typed_leaves(tree: Any) -> Iterator[tuple[Path, str, str]]:
    """(path, field name, schema type) of every int, string and uuid below ``tree``."""
    for path, value in walk(tree):
        if isinstance(value, bool) or not isinstance(value, (int, str, uuid.UUID)):
            continue
        i = len(path) - 1 if isinstance(path[-1], str) else len(path) - 2
        if i < 0 or not isinstance(path[i], str):
            continue
        parent = get(tree, path[:i])[1]
        type_name = _field_type(type(parent).__qualname__, path[i])
        if type_name is not None:
            yield path, path[i], type_name


def _answer(out: Any, dictionary: "Dictionary", rng: random.Random) -> Optional[str]:
    """Fields given values the broker issued: every field one context names (half the
    time, when there are contexts), else one field a harvested value of its name."""
    fields = list(typed_leaves(out))
    if dictionary.contexts and rng.random() < 0.5:
        context = rng.choice(dictionary.contexts)
        done = []
        for path, name, type_name in fields:
            value = dictionary.from_context(context, name, type_name)
            if value is not None:
                put(out, path, value)
                done.append(name)
        if done:
            return "context " + ",".join(sorted(set(done)))
    rng.shuffle(fields)
    for path, name, type_name in fields:
        value = dictionary.value(name, type_name, rng)
        if value is not None:
            put(out, path, value)
            return "{}={}".format(".".join(map(str, path)), value)
    return None


def mutate(seed: Any, fresh: Any, other: Optional[Any], rng: random.Random,
           dictionary: Optional["Dictionary"] = None) -> tuple[Any, list[str]]:
    """A copy of ``seed`` with one to three structural changes stacked: ``fresh`` is a
    request of the same API and version generated just now (the donor of ``regen``),
    ``other`` another seed of the same API (the donor of ``splice``) or None,
    ``dictionary`` the values the broker issued (``answer``'s) or None. Returns the tree
    and what was done (for the report's notes)."""
    out = clone(seed)
    done: list[str] = []
    shorten_waits(out, rng)
    for _ in range(rng.choice((1, 1, 2, 3))):
        op = rng.choice(("regen", "regen", "splice", "int", "array", "answer", "answer"))
        if op == "answer" and dictionary is not None:
            what = _answer(out, dictionary, rng)
        elif op == "splice" and other is not None:
            what = _regen(out, other, rng)
        elif op == "int":
            what = _nudge(out, rng)
        elif op == "array":
            what = _array(out, rng)
        else:
            op, what = "regen", _regen(out, fresh, rng)
        if what is not None:
            done.append("{} {}".format(op, what))
    shorten_waits(out, rng)
    return out, done


def shorten_waits(tree: Any, rng: random.Random) -> None:
    """Waits and timeouts past LONGEST_WAIT_MS made short again (a nudge doubles them, an
    edge makes them 2^31-1): a valid request must not legitimately outlive the hang
    bound, nor may a seed spend the run's time waiting. A session timeout makes nothing
    wait and keeps its value (the group coordinator refuses one under 6 s)."""
    for path, value in list(walk(tree)):
        name = next((k for k in reversed(path) if isinstance(k, str)), "")
        if isinstance(value, int) and not isinstance(value, bool) and \
                value > LONGEST_WAIT_MS and is_wait(name) and "session" not in name:
            put(tree, path, rng.choice((0, 10, MAX_WAIT_MS)))


__all__ = ["mutate", "clone", "walk", "get", "put", "typed_leaves", "shorten_waits"]
