"""``InMemoryCache``: a process-local cache, values stored serialized (so copies)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from threadloom.cache.base import BaseCache, FullKey, Namespace

__all__ = ["InMemoryCache"]


class InMemoryCache(BaseCache):
    """Thread-safe dict ``{namespace: {key: (tag, bytes, expires_at)}}``."""

    def __init__(self, *, serde: Any = None) -> None:
        super().__init__(serde=serde)
        self._data: dict[Namespace, dict[str, tuple[str, bytes, float | None]]] = {}
        self._lock = threading.Lock()

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        now = time.time()
        out: dict[FullKey, Any] = {}
        with self._lock:
            for ns, key in keys:
                entry = self._data.get(ns, {}).get(key)
                if entry is None:
                    continue
                tag, blob, expires = entry
                if expires is not None and expires <= now:
                    del self._data[ns][key]
                    continue
                out[(ns, key)] = (tag, blob)
        return {k: self.serde.loads_typed(v) for k, v in out.items()}

    def set(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        now = time.time()
        encoded = {
            k: (*self.serde.dumps_typed(v), now + ttl if ttl else None)
            for k, (v, ttl) in pairs.items()
        }
        with self._lock:
            for (ns, key), entry in encoded.items():
                self._data.setdefault(ns, {})[key] = entry

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        with self._lock:
            if namespaces is None:
                self._data.clear()
            else:
                for ns in namespaces:
                    self._data.pop(tuple(ns), None)
