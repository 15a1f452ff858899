"""Taking a live connection out of a pool, passing over the dead ones.

A server that ends idle backends (``idle_session_timeout``, a failover,
``pg_terminate_backend``) can leave every pooled connection dead at once.
psycopg_pool's own ``check`` sleeps with a growing backoff (1 s, 2 s, 4 s ...)
after each connection that fails it, so a handful of dead connections cost many
seconds or the whole pool timeout. The saver checks here instead, with
:func:`~.health.is_dead` (no round trip): a dead connection is closed and handed
back as broken (the pool opens a replacement), and the next one is taken at
once, at most ``max_size + 1`` times; after that the pool is made of new
connections, and the last one taken is used whatever it looks like (a
connection lost later is the transaction's replay to handle).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from threadloom.checkpoint.postgres.health import is_dead

__all__ = ["alive_from_pool", "live_from_pool"]


def _attempts(pool: Any) -> int:
    return int(getattr(pool, "max_size", 10) or 10) + 1


@contextmanager
def live_from_pool(pool: Any) -> Iterator[Any]:
    """``pool.connection()``, skipping connections the server already closed."""
    attempts = _attempts(pool)
    for attempt in range(attempts):
        conn = pool.getconn()
        if attempt + 1 < attempts and is_dead(conn):
            conn.close()
            _discard(pool, conn)
            continue
        try:
            with conn:  # commit/rollback on exit, as pool.connection() does
                yield conn
        finally:
            pool.putconn(conn)
        return


@asynccontextmanager
async def alive_from_pool(pool: Any) -> AsyncIterator[Any]:
    """Async twin of :func:`live_from_pool`."""
    attempts = _attempts(pool)
    for attempt in range(attempts):
        conn = await pool.getconn()
        if attempt + 1 < attempts and is_dead(conn):
            await conn.close()
            await _adiscard(pool, conn)
            continue
        try:
            async with conn:
                yield conn
        finally:
            await pool.putconn(conn)
        return


def _discard(pool: Any, conn: Any) -> None:
    # as psycopg_pool's own failed check does: "found broken" at INFO level and a
    # replacement; putconn() would log a WARNING for every closed connection
    putconn = getattr(pool, "_putconn", None)
    if putconn is None:
        pool.putconn(conn)
    else:
        putconn(conn, from_getconn=True)


async def _adiscard(pool: Any, conn: Any) -> None:
    putconn = getattr(pool, "_putconn", None)
    if putconn is None:
        await pool.putconn(conn)
    else:
        await putconn(conn, from_getconn=True)
