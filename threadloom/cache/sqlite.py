"""``SqliteCache``: node cache in a SQLite file, shared across processes."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from threadloom.cache.base import BaseCache, FullKey, Namespace

__all__ = ["SqliteCache"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cache (
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    expiry REAL,
    encoding TEXT NOT NULL,
    val BLOB NOT NULL,
    PRIMARY KEY (ns, key)
)
"""
_GET = "SELECT encoding, val, expiry FROM cache WHERE ns = ? AND key = ?"
_DELETE = "DELETE FROM cache WHERE ns = ? AND key = ?"
_UPSERT = (
    "INSERT INTO cache (ns, key, expiry, encoding, val) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (ns, key) DO UPDATE SET expiry = excluded.expiry, "
    "encoding = excluded.encoding, val = excluded.val"
)
_CLEAR_NS = "DELETE FROM cache WHERE ns = ?"
_CLEAR_ALL = "DELETE FROM cache"


def _ns(ns: Namespace) -> str:
    return ",".join(ns)


class SqliteCache(BaseCache):
    """Cache rows ``(ns, key, expiry, encoding, val)`` in ``path`` (``":memory:"`` works)."""

    def __init__(self, *, path: str = ":memory:", serde: Any = None) -> None:
        super().__init__(serde=serde)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(_SCHEMA)
        self._lock = threading.Lock()

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        now = time.time()
        found: dict[FullKey, tuple[str, bytes]] = {}
        with self._lock:
            for ns, key in keys:
                row = self._conn.execute(_GET, (_ns(ns), key)).fetchone()
                if row is None:
                    continue
                encoding, val, expiry = row
                if expiry is not None and expiry <= now:
                    self._conn.execute(_DELETE, (_ns(ns), key))
                    continue
                found[(ns, key)] = (encoding, bytes(val))
        return {k: self.serde.loads_typed(v) for k, v in found.items()}

    def set(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        now = time.time()
        rows = []
        for (ns, key), (value, ttl) in pairs.items():
            encoding, blob = self.serde.dumps_typed(value)
            rows.append((_ns(ns), key, now + ttl if ttl else None, encoding, blob))
        with self._lock:
            self._conn.executemany(_UPSERT, rows)

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        with self._lock:
            if namespaces is None:
                self._conn.execute(_CLEAR_ALL)
            else:
                self._conn.executemany(_CLEAR_NS, [(_ns(ns),) for ns in namespaces])

    def close(self) -> None:
        self._conn.close()
