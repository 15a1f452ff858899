"""Small bounded LRU caches (thread-safe enough for the GIL: single dict ops).

The storage core keeps two: decoded list chunks by content hash (shared by
every version, fork and copy that holds the chunk) and the writer's last
stored list per ``(thread, ns, channel)`` (what makes delta detection O(1)
queries). Both are bounded so a long-lived process does not grow.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Generic, TypeVar

__all__ = ["LRU", "Bounded"]

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """Least-recently-used map bounded by entry count and by a total weight."""

    def __init__(self, max_entries: int = 1024, max_weight: int = 64 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._weight = 0

    def get(self, key: K) -> V | None:
        item = self._data.get(key)
        if item is None:
            return None
        try:
            self._data.move_to_end(key)
        except KeyError:  # evicted concurrently
            pass
        return item[0]

    def put(self, key: K, value: V, weight: int = 1) -> None:
        data = self._data
        if key not in data and len(data) < self.max_entries:  # the usual case: a new key
            total = self._weight + weight
            if total <= self.max_weight:
                data[key] = (value, weight)
                self._weight = total
                return
        if self.max_entries <= 0 or weight > self.max_weight:
            return
        old = self._data.pop(key, None)
        if old is not None:
            self._weight -= old[1]
        self._data[key] = (value, weight)
        self._weight += weight
        while len(self._data) > self.max_entries or self._weight > self.max_weight:
            _, (_, w) = self._data.popitem(last=False)
            self._weight -= w

    def pop(self, key: K) -> Any:
        item = self._data.pop(key, None)
        if item is not None:
            self._weight -= item[1]
        return item

    def discard_where(self, predicate: Any) -> None:
        """Drop every entry whose key satisfies ``predicate``."""
        for key in [k for k in self._data if predicate(k)]:
            self.pop(key)

    def clear(self) -> None:
        self._data.clear()
        self._weight = 0

    def __len__(self) -> int:
        return len(self._data)


class Bounded(Generic[K, V]):
    """Least-recently-used map bounded by entry count only (same interface as
    :class:`LRU`, ``weight`` ignored): for caches whose entries are counted, not
    weighed (checkpoint states, list heads, ref rows, written tasks). Values
    are stored bare, not in ``(value, weight)`` pairs: a put costs less, and a
    long-lived memory saver keeps one tracked object fewer per entry for the
    garbage collector to walk."""

    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is None:
            return None
        try:
            self._data.move_to_end(key)
        except KeyError:  # evicted concurrently
            pass
        return value

    def put(self, key: K, value: V, weight: int = 1) -> None:
        data = self._data
        if key in data:
            data.move_to_end(key)
        elif len(data) >= self.max_entries:
            if self.max_entries <= 0:
                return
            while len(data) >= self.max_entries:
                data.popitem(last=False)
        data[key] = value

    def pop(self, key: K) -> V | None:
        return self._data.pop(key, None)

    def discard_where(self, predicate: Any) -> None:
        """Drop every entry whose key satisfies ``predicate``."""
        for key in [k for k in self._data if predicate(k)]:
            self._data.pop(key, None)

    def items(self) -> list[tuple[K, V]]:
        """The entries, least recently used first (a snapshot)."""
        return list(self._data.items())

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)
