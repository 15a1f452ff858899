"""Which lease backend a saver runs on.

The executors answer the lease operations themselves (their dispatch tables
include the handlers of ``memory.py``, ``sqlite.py``, ``postgres.py``,
``redis.py``); savers not built on threadloom's storage core have no leases.
"""

from __future__ import annotations

from typing import Any

__all__ = ["backend_of"]

_EXECUTORS = {
    "MemoryExecutor": "memory",
    "SqliteExecutor": "sqlite",
    "PgExecutor": "postgres",
}


def backend_of(saver: Any) -> str | None:
    """``"memory"``, ``"sqlite"``, ``"postgres"``, ``"redis"`` or None (no leases)."""
    from threadloom.checkpoint.storage.core import StorageSaver

    if not isinstance(saver, StorageSaver):
        return None
    if hasattr(saver, "planner") and hasattr(saver, "layout"):
        return "redis"
    return _EXECUTORS.get(type(getattr(saver, "executor", None)).__name__)
