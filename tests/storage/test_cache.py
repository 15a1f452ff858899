"""The bounded LRU used for chunks, manifests, checkpoint states and list heads."""

from __future__ import annotations

from threadloom.checkpoint.storage.cache import LRU


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
