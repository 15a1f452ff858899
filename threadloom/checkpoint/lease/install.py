"""Teach a saver's executor the lease operations.

Each backend answers :mod:`.ops` with its own handlers (``memory.py``,
``sqlite.py``, ``postgres.py``, ``redis.py``); this module finds which
backend a saver runs on and registers them with its executor, once.
Savers not built on threadloom's storage core have no lease support.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["backend_of", "ensure_installed"]

_lock = threading.Lock()
_done: set[str] = set()


def backend_of(saver: Any) -> str | None:
    """``"memory"``, ``"sqlite"``, ``"postgres"``, ``"redis"`` or None (no leases)."""
    from threadloom.checkpoint.storage.core import StorageSaver

    if not isinstance(saver, StorageSaver):
        return None
    if hasattr(saver, "planner") and hasattr(saver, "layout"):
        return "redis"
    ex = getattr(saver, "executor", None)
    name = type(ex).__name__
    if name == "MemoryExecutor":
        return "memory"
    if name in ("SqliteExecutor", "AsyncSqliteExecutor"):
        return "sqlite"
    if name == "PgExecutor":
        return "postgres"
    return None


def ensure_installed(saver: Any) -> str | None:
    """Register the lease handlers for ``saver``'s backend; return the backend name."""
    backend = backend_of(saver)
    if backend == "memory":
        ex = saver.executor
        if not getattr(ex, "_tl_leases", False):
            from threadloom.checkpoint.lease.memory import handlers

            with _lock:
                ex._dispatch.update(handlers(ex))
                ex._tl_leases = True
    elif backend is not None and backend not in _done:
        with _lock:
            if backend not in _done:
                _install_module(backend)
                _done.add(backend)
    return backend


def _install_module(backend: str) -> None:
    if backend == "sqlite":
        from threadloom.checkpoint.lease.sqlite import PLANS
        from threadloom.checkpoint.sqlite import queries

        queries._PLANS.update(PLANS)
    elif backend == "postgres":
        from threadloom.checkpoint.lease.postgres import PLANNERS
        from threadloom.checkpoint.postgres import executor

        executor._PLANNERS.update(PLANNERS)
    elif backend == "redis":
        _install_redis()


def _install_redis() -> None:
    import hashlib

    from threadloom.checkpoint.lease.redis import fence_plans, fenced_scripts, handlers
    from threadloom.checkpoint.redis import keys, saver
    from threadloom.checkpoint.redis.executor import Call, RedisPlanner

    extra = fenced_scripts(keys.SCRIPTS)
    keys.SCRIPTS.update(extra)
    saver.SHAS.update({n: hashlib.sha1(b.encode()).hexdigest() for n, b in extra.items()})
    for name, fn in {**handlers(Call), **fence_plans(RedisPlanner, Call)}.items():
        setattr(RedisPlanner, name, fn)
