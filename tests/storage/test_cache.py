"""The bounded LRU used for chunks, manifests, checkpoint states and list heads."""

from __future__ import annotations

from threadloom.checkpoint.storage.cache import LRU, Bounded


def test_bounded_by_entries_and_weight() -> None:
    lru: LRU[str, int] = LRU(max_entries=3, max_weight=10)
    for i, key in enumerate("abcd"):
        lru.put(key, i, weight=2)
    assert lru.get("a") is None and lru.get("d") == 3 and len(lru) == 3
    lru.get("b")  # b becomes most recent
    lru.put("e", 9, weight=6)
    assert lru.get("c") is None and lru.get("b") == 1 and lru.get("e") == 9
    lru.put("huge", 0, weight=11)  # heavier than the whole budget: not cached
    assert lru.get("huge") is None
    lru.discard_where(lambda k: k in ("b", "e"))
    assert len(lru) == 1
    lru.clear()
    assert len(lru) == 0


def test_bounded_keeps_the_most_recent_entries() -> None:
    """The count-only cache (states, list heads, ref rows, tasks) evicts the
    least recently used entry, a get or a re-put refreshing it."""
    cache: Bounded[str, int] = Bounded(max_entries=3)
    for i, key in enumerate("abc"):
        cache.put(key, i)
    assert cache.get("a") == 0  # a becomes most recent
    cache.put("b", 10)  # b too, with its new value
    cache.put("d", 3)  # evicts c, the least recent
    assert cache.get("c") is None and len(cache) == 3
    assert cache.items() == [("a", 0), ("b", 10), ("d", 3)]
    assert cache.pop("a") == 0 and cache.pop("a") is None
    cache.discard_where(lambda k: k == "b")
    assert cache.items() == [("d", 3)]
    cache.clear()
    assert len(cache) == 0


def test_bounded_with_no_room_stores_nothing() -> None:
    cache: Bounded[str, int] = Bounded(max_entries=0)
    cache.put("a", 1)
    assert cache.get("a") is None and len(cache) == 0
