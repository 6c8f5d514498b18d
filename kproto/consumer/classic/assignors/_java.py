"""Java collection semantics the assignors must reproduce to give Java's exact results.

Owns the few places where Apache Kafka's assignors depend on Java library behaviour rather
than on the algorithm: ``String.compareTo`` (UTF-16 code-unit order, not code-point order),
``String.hashCode``/``TopicPartition.hashCode``, and the iteration order of a
``java.util.HashMap``/``HashSet`` (bucket order, then insertion order within a bucket). The
sticky assignor's constrained algorithm iterates a HashMap of members, and the general
algorithm takes ``iterator().next()`` of a HashSet of partitions, so without these the
results would differ from the Java client's for the same input.

Not modelled: treeified HashMap bins (eight or more keys in one bucket of a table of at
least 64), which would need that many colliding member ids.
"""

from __future__ import annotations

from typing import Callable, Dict, Generic, Hashable, Iterable, List, TypeVar

from kproto.structs import TopicPartition

K = TypeVar("K", bound=Hashable)

_MASK32 = 0xFFFFFFFF


def java_str_key(s: str) -> bytes:
    """Sort key giving Java's ``String.compareTo`` order (UTF-16 code units, big-endian)."""
    return s.encode("utf-16-be", "surrogatepass")


def _to_int32(v: int) -> int:
    v &= _MASK32
    return v - (1 << 32) if v & 0x80000000 else v


def java_string_hash(s: str) -> int:
    """``String.hashCode()``: s[0]*31^(n-1) + ... over UTF-16 code units, as an int32."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return _to_int32(h)


def topic_partition_hash(tp: TopicPartition) -> int:
    """``org.apache.kafka.common.TopicPartition.hashCode()``."""
    return _to_int32(31 * ((31 + tp.partition) & _MASK32) + java_string_hash(tp.topic))


def _spread(h: int) -> int:
    # HashMap.hash(): the high half is folded into the low half before masking.
    h &= _MASK32
    return h ^ (h >> 16)


def default_capacity(n: int, initial_capacity: int = 16) -> int:
    """Table size of a ``new HashMap<>(initial_capacity)`` after ``n`` distinct puts."""
    cap = 1
    while cap < initial_capacity:  # HashMap.tableSizeFor
        cap *= 2
    while n > cap * 3 // 4:  # load factor 0.75
        cap *= 2
    return cap


def hash_order(keys: Iterable[K], hasher: Callable[[K], int], capacity: int) -> List[K]:
    """Iteration order of a HashMap of ``capacity`` whose keys were inserted in this order.

    A resize splits each bucket keeping relative order, so the final order is the
    insertion order stably sorted by bucket index in the final table.
    """
    mask = capacity - 1
    return sorted(keys, key=lambda k: _spread(hasher(k)) & mask)


def member_hash_order(member_ids: Iterable[str], initial_capacity: int = 16) -> List[str]:
    """Iteration order of a ``HashMap<String, ?>`` of member ids (default-constructed, as
    the coordinator's, unless ``initial_capacity`` says otherwise)."""
    ids = list(member_ids)
    return hash_order(ids, java_string_hash, default_capacity(len(ids), initial_capacity))


class JavaHashSet(Generic[K]):
    """A set that iterates in the order a default-constructed ``java.util.HashSet`` would.

    Only what the sticky assignor needs: add, discard, len, membership and ``first()``.
    """

    __slots__ = ("_hasher", "_seq", "_items", "_capacity")

    def __init__(self, hasher: Callable[[K], int]) -> None:
        self._hasher = hasher
        self._seq = 0
        self._items: Dict[K, int] = {}
        self._capacity = 16

    def add(self, item: K) -> None:
        if item in self._items:
            return
        self._seq += 1
        self._items[item] = self._seq
        # The table never shrinks; it doubles once the size passes 3/4 of it.
        while len(self._items) > self._capacity * 3 // 4:
            self._capacity *= 2

    def discard(self, item: K) -> None:
        self._items.pop(item, None)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):
        mask = self._capacity - 1
        return iter(sorted(self._items, key=lambda k: (_spread(self._hasher(k)) & mask, self._items[k])))

    def first(self) -> K:
        return next(iter(self))
